"""Text utilities shared by the service, the indexer and the evals (tokens, sentences)."""
