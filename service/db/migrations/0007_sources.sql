-- Sources (issue 17): where a tenant's documents come from, recorded once. A document's id is its
-- path relative to its source's root, so indexing one file or the whole tree gives the same id.
CREATE TABLE sources (
    tenant_id    text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    name         text NOT NULL,
    kind         text NOT NULL CHECK (kind IN ('folder', 's3', 'web', 'git')),
    root         text NOT NULL,  -- a folder, s3://bucket/prefix, a site URL, or a repository
    base_url     text NOT NULL DEFAULT '',
    url_style    text NOT NULL DEFAULT 'dir' CHECK (url_style IN ('dir', 'html', 'keep')),
    options      jsonb NOT NULL DEFAULT '{}',  -- what `sources sync` passes: allow, public, meta…
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_sync_at timestamptz,
    last_status  text,
    last_error   text,
    last_run_id  bigint,
    PRIMARY KEY (tenant_id, name)
);
CREATE UNIQUE INDEX sources_tenant_root ON sources (tenant_id, kind, root);

-- What a remote source's object looked like when it was last indexed (ETag, Last-Modified), so a
-- sync re-downloads only what changed.
CREATE TABLE source_objects (
    tenant_id     text NOT NULL,
    source        text NOT NULL,
    key           text NOT NULL,
    doc_id        text NOT NULL,
    etag          text NOT NULL DEFAULT '',
    last_modified text NOT NULL DEFAULT '',
    params        text NOT NULL DEFAULT '',  -- a digest of the ACL/metadata it was indexed with
    PRIMARY KEY (tenant_id, source, key),
    FOREIGN KEY (tenant_id, source) REFERENCES sources ON DELETE CASCADE ON UPDATE CASCADE
);

-- A link is not content: the server path an older version stored as `source_uri` moves here
-- (the payload is rewritten in place, nothing is re-embedded), and the content hash no longer
-- covers the link; `legacy_uri` lets a run recognise an unchanged document hashed the old way.
ALTER TABLE documents ADD COLUMN legacy_uri text;
