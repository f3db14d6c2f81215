"""Sources: where a tenant's documents come from (folders, S3 buckets, websites), recorded once."""
