-- Identity for real deployments (issue 16): JWT issuers per tenant, Entra ID group-id names,
-- keys that expire and act for users, platform keys, an auth epoch every replica polls, an
-- append-only audit log, and the end user on usage records.

-- One trusted OIDC issuer per tenant. The HS256 secret is the only secret here; it is never
-- returned by the API, listed by the CLI or written to the audit log.
CREATE TABLE tenant_jwt (
    tenant_id    text PRIMARY KEY REFERENCES tenants ON DELETE CASCADE,
    issuer       text NOT NULL,
    audience     text NOT NULL,
    jwks_url     text,
    jwks_file    text,
    hs256_secret text,
    groups_claim text NOT NULL DEFAULT 'groups',
    user_claim   text NOT NULL DEFAULT 'sub',
    group_prefix text NOT NULL DEFAULT '',
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (jwks_url IS NOT NULL OR jwks_file IS NOT NULL OR hs256_secret IS NOT NULL)
);
-- One tenant per (issuer, audience): otherwise a second tenant naming another's pair would make
-- that tenant's tokens ambiguous (a denial of service) -- the second one gets a 409 instead.
CREATE UNIQUE INDEX tenant_jwt_issuer_audience ON tenant_jwt (issuer, audience);

-- Entra ID sends group object ids: this table names them, per tenant.
CREATE TABLE tenant_group_names (
    tenant_id  text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    group_id   text NOT NULL,
    group_name text NOT NULL,
    PRIMARY KEY (tenant_id, group_id)
);

ALTER TABLE api_keys ADD COLUMN expires_at timestamptz;
ALTER TABLE api_keys ADD COLUMN may_assert text[] NOT NULL DEFAULT '{}';
ALTER TABLE api_keys ADD COLUMN rotated_from text;

-- Keys of the platform operator: they belong to no tenant and are made only from the CLI.
CREATE TABLE platform_keys (
    key_id     text PRIMARY KEY,
    key_hash   bytea NOT NULL UNIQUE,
    label      text NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz,
    revoked_at timestamptz
);

-- Every change that can take a credential away bumps the epoch (in the changing transaction);
-- each replica polls it, so a revocation reaches every process even with no Redis at all.
CREATE TABLE auth_epoch (
    id    integer PRIMARY KEY CHECK (id = 1),
    epoch bigint NOT NULL
);
INSERT INTO auth_epoch VALUES (1, 0);

CREATE FUNCTION auth_epoch_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE auth_epoch SET epoch = epoch + 1 WHERE id = 1;
    RETURN NULL;
END
$$;
CREATE TRIGGER api_keys_auth_epoch AFTER UPDATE OR DELETE ON api_keys
FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_bump();
CREATE TRIGGER platform_keys_auth_epoch AFTER UPDATE OR DELETE ON platform_keys
FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_bump();
CREATE TRIGGER tenant_jwt_auth_epoch AFTER INSERT OR UPDATE OR DELETE ON tenant_jwt
FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_bump();
CREATE TRIGGER tenant_group_names_auth_epoch AFTER INSERT OR UPDATE OR DELETE ON tenant_group_names
FOR EACH STATEMENT EXECUTE FUNCTION auth_epoch_bump();

-- Who did what to which tenant. Append-only: rows can be added, never changed or removed.
-- No secrets and no document text go in here (service/db/audit.py is the one writer).
CREATE TABLE audit_log (
    id          bigserial PRIMARY KEY,
    at          timestamptz NOT NULL DEFAULT now(),
    tenant_id   text,
    actor_kind  text NOT NULL CHECK (actor_kind IN ('key', 'jwt', 'act_as', 'platform', 'cli')),
    actor       text NOT NULL,
    acting_for  text,
    action      text NOT NULL,
    target      text NOT NULL DEFAULT '',
    details     jsonb NOT NULL DEFAULT '{}',
    request_id  text
);
CREATE INDEX audit_log_tenant_at ON audit_log (tenant_id, at);

CREATE FUNCTION audit_log_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only' USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER audit_log_no_update BEFORE UPDATE OR DELETE ON audit_log
FOR EACH ROW EXECUTE FUNCTION audit_log_append_only();
CREATE TRIGGER audit_log_no_truncate BEFORE TRUNCATE ON audit_log
FOR EACH STATEMENT EXECUTE FUNCTION audit_log_append_only();

-- The end user of a request (a key's user, a JWT subject, or the user a frontend acts for).
ALTER TABLE usage_records ADD COLUMN user_id text;
