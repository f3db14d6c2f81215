"""The groundedness scorer, for evals: it lives in `service.grounding` because the service
scores every answer with it too (and `service` must not import `evals`)."""

from __future__ import annotations

from service.grounding import (
    EMBEDDING_MODEL,
    LEXICAL_MODEL,
    Embed,
    Evidence,
    GroundednessResult,
    GroundednessScorer,
    SentenceEvidence,
    SentenceSupport,
    SupportModel,
    content_tokens,
    extract_citations,
    lexical_overlap_score,
    split_sentences,
    strip_citations,
)

__all__ = [
    "EMBEDDING_MODEL",
    "LEXICAL_MODEL",
    "Embed",
    "Evidence",
    "GroundednessResult",
    "GroundednessScorer",
    "SentenceEvidence",
    "SentenceSupport",
    "SupportModel",
    "content_tokens",
    "extract_citations",
    "lexical_overlap_score",
    "split_sentences",
    "strip_citations",
]
