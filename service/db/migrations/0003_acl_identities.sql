-- The identities that occur in each tenant's ACLs, with how many documents name them, kept by a
-- trigger on `documents`. A request's effective visibility reads these rows (one per distinct
-- group or user) instead of scanning every document: the request path never grows with the
-- corpus.
CREATE TABLE acl_identities (
    tenant_id text NOT NULL REFERENCES tenants ON DELETE CASCADE,
    identity  text NOT NULL,
    refs      integer NOT NULL CHECK (refs > 0),
    PRIMARY KEY (tenant_id, identity)
);

INSERT INTO acl_identities (tenant_id, identity, refs)
SELECT tenant_id, ident, count(*)
FROM (SELECT DISTINCT d.tenant_id, d.doc_id, a.ident
      FROM documents d, unnest(d.acl) AS a(ident)) per_doc
GROUP BY tenant_id, ident;

CREATE FUNCTION acl_identities_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        -- the last reference goes first, then the others count down (in this order, so that
        -- no row is counted down and then deleted as if it were the last)
        DELETE FROM acl_identities a
        USING (SELECT DISTINCT unnest(OLD.acl) AS ident) o
        WHERE a.tenant_id = OLD.tenant_id AND a.identity = o.ident AND a.refs = 1;
        UPDATE acl_identities a SET refs = a.refs - 1
        FROM (SELECT DISTINCT unnest(OLD.acl) AS ident) o
        WHERE a.tenant_id = OLD.tenant_id AND a.identity = o.ident;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO acl_identities (tenant_id, identity, refs)
        SELECT NEW.tenant_id, n.ident, 1 FROM (SELECT DISTINCT unnest(NEW.acl) AS ident) n
        ON CONFLICT (tenant_id, identity) DO UPDATE SET refs = acl_identities.refs + 1;
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_acl_identities
AFTER INSERT OR DELETE OR UPDATE OF tenant_id, acl ON documents
FOR EACH ROW EXECUTE FUNCTION acl_identities_track();
