"""Cache keys (ARCHITECTURE §4): tenant, effective-visibility fingerprint, index version,
normalized request and pipeline version — readable where that helps operators, hashed where it
would expose a query (no raw query text ever appears in a key).
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
from dataclasses import dataclass
from typing import Any

import msgspec

from service.answerability import model_version as answerability_version
from service.config import Settings
from service.index.filters import FilterSpec

PIPELINE_VERSION = "41"  # 41: a Hinglish answer in one language; 40: question language
"""Bump when retrieval or answer code changes what it returns for the same inputs."""


def normalize_query(query: str) -> str:
    """NFC, whitespace collapsed, trimmed: spellings that every stage treats alike."""
    return unicodedata.normalize("NFC", " ".join(query.split()))


def canonical_json(value: Any) -> str:
    return json.dumps(
        msgspec.to_builtins(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )


def canonical_filters(filters: FilterSpec | None) -> str:
    """Parsed filters as canonical JSON; the order conditions were written in does not matter."""
    if filters is None:
        return "null"
    return "[" + ",".join(sorted(canonical_json(c) for c in filters.conditions)) + "]"


def digest(*parts: str) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode())
        h.update(b"\x1f")
    return h.hexdigest()[:40]


def retrieval_version(
    settings: Settings, embedder_name: str, query_model: str | None = None, units: bool = True
) -> str:
    """What retrieval returns depends on these settings and the embedder, and on this code.
    `query_model`: the model queries run on as loaded (`auto` resolves per machine); None
    takes the setting. `units` False: hits without their units scored (`SearchQuery.units`),
    which an answer must never be served."""
    blob = canonical_json(
        ([] if units else ["no-units"])
        + [
            PIPELINE_VERSION,
            settings.retrieval,
            settings.rerank,
            settings.embedder.backend,
            settings.embedder.model_dir,
            embedder_name,
            # queries on a quantized copy retrieve (slightly) differently
            query_model or settings.embedder.query_quantization,
        ]
    )
    return "r" + digest(blob)[:12]


def answer_version(retrieval: str, settings: Settings) -> str:
    """The retrieval version plus the generator settings and the answerability model (whether
    to abstain). The generator chain and the prompt version that answer a request go into each
    answer key itself (`Keys.answer`'s `variant`)."""
    blob = canonical_json([retrieval, settings.generator, answerability_version()])
    return "a" + digest(blob)[:12]


@dataclass(frozen=True, slots=True, kw_only=True)
class Keys:
    """Every cache key of one runtime; built complete (`for_runtime`), never filled in later."""

    prefix: str
    retrieval_version: str
    answer_version: str

    @classmethod
    def for_runtime(
        cls,
        settings: Settings,
        embedder_name: str,
        query_model: str | None = None,
        *,
        units: bool = True,
    ) -> Keys:
        retrieval = retrieval_version(settings, embedder_name, query_model, units)
        return cls(
            prefix=settings.redis.prefix,
            retrieval_version=retrieval,
            answer_version=answer_version(retrieval, settings),
        )

    def embedding(self, tenant_id: str, model: str, query: str) -> str:
        # An embedding holds no index data: tenant-scoped, but no visibility or version needed.
        return f"{self.prefix}emb:{tenant_id}:{digest(model, query)}"

    def retrieval(
        self, tenant_id: str, fingerprint: str, version: int, query: str, filters: str, k: int
    ) -> str:
        req = digest(self.retrieval_version, query, filters, str(k))
        return f"{self.prefix}ret:{tenant_id}:v{version}:{fingerprint}:{req}"

    def answer(
        self,
        tenant_id: str,
        fingerprint: str,
        version: int,
        query: str,
        filters: str,
        k: int,
        max_tokens: int,
        variant: str = "",
    ) -> str:
        """`variant`: what else shapes this answer (the generator chain of the tenant and request
        class, the condensed conversation of a chat)."""
        req = digest(self.answer_version, query, filters, str(k), str(max_tokens), variant)
        return f"{self.prefix}ans:{tenant_id}:v{version}:{fingerprint}:{req}"

    def idempotency(self, tenant_id: str, principal_fp: str, key: str) -> str:
        return f"{self.prefix}idem:{tenant_id}:{principal_fp}:{digest(key)}"
