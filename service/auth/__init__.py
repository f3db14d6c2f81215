"""Who is asking: API keys, JWTs of a tenant's OIDC issuer, frontends acting for their users,
platform keys, and how a revocation reaches every replica (see docs/identity.md)."""
