"""Second-phase rankers over the fused shortlist (a Reranker protocol, several backends)."""
