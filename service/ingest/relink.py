"""Changes that move or relabel stored chunks without embedding anything again.

- **Rename**: a document gets a new id (its source root was recorded, or moved). Point ids derive
  from (tenant, doc id, chunk), so each chunk is read back with its vectors and written under the
  new id; the old points are deleted and the registry row follows.
- **Relink**: the document's content is unchanged but its link is not (a new `--base-url`, a
  front-matter `url:`, or a server path stored by an older version): each chunk's `source_uri` is
  rewritten in place and the registry records the link and the current hash.
- **Scrub** (on upgrade): documents an older version stored with a server path get their relative
  id as link right away, so no reader sees the path even before their next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import asyncpg
import msgspec

from service.db.documents import DocRow, registered
from service.db.tenants import bump_index_version
from service.embed.protocol import Embedder
from service.index.protocol import VectorIndex
from service.ingest.chunking import ChunkText, chunk_document
from service.ingest.documents import SourceDoc
from service.ingest.links import chunk_links
from service.text.uris import SERVER_PATH_SQL, public_uri


class RenameRefused(ValueError):
    """The new id is taken by another document."""


def public_link(doc: SourceDoc) -> None:
    """A document's link is a URL or its relative id, never a path on the machine it came from
    (older clients of the index API send one)."""
    doc.source_uri = public_uri(doc.source_uri or doc.doc_id, doc.doc_id)


def content_unchanged(
    doc: SourceDoc, acl: list[str], metadata: dict[str, Any], salt: str, digest: str, old: DocRow
) -> bool:
    """The indexed version has this content: by the current hash, or by the hash an older
    version stored, which also covered the link it stored."""
    if old.status != "indexed":
        return False
    if old.content_hash == digest:
        return True
    legacy = old.legacy_uri if old.legacy_uri is not None else old.source_uri
    return old.content_hash == doc.legacy_hash(acl, metadata, salt, legacy)


def needs_relink(doc: SourceDoc, digest: str, old: DocRow) -> bool:
    return old.content_hash != digest or old.source_uri != doc.source_uri


def doc_pieces(doc: SourceDoc, embedder: Embedder) -> list[ChunkText]:
    """A document's chunks as indexing cuts them (by the embedder's tokenizer): one chunking,
    so links computed again match the chunks indexed."""
    return chunk_document(
        doc.text,
        title=doc.title,
        markdown=doc.markdown,
        count_tokens=embedder.count_tokens,
        max_tokens=embedder.max_tokens,
    )


def links_for(doc: SourceDoc, embedder: Embedder) -> list[str]:
    """Each chunk's link, from the same chunking that indexed it (CPU only, no embedding)."""
    return chunk_links(doc, doc_pieces(doc, embedder))


async def relink(
    pool: asyncpg.Pool,
    index: VectorIndex,
    tenant_id: str,
    docs: Sequence[tuple[SourceDoc, str, list[str]]],
) -> int:
    """Write new links (doc, current hash, chunk links) in place; returns how many."""
    if not docs:
        return 0
    for doc, _, links in docs:
        await index.set_links(tenant_id, doc.doc_id, links)
    async with pool.acquire() as conn, conn.transaction():
        await conn.executemany(
            "UPDATE documents SET source_uri = $3, content_hash = $4, legacy_uri = NULL,"
            " updated_at = now() WHERE tenant_id = $1 AND doc_id = $2",
            [(tenant_id, doc.doc_id, doc.source_uri, digest) for doc, digest, _ in docs],
        )
        await bump_index_version(conn, tenant_id)
    return len(docs)


async def rename_documents(
    pool: asyncpg.Pool, index: VectorIndex, tenant_id: str, pairs: Sequence[tuple[str, str]]
) -> int:
    """Give documents new ids, carrying their vectors over; returns how many moved."""
    moved = 0
    for old_id, new_id in pairs:
        async with pool.acquire() as conn:
            rows = await registered(conn, tenant_id, [old_id, new_id])
        if old_id not in rows:
            continue
        if new_id in rows:
            raise RenameRefused(
                f"cannot rename {old_id!r} to {new_id!r}: that id is already indexed"
                f" (remove one: `ragline index rm --tenant {tenant_id} ID`)"
            )
        chunks = await index.document_chunks(tenant_id, old_id)
        live = [msgspec.structs.replace(c, doc_id=new_id) for c in chunks if c.acl]
        await index.upsert(live)
        await index.delete_document(tenant_id, old_id)
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute(
                "UPDATE documents SET doc_id = $3, updated_at = now()"
                " WHERE tenant_id = $1 AND doc_id = $2",
                tenant_id,
                old_id,
                new_id,
            )
            await bump_index_version(conn, tenant_id)
        moved += 1
    return moved


async def scrub_server_paths(pool: asyncpg.Pool, index: VectorIndex) -> int:
    """Replace the server paths older versions stored as links by relative ids (once each)."""
    async with pool.acquire() as conn:
        # Runs at every start: PostgreSQL picks the rows (the pattern `is_server_path` uses)
        # instead of shipping every document's row here.
        rows = await conn.fetch(
            "SELECT tenant_id, doc_id, source_uri, chunk_count FROM documents"
            " WHERE legacy_uri IS NULL AND source_uri ~ $1",
            SERVER_PATH_SQL,
        )
    done = 0
    for r in rows:
        await index.set_links(r["tenant_id"], r["doc_id"], [r["doc_id"]] * r["chunk_count"])
        async with pool.acquire() as conn:
            await conn.execute(
                "UPDATE documents SET legacy_uri = source_uri, source_uri = doc_id"
                " WHERE tenant_id = $1 AND doc_id = $2",
                r["tenant_id"],
                r["doc_id"],
            )
        done += 1
    return done
