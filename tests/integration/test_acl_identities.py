"""The per-tenant ACL identity set kept by a trigger equals a scan of the documents, through
inserts, ACL changes, duplicates, deletes and COPY — so visibility never scans the corpus."""

from __future__ import annotations

import secrets
from typing import Any

import pytest

from service.db.tenants import acl_identities, create_tenant

pytestmark = pytest.mark.integration


async def scan(conn: Any, tenant: str) -> frozenset[str]:
    rows = await conn.fetch(
        "SELECT DISTINCT unnest(acl) AS i FROM documents WHERE tenant_id = $1", tenant
    )
    return frozenset(r["i"] for r in rows)


async def test_trigger_kept_identities_always_equal_a_scan(runtime: Any) -> None:
    t, other = f"acl-{secrets.token_hex(3)}", f"acl-{secrets.token_hex(3)}"
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, t)
        await create_tenant(conn, other)

        async def doc(tenant: str, doc_id: str, acl: list[str]) -> None:
            await conn.execute(
                "INSERT INTO documents (tenant_id, doc_id, content_hash, acl)"
                " VALUES ($1, $2, 'h', $3)"
                " ON CONFLICT (tenant_id, doc_id) DO UPDATE SET acl = EXCLUDED.acl",
                tenant,
                doc_id,
                acl,
            )

        async def check(expected: set[str]) -> None:
            assert await acl_identities(conn, t) == await scan(conn, t) == expected

        await doc(t, "a", ["group:eng", "group:eng", "user:ravi"])  # a duplicate in one ACL
        await doc(t, "b", ["group:eng", "public"])
        await doc(other, "x", ["group:hr"])  # another tenant's identities stay its own
        await check({"group:eng", "user:ravi", "public"})
        await doc(t, "a", ["group:sales"])  # an ACL change (upsert)
        await check({"group:eng", "group:sales", "public"})
        await conn.execute("UPDATE documents SET status = 'failed' WHERE tenant_id = $1", t)
        await check({"group:eng", "group:sales", "public"})  # not an ACL change
        await conn.execute("DELETE FROM documents WHERE tenant_id = $1 AND doc_id = 'b'", t)
        await check({"group:sales"})
        await conn.copy_records_to_table(
            "documents",
            records=[(t, "c", "h", ["group:ops", "group:sales"])],
            columns=["tenant_id", "doc_id", "content_hash", "acl"],
        )
        await check({"group:ops", "group:sales"})
        await conn.execute("DELETE FROM documents WHERE tenant_id = $1", t)
        await check(set())
        assert await acl_identities(conn, other) == {"group:hr"}
        await conn.execute("DELETE FROM tenants WHERE tenant_id = ANY($1::text[])", [t, other])
        assert await acl_identities(conn, other) == frozenset()
