"""The scale benchmark's corpus: real chunks, replicated with perturbations, over Zipf tenants.

The base pool is every chunk of the shared corpora (SciFact, CLAPnq, XQuAD-en, the English
FastAPI docs), chunked as `ragline index` chunks them and embedded once with the packaged
embedder (cached on disk). A corpus of N chunks is the pool replicated: each copy belongs to one
tenant, gets its own document id, drops some words and swaps a few (so its BM25 terms differ) and
moves its dense vector a little (the base embedding plus small Gaussian noise, renormalized;
cosine to the base ≈ 0.98 at the default noise). Vectors are never random: random vectors are
HNSW's worst case and say nothing about real text. The copies of one base chunk are near
duplicates, so the corpus is more clustered than N distinct real chunks would be.

Tenant sizes follow a Zipf law (the tenant of rank r holds ∝ 1/r^s chunks, at least one): a few
large tenants, many tiny ones. Each tenant takes a contiguous run of the pool from a random start
(its "own" documents), wrapping around when it is larger than the pool. ACLs and metadata come
from the retrieval benchmark's deterministic functions of the document id.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt

from evals.bench.corpus import ChunkRow, chunk_corpus, doc_acl, doc_metadata, embed_cached
from evals.datasets import Doc, data_root, load_dataset
from service.embed.protocol import Embedder
from service.index.protocol import Chunk
from service.text.bm25 import doc_vector

SOURCES = ("scifact", "clapnq", "xquad-en", "fastapi-docs")
Matrix = npt.NDArray[np.float32]


class PoolRow(msgspec.Struct, frozen=True):
    source: str
    row: ChunkRow


class Pool(msgspec.Struct, kw_only=True):
    rows: list[PoolRow]
    vectors: Matrix
    per_source: dict[str, int]


def _fastapi_docs(data_dir: Path | None) -> list[Doc]:
    root = data_root(data_dir) / "fastapi-docs" / "docs" / "en" / "docs"
    docs: list[Doc] = []
    for path in sorted(root.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        title = next(
            (ln.lstrip("#").strip() for ln in text.splitlines() if ln.startswith("# ")),
            path.stem,
        )
        docs.append(Doc(id=str(path.relative_to(root)), title=title, text=text))
    return docs


def base_pool(
    embedder: Embedder,
    cache_dir: Path,
    data_dir: Path | None = None,
    sources: Sequence[str] = SOURCES,
) -> Pool:
    """Every chunk of `sources`, each embedded once (cached per source under `cache_dir`)."""
    rows: list[PoolRow] = []
    mats: list[Matrix] = []
    per_source: dict[str, int] = {}
    for name in sources:
        if name == "fastapi-docs":
            chunks = chunk_corpus(_fastapi_docs(data_dir), embedder, markdown=True)
        else:
            chunks = chunk_corpus(load_dataset(name, data_dir).corpus, embedder)
        mats.append(embed_cached([c.embed_text for c in chunks], embedder, cache_dir / name))
        rows.extend(PoolRow(name, c) for c in chunks)
        per_source[name] = len(chunks)
    return Pool(rows=rows, vectors=np.concatenate(mats).astype(np.float32), per_source=per_source)


def tenant_sizes(n_chunks: int, n_tenants: int, exponent: float = 1.0) -> list[int]:
    """Chunks per tenant, largest first: one each, the rest shared ∝ 1/rank^exponent."""
    if n_tenants > n_chunks:
        raise ValueError(f"{n_tenants} tenants cannot each hold a chunk of {n_chunks}")
    weights = 1.0 / np.arange(1, n_tenants + 1, dtype=np.float64) ** exponent
    extra = n_chunks - n_tenants
    shares = np.floor(weights / weights.sum() * extra).astype(np.int64)
    shares[: extra - int(shares.sum())] += 1  # the rounding remainder goes to the largest
    return [int(s) + 1 for s in shares]


def tenant_name(rank: int) -> str:
    return f"t{rank:05d}"


def perturb_text(text: str, rng: random.Random, drop: float) -> str:
    """Drop each word with probability `drop` (keeping at least one) and swap two words."""
    words = text.split()
    kept = [w for w in words if rng.random() >= drop] or words[:1]
    if len(kept) > 3:
        i = rng.randrange(len(kept) - 1)
        kept[i], kept[i + 1] = kept[i + 1], kept[i]
    return " ".join(kept)


class Replicas:
    """Generates the corpus of `sum(sizes)` chunks in batches, deterministically from `seed`."""

    def __init__(
        self,
        pool: Pool,
        sizes: Sequence[int],
        *,
        seed: int = 0,
        noise: float = 0.01,
        drop: float = 0.1,
    ) -> None:
        self.pool, self.sizes = pool, list(sizes)
        self.seed, self.noise, self.drop = seed, noise, drop
        self.cosines: list[float] = []
        """Cosine of each perturbed vector to its base (a sample, for the report)."""

    def plan(self) -> Iterator[tuple[str, int, int]]:
        """(tenant, pool index, copy number) for every chunk, tenant by tenant."""
        rng = random.Random(self.seed)
        n = len(self.pool.rows)
        for rank, size in enumerate(self.sizes):
            start = rng.randrange(n)
            for j in range(size):
                yield tenant_name(rank), (start + j) % n, (start + j) // n

    def batches(self, batch: int = 1000) -> Iterator[list[Chunk]]:
        rng = random.Random(self.seed + 1)
        nrng = np.random.default_rng(self.seed + 2)
        plan = self.plan()
        while True:
            part = [p for _, p in zip(range(batch), plan, strict=False)]
            if not part:
                return
            base = self.pool.vectors[[b for _, b, _ in part]]
            moved = base + self.noise * nrng.standard_normal(base.shape, dtype=np.float32)
            moved /= np.linalg.norm(moved, axis=1, keepdims=True)
            if len(self.cosines) < 10_000:
                self.cosines.extend(np.einsum("ij,ij->i", base, moved)[:100].tolist())
            yield [
                self._chunk(tenant, self.pool.rows[b], copy, moved[i], rng)
                for i, (tenant, b, copy) in enumerate(part)
            ]

    def _chunk(
        self, tenant: str, pr: PoolRow, copy: int, dense: Matrix, rng: random.Random
    ) -> Chunk:
        r = pr.row
        doc_id = f"{pr.source}/{r.doc_id}~{copy}"
        text = perturb_text(r.text, rng, self.drop)
        return Chunk(
            tenant_id=tenant,
            doc_id=doc_id,
            chunk_ix=r.chunk_ix,
            text=text,
            title=r.title,
            lang="en",
            acl=doc_acl(doc_id),
            metadata=doc_metadata(doc_id),
            dense=dense.tolist(),
            sparse=doc_vector(f"{r.title}\n{text}"),
        )
