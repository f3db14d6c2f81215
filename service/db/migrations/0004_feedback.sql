-- Users' judgments of answers (the chat page's Helpful / Not helpful), per tenant, linked to the
-- request's usage record by (tenant_id, request_id). One row per request and key: rating again
-- replaces the earlier rating. Exported for evaluators by `ragline eval feedback export`.
CREATE TABLE feedback (
    id          bigserial PRIMARY KEY,
    tenant_id   text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    request_id  text NOT NULL,
    key_id      text NOT NULL,
    user_id     text NOT NULL,
    rating      text NOT NULL CHECK (rating IN ('up', 'down')),
    comment     text NOT NULL DEFAULT '' CHECK (char_length(comment) <= 2000),
    question    text NOT NULL DEFAULT '',
    answer      text NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, request_id, key_id)
);
CREATE INDEX feedback_tenant_time ON feedback (tenant_id, created_at);

-- Feedback finds its request's usage record by id within the tenant: an index, not a scan of
-- the tenant's usage.
CREATE INDEX usage_records_tenant_request ON usage_records (tenant_id, request_id);
