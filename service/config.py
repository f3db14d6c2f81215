"""Typed settings: defaults, then an optional TOML file, then `RAGLINE_*` environment variables.

Every section is a `msgspec.Struct`; a bad value stops start-up with a `ConfigError` that names
the key (`database.pool_size` and the variable `RAGLINE_DATABASE_POOL_SIZE`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import msgspec

ENV_PREFIX = "RAGLINE_"


class ConfigError(Exception):
    """A setting could not be read or has a bad value; the message names the key."""


class ServerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    host: str = "127.0.0.1"
    """Interface the HTTP server binds to."""
    port: int = 8000
    """TCP port of the HTTP server."""
    max_body_bytes: int = 1_000_000
    """Largest accepted request body; larger bodies get 413."""


class StorageSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    state_dir: str = ".ragline"
    """Directory for the embedded index, embedded PostgreSQL and exported models."""


class DatabaseSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: str = ""
    """PostgreSQL URL; empty starts an embedded PostgreSQL in `<state_dir>/pg`."""
    pool_min: int = 1
    """Connections opened at start-up."""
    pool_max: int = 8
    """Upper bound of the connection pool."""


class RedisSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: str = ""
    """Redis URL for the shared L2 cache and limits; empty keeps everything in-process."""


class IndexSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend: Literal["edge", "qdrant"] = "edge"
    """`edge`: Qdrant Edge in-process, on disk. `qdrant`: a Qdrant server via qdrant-client."""
    qdrant_url: str = ""
    """URL of the Qdrant server (backend `qdrant`); `:memory:` or a path uses local mode."""
    collection: str = "ragline_chunks"
    """Collection (server) or shard directory name (edge)."""
    search_threads: int = 1
    """Threads Qdrant Edge may use for one search."""
    qdrant_api_key: str = ""
    """API key of the Qdrant server (backend `qdrant`); never logged."""
    shards: int = 1
    """Shards of the collection when Ragline creates it on a Qdrant server or cluster."""
    replicas: int = 1
    """Copies of each shard when Ragline creates the collection on a Qdrant cluster."""
    quantization: Literal["none", "scalar_int8"] = "none"
    """Dense-vector quantization when the collection is created (`scalar_int8`: 4x less RAM,
    candidates rescored with the full vectors)."""


class EmbedderSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend: Literal["onnx", "torch"] = "onnx"
    """`onnx`: ONNX Runtime over a locally exported copy; `torch`: sentence-transformers."""
    model_dir: str = ""
    """Sentence-transformers model directory; empty uses the packaged all-MiniLM-L6-v2."""
    threads: int = 1
    """Intra-op threads of the embedder (sized on purpose: see the README)."""
    max_batch: int = 32
    """Largest micro-batch of concurrent queries."""
    max_wait_ms: float = 0.0
    """Longest a query waits for others to join its micro-batch. 0: none — batches form from
    the queries that arrived while the model was busy, and a lone query is not delayed."""


class RetrievalSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    top_k: int = 5
    """Sources returned by default."""
    max_top_k: int = 20
    """Largest `top_k` a client may ask for."""
    prefetch: int = 50
    """Candidates each retriever contributes before fusion (hard cap: 500)."""
    shortlist: int = 30
    """Fused candidates handed to the reranker (hard cap: 200); at least top_k."""
    fusion: Literal["convex", "zscore", "rrf"] = "zscore"
    """How dense and BM25 scores are fused (chosen on the dev split: see the README)."""
    dense_weight: float = 0.6
    """Weight of the dense score in the fusion for Latin-script queries (BM25 gets the rest)."""
    non_latin_dense_weight: float = 0.1
    """Dense weight for queries in other scripts: the packaged embedder knows English only."""
    metadata_fields: dict[str, Literal["keyword", "integer", "float", "bool", "datetime"]] = (
        msgspec.field(default_factory=dict)
    )
    """Declared metadata fields clients may filter on, with their types."""


class RerankSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend: Literal["none", "features", "maxsim", "cross_encoder"] = "none"
    """Second phase over the shortlist: `features` (no weights needed), `maxsim` (late
    interaction over the embedder's token vectors), `cross_encoder` (a local model), `none`.
    Off by default: neither offline backend beat the fused order on our test splits."""
    model_dir: str = ""
    """Local sentence-transformers CrossEncoder directory (backend `cross_encoder`)."""
    max_candidates: int = 30
    """Most hits one rerank call scores (hard cap: 100)."""
    threads: int = 1
    """Threads of the reranker's model (maxsim, cross_encoder)."""


class TrimSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    context_tokens: int = 1500
    """Token budget of the passages handed to the generator (estimated, ~4/3 per word)."""
    duplicate_threshold: float = 0.8
    """Word-trigram Jaccard similarity from which a passage is a near-duplicate and dropped."""
    merge_neighbours: bool = True
    """Merge adjacent chunks of the same document into one passage."""


class GeneratorSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend: Literal["extractive"] = "extractive"
    """Primary generator."""
    max_tokens: int = 256
    """Default cap on generated tokens."""
    max_sentences: int = 3
    """Sentences the extractive generator streams."""


class BudgetSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    ttft_ms: float = 800.0
    """Time-to-first-token budget of one request."""
    embed_ms: float = 150.0
    """Deadline of the query-embedding stage (capped by what is left of the budget)."""
    search_ms: float = 200.0
    """Deadline of the vector search stage."""
    rerank_ms: float = 100.0
    """Deadline of the rerank stage; when missed, the fused order is kept."""
    generate_first_token_ms: float = 600.0
    """Deadline for the generator's first token."""


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    server: ServerSettings = msgspec.field(default_factory=ServerSettings)
    storage: StorageSettings = msgspec.field(default_factory=StorageSettings)
    database: DatabaseSettings = msgspec.field(default_factory=DatabaseSettings)
    redis: RedisSettings = msgspec.field(default_factory=RedisSettings)
    index: IndexSettings = msgspec.field(default_factory=IndexSettings)
    embedder: EmbedderSettings = msgspec.field(default_factory=EmbedderSettings)
    retrieval: RetrievalSettings = msgspec.field(default_factory=RetrievalSettings)
    rerank: RerankSettings = msgspec.field(default_factory=RerankSettings)
    trim: TrimSettings = msgspec.field(default_factory=TrimSettings)
    generator: GeneratorSettings = msgspec.field(default_factory=GeneratorSettings)
    budget: BudgetSettings = msgspec.field(default_factory=BudgetSettings)

    @property
    def state_dir(self) -> Path:
        return Path(self.storage.state_dir)


def _sections() -> dict[str, type[msgspec.Struct]]:
    info = msgspec.inspect.type_info(Settings)
    assert isinstance(info, msgspec.inspect.StructType)
    out: dict[str, type[msgspec.Struct]] = {}
    for f in info.fields:
        assert isinstance(f.type, msgspec.inspect.StructType)
        out[f.name] = f.type.cls
    return out


def _env_overrides(environ: Mapping[str, str]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Map `RAGLINE_<SECTION>_<FIELD>` variables onto the settings tree.

    Returns the overrides and, for error messages, which variable set which key.
    """
    sections = _sections()
    tree: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for var, raw in environ.items():
        if not var.startswith(ENV_PREFIX) or var == "RAGLINE_CONFIG":
            continue
        rest = var[len(ENV_PREFIX) :].lower()
        for name, cls in sections.items():
            if not rest.startswith(name + "_"):
                continue
            field = rest[len(name) + 1 :]
            if field not in cls.__struct_fields__:
                raise ConfigError(f"{var}: unknown setting {name}.{field}")
            value: Any = raw
            if raw[:1] in "[{":
                try:
                    value = msgspec.json.decode(raw)
                except msgspec.DecodeError as exc:
                    raise ConfigError(f"{var} ({name}.{field}): not valid JSON: {exc}") from exc
            tree.setdefault(name, {})[field] = value
            origin[f"{name}.{field}"] = var
            break
        else:
            raise ConfigError(f"{var}: unknown setting (no section matches)")
    return tree, origin


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_settings(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Load settings; `path` (or `RAGLINE_CONFIG`) names an optional TOML file."""
    env = os.environ if environ is None else environ
    path = path or env.get("RAGLINE_CONFIG") or None
    tree: dict[str, Any] = {}
    if path is not None:
        try:
            tree = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
    overrides, origin = _env_overrides(env)
    tree = _merge(tree, overrides)
    try:
        settings = msgspec.convert(tree, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(_name_the_key(str(exc), origin)) from exc
    _check(settings)
    return settings


def _name_the_key(message: str, origin: Mapping[str, str]) -> str:
    # msgspec says e.g. "Expected `int`, got `str` - at `$.database.pool_max`"
    if " - at `$." in message:
        what, where = message.rsplit(" - at `$.", 1)
        key = where.rstrip("`").split("[")[0]
        var = origin.get(key)
        return f"setting {key}{f' ({var})' if var else ''}: {what}"
    return f"settings: {message}"


def _check(s: Settings) -> None:
    """Range checks msgspec's types cannot express."""
    positive = {
        "server.port": s.server.port,
        "database.pool_max": s.database.pool_max,
        "embedder.threads": s.embedder.threads,
        "embedder.max_batch": s.embedder.max_batch,
        "retrieval.top_k": s.retrieval.top_k,
        "retrieval.max_top_k": s.retrieval.max_top_k,
        "retrieval.prefetch": s.retrieval.prefetch,
        "budget.ttft_ms": s.budget.ttft_ms,
        "generator.max_tokens": s.generator.max_tokens,
    }
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"setting {key}: must be > 0, got {value}")
    if not 0 < s.server.port < 65536:
        raise ConfigError(f"setting server.port: must be a TCP port, got {s.server.port}")
    if s.retrieval.top_k > s.retrieval.max_top_k:
        raise ConfigError("setting retrieval.top_k: must be <= retrieval.max_top_k")
    if s.database.pool_min > s.database.pool_max:
        raise ConfigError("setting database.pool_min: must be <= database.pool_max")
    caps = {
        "retrieval.prefetch": (s.retrieval.prefetch, 500),
        "trim.context_tokens": (s.trim.context_tokens, 1_000_000),
        "retrieval.shortlist": (s.retrieval.shortlist, 200),
        "rerank.max_candidates": (s.rerank.max_candidates, 100),
        "index.shards": (s.index.shards, 1024),
        "index.replicas": (s.index.replicas, 16),
    }
    for key, (value, cap) in caps.items():
        if not 0 < value <= cap:
            raise ConfigError(f"setting {key}: must be in 1..{cap}, got {value}")
    for key, weight in {
        "retrieval.dense_weight": s.retrieval.dense_weight,
        "retrieval.non_latin_dense_weight": s.retrieval.non_latin_dense_weight,
    }.items():
        if not 0.0 <= weight <= 1.0:
            raise ConfigError(f"setting {key}: must be in 0..1, got {weight}")
    if s.rerank.backend == "cross_encoder" and not s.rerank.model_dir:
        raise ConfigError("setting rerank.model_dir: required by rerank.backend = cross_encoder")
    for field in s.retrieval.metadata_fields:
        if field in {"tenant_id", "acl", "doc_id", "text"}:
            raise ConfigError(f"setting retrieval.metadata_fields: {field!r} is reserved")
