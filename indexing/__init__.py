"""The indexing CLI: load sources, chunk, embed in batches, write the index and the registry."""
