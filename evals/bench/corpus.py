"""A benchmark index from a BEIR-style set: chunk, embed (cached on disk), write in batches.

Indexing here goes straight through the `VectorIndex` contract, with the same chunker and BM25
vectors as `ragline index`, so the benchmark measures the retrieval path, not the indexer.
Every document gets synthetic but deterministic permissions and metadata (an ACL group, a year,
a team, a publication date) so filtered search can be measured on real text; quality runs use a
principal who belongs to every group, so the whole corpus is visible to them.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np

from evals.datasets import Dataset, Doc
from service.embed.protocol import Embedder, Vectors
from service.identity import identities
from service.index.protocol import Chunk, VectorIndex
from service.index.schema import IndexType
from service.ingest.chunking import chunk_document
from service.text.bm25 import doc_vector

BENCH_TENANT = "bench"
GROUPS = ("g0", "g1", "g2", "g3")
METADATA_FIELDS: dict[str, IndexType] = {
    "year": "integer",
    "team": "keyword",
    "published": "datetime",
}
TEAMS = ("alpha", "beta", "gamma", "delta", "epsilon")


def everyone() -> frozenset[str]:
    """The identities of a user in every group: sees the whole benchmark corpus."""
    return identities("bench-reader", GROUPS)


def _h(doc_id: str, salt: str) -> int:
    return int.from_bytes(hashlib.sha256(f"{salt}:{doc_id}".encode()).digest()[:4], "big")


def doc_acl(doc_id: str) -> list[str]:
    return [f"group:{GROUPS[_h(doc_id, 'acl') % len(GROUPS)]}"]


def doc_metadata(doc_id: str) -> dict[str, object]:
    year = 2000 + _h(doc_id, "year") % 25
    month = 1 + _h(doc_id, "month") % 12
    return {
        "year": year,
        "team": TEAMS[_h(doc_id, "team") % len(TEAMS)],
        "published": f"{year}-{month:02d}-15T00:00:00Z",
    }


class ChunkRow(msgspec.Struct, frozen=True):
    doc_id: str
    chunk_ix: int
    title: str
    text: str
    embed_text: str


def chunk_corpus(
    docs: Sequence[Doc], embedder: Embedder, *, markdown: bool = False
) -> list[ChunkRow]:
    rows: list[ChunkRow] = []
    for doc in docs:
        pieces = chunk_document(
            doc.text,
            title=doc.title,
            markdown=markdown,
            count_tokens=embedder.count_tokens,
            max_tokens=embedder.max_tokens,
        )
        for i, p in enumerate(pieces):
            rows.append(ChunkRow(doc.id, i, p.title(doc.title), p.text, p.embed_text(doc.title)))
    return rows


def embed_cached(
    texts: Sequence[str], embedder: Embedder, cache_dir: Path, *, batch: int = 64
) -> Vectors:
    """Embed `texts`, reusing a cached matrix for exactly these texts and this model."""
    digest = hashlib.sha256(embedder.name.encode())
    for t in texts:
        digest.update(t.encode())
        digest.update(b"\x00")
    path = cache_dir / f"{embedder.name}-{len(texts)}-{digest.hexdigest()[:16]}.npy"
    if path.is_file():
        cached: Vectors = np.load(path)
        return cached
    cache_dir.mkdir(parents=True, exist_ok=True)
    # Sorting by length keeps padding (wasted compute) small inside each batch.
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    out = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    for start in range(0, len(order), batch):
        ids = order[start : start + batch]
        out[ids] = embedder.embed([texts[i] for i in ids])
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, out)
    tmp.rename(path)
    return out


class BuiltIndex(msgspec.Struct, kw_only=True):
    dataset: str
    docs: int
    chunks: int
    points: int
    tenants: list[str]
    embed_seconds: float
    write_seconds: float


async def build_index(
    index: VectorIndex,
    ds: Dataset,
    embedder: Embedder,
    cache_dir: Path,
    *,
    tenants: Sequence[str] = (BENCH_TENANT,),
    batch: int = 256,
) -> BuiltIndex:
    """Write `ds` for each of `tenants` (copies share the vectors; their point ids differ)."""
    rows = chunk_corpus(ds.corpus, embedder)
    t0 = time.perf_counter()
    vectors = embed_cached([r.embed_text for r in rows], embedder, cache_dir / ds.name)
    embed_s = time.perf_counter() - t0
    sparse = [doc_vector(r.embed_text) for r in rows]
    t0 = time.perf_counter()
    for tenant in tenants:
        for start in range(0, len(rows), batch):
            await index.upsert(
                [
                    Chunk(
                        tenant_id=tenant,
                        doc_id=r.doc_id,
                        chunk_ix=r.chunk_ix,
                        text=r.text,
                        title=r.title,
                        lang="en",
                        acl=doc_acl(r.doc_id),
                        metadata=doc_metadata(r.doc_id),
                        dense=vectors[start + j].tolist(),
                        sparse=sparse[start + j],
                    )
                    for j, r in enumerate(rows[start : start + batch])
                ]
            )
    optimize = getattr(index, "optimize", None)
    if optimize is not None:
        await optimize()
    return BuiltIndex(
        dataset=ds.name,
        docs=len(ds.corpus),
        chunks=len(rows),
        points=len(rows) * len(tenants),
        tenants=list(tenants),
        embed_seconds=round(embed_s, 2),
        write_seconds=round(time.perf_counter() - t0, 2),
    )
