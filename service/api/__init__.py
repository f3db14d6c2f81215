"""HTTP transport: route handlers adapt HTTP to the pipeline and nothing more."""
