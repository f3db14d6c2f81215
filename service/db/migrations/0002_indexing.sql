-- Indexing (issue 3): where each document came from, so `index add --prune` can find documents
-- whose source is gone; and what kind of run an ingest run was.
ALTER TABLE documents ADD COLUMN origin text NOT NULL DEFAULT '';
CREATE INDEX documents_tenant_origin ON documents (tenant_id, origin);

ALTER TABLE ingest_runs ADD COLUMN kind text NOT NULL DEFAULT 'add';
ALTER TABLE ingest_runs ADD CONSTRAINT ingest_runs_status
    CHECK (status IN ('running', 'ok', 'failed', 'interrupted'));
CREATE INDEX ingest_runs_tenant_started ON ingest_runs (tenant_id, started_at DESC);
