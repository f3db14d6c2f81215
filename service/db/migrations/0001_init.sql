-- Ragline system of record (ARCHITECTURE §3).
CREATE TABLE tenants (
    tenant_id     text PRIMARY KEY,
    index_version bigint NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL DEFAULT now()
);

-- Only a SHA-256 of each key is stored; the key itself is shown once at creation.
CREATE TABLE api_keys (
    key_id       text PRIMARY KEY,
    key_hash     bytea NOT NULL UNIQUE,
    tenant_id    text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    user_id      text NOT NULL,
    groups       text[] NOT NULL DEFAULT '{}',
    scopes       text[] NOT NULL DEFAULT '{query}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

CREATE TABLE documents (
    tenant_id    text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    doc_id       text NOT NULL,
    source_uri   text NOT NULL DEFAULT '',
    title        text NOT NULL DEFAULT '',
    lang         text NOT NULL DEFAULT '',
    content_hash text NOT NULL,
    acl          text[] NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{}',
    version      bigint NOT NULL DEFAULT 1,
    chunk_count  integer NOT NULL DEFAULT 0,
    status       text NOT NULL DEFAULT 'indexed' CHECK (status IN ('indexed', 'failed', 'pending')),
    error        text,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, doc_id)
);

CREATE TABLE ingest_runs (
    run_id      bigserial PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    status      text NOT NULL DEFAULT 'running',
    stats       jsonb NOT NULL DEFAULT '{}'
);

CREATE TABLE usage_records (
    id             bigserial PRIMARY KEY,
    request_id     text NOT NULL,
    tenant_id      text NOT NULL,
    key_id         text NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    route          text NOT NULL,
    status         integer NOT NULL,
    code           text,
    cache          text,
    degraded       text[] NOT NULL DEFAULT '{}',
    tokens_in      integer NOT NULL DEFAULT 0,
    tokens_out     integer NOT NULL DEFAULT 0,
    ttft_ms        real,
    total_ms       real,
    prompt_version text
);
CREATE INDEX usage_records_tenant_time ON usage_records (tenant_id, created_at);
