"""PostgreSQL: the system of record (tenants, keys, documents, runs, usage)."""
