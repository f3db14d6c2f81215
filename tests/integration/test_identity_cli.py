"""`ragline tenants set|show`, `keys create --expires-in|rotate`, `platform-keys`, `audit ls` and
`usage report` as an operator runs them, against the test database."""

from __future__ import annotations

import asyncio
import csv
import io
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from service.cli import main
from service.db.tenants import create_tenant

pytestmark = pytest.mark.integration


@pytest.fixture
def cli_env(settings: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RAGLINE_DATABASE_URL", settings.database.url)
    monkeypatch.setenv("RAGLINE_STORAGE_STATE_DIR", str(tmp_path))
    return tmp_path


async def ragline(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = await asyncio.to_thread(main, list(argv))
    return code, capsys.readouterr().out.strip()


async def test_tenant_jwt_keys_and_the_audit_trail(
    cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (await ragline(capsys, "tenants", "create", "clid"))[0] == 0
    secret_file = cli_env / "hs.secret"
    secret = "s" * 40
    secret_file.write_text(secret)
    jwks = cli_env / "jwks.json"
    jwks.write_text('{"keys": []}')
    code, out = await ragline(
        capsys,
        "tenants", "set", "clid",
        "--jwt-issuer", "https://kc.test/realms/clid",
        "--jwt-audience", "ragline",
        "--jwt-jwks-file", str(jwks),
        "--group-prefix", "kc-",
        "--group-name", "0f3c=eng",
        "--json",
    )  # fmt: skip
    assert code == 0 and json.loads(out)["issuer"] == "https://kc.test/realms/clid"
    code, out = await ragline(capsys, "tenants", "show", "clid")
    shown = json.loads(out)["jwt"]
    assert shown["jwks_file"] == str(jwks) and shown["group_names"] == {"0f3c": "eng"}
    code, _ = await ragline(
        capsys, "tenants", "set", "clid", "--jwt-issuer", "i", "--jwt-audience", "a"
    )
    assert code == 2  # no key source: bad usage, nothing changed
    code, out = await ragline(
        capsys,
        "tenants", "set", "clid",
        "--jwt-issuer", "https://hs.test", "--jwt-audience", "a",
        "--jwt-hs256-secret-file", str(secret_file),
    )  # fmt: skip
    assert code == 0 and secret not in out
    assert secret not in (await ragline(capsys, "tenants", "show", "clid"))[1]

    code, out = await ragline(
        capsys, "keys", "create", "--tenant", "clid", "--user", "u", "--expires-in", "90d", "--json"
    )
    made = json.loads(out)
    assert code == 0 and made["expires_at"]
    code, out = await ragline(capsys, "keys", "rotate", made["key_id"], "--overlap", "1m", "--json")
    rotated = json.loads(out)
    assert code == 0 and rotated["key_id"] != made["key_id"]
    code, out = await ragline(capsys, "keys", "ls", "--tenant", "clid", "--json")
    listed = {k["key_id"]: k for k in json.loads(out)}
    assert listed[rotated["key_id"]]["rotated_from"] == made["key_id"]
    assert made["key"] not in out and rotated["key"] not in out
    assert (await ragline(capsys, "keys", "revoke", rotated["key_id"]))[0] == 0
    code, _ = await ragline(
        capsys, "keys", "create", "--tenant", "clid", "--user", "u", "--expires-in", "soon"
    )
    assert code == 2

    code, out = await ragline(capsys, "platform-keys", "create", "--json")
    platform = json.loads(out)
    assert code == 0 and platform["key"].startswith("rp_")

    code, out = await ragline(capsys, "audit", "ls", "--tenant", "clid", "--json")
    rows = json.loads(out)
    actions = [r["action"] for r in rows]
    assert actions[:4] == ["key.revoke", "key.rotate", "key.create", "jwt.set"]
    assert all(r["actor_kind"] == "cli" and r["tenant_id"] == "clid" for r in rows)
    assert rows[2]["details"]["user"] == "u" and rows[3]["details"]["hs256_secret_set"] is True
    for leaked in (secret, made["key"], rotated["key"], platform["key"]):
        assert leaked not in out
    code, out = await ragline(capsys, "audit", "ls", "--json", "--action", "platform_key.create")
    assert platform["key_id"] in out and platform["key"] not in out


async def test_usage_report_by_day_key_and_user(
    cli_env: Path, capsys: pytest.CaptureFixture[str], runtime: Any
) -> None:

    now = datetime.now(UTC).replace(hour=12, minute=0, second=0, microsecond=0)
    yesterday = now - timedelta(days=1)
    rows = [
        # tenant, key, user, at, status, tokens in/out, total ms
        ("billco", "k1", "ana", yesterday, 200, 10, 5, 100.0),
        ("billco", "k1", "bo", now, 200, 20, 7, 300.0),
        ("billco", "k2", "ana", now, 500, 0, 0, 50.0),
        ("billco", "", "jwt-user", now, 200, 1, 1, 10.0),
        ("otherco", "k9", "ana", now, 200, 999, 999, 1.0),  # never in billco's report
    ]
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, "billco")
        await conn.executemany(
            "INSERT INTO usage_records (request_id, tenant_id, key_id, user_id, created_at, route,"
            " status, code, tokens_in, tokens_out, total_ms)"
            " VALUES ($1, $2, $3, $4, $5, 'answer', $6, 'ok', $7, $8, $9)",
            [(f"r{i}", *r) for i, r in enumerate(rows)],
        )
    code, out = await ragline(
        capsys, "usage", "report", "--tenant", "billco", "--since", "7d", "--by", "user",
        "--format", "json",
    )  # fmt: skip
    assert code == 0
    by_user = {r["group"]: r for r in json.loads(out)["rows"]}
    assert set(by_user) == {"ana", "bo", "jwt-user"}
    assert (by_user["ana"]["requests"], by_user["ana"]["tokens_in"]) == (2, 10)
    assert by_user["ana"]["errors"] == 1 and by_user["bo"]["tokens_out"] == 7
    code, out = await ragline(
        capsys, "usage", "report", "--tenant", "billco", "--since", "7d", "--by", "key"
    )
    table = list(csv.DictReader(io.StringIO(out)))
    assert [(r["key"], r["requests"], r["tokens_in"]) for r in table] == [
        ("(jwt)", "1", "1"),
        ("k1", "2", "30"),
        ("k2", "1", "0"),
    ]
    code, out = await ragline(
        capsys, "usage", "report", "--tenant", "billco", "--since", "7d", "--by", "day"
    )
    days = {r["day"]: int(r["requests"]) for r in csv.DictReader(io.StringIO(out))}
    assert days == {yesterday.strftime("%Y-%m-%d"): 1, now.strftime("%Y-%m-%d"): 3}
    since_today = now.replace(hour=0).isoformat()
    code, out = await ragline(
        capsys, "usage", "report", "--tenant", "billco", "--since", since_today, "--by", "day"
    )
    assert [r["day"] for r in csv.DictReader(io.StringIO(out))] == [now.strftime("%Y-%m-%d")]
    code, _ = await ragline(capsys, "usage", "report", "--tenant", "nope", "--since", "7d")
    assert code == 2


async def test_cli_indexing_runs_are_audited_without_paths_or_text(
    settings: Any, embedder: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to((settings.state_dir / "models").resolve())
    monkeypatch.setenv("RAGLINE_DATABASE_URL", settings.database.url)
    monkeypatch.setenv("RAGLINE_STORAGE_STATE_DIR", str(state))
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "plan.md").write_text("# Plan\n\nThe albatross migration starts in March.\n")
    assert (await ragline(capsys, "tenants", "create", "idxaud"))[0] == 0
    code, _ = await ragline(
        capsys, "index", "add", str(docs), "--tenant", "idxaud", "--allow", "group:eng", "--json"
    )
    assert code == 0
    code, _ = await ragline(capsys, "index", "rm", "plan.md", "--tenant", "idxaud", "--json")
    assert code == 0
    code, out = await ragline(capsys, "audit", "ls", "--tenant", "idxaud", "--json")
    rows = json.loads(out)
    assert [r["action"] for r in rows] == ["documents.remove", "documents.add"]
    assert rows[1]["details"]["allow"] == ["group:eng"] and rows[1]["details"]["added"] == 1
    assert rows[0]["details"]["doc_ids"] == ["plan.md"]
    assert "albatross" not in out and str(docs) not in out
