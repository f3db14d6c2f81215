"""Request and response bodies of the HTTP API (ARCHITECTURE §5). `/v1/search` answers with
the operation's own `service.ops.search.SearchResult`; errors are `service.errors.Problem`."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from service.pipeline.events import Source, Usage

Query = Annotated[str, msgspec.Meta(min_length=1, max_length=4000)]
TopK = Annotated[
    int,
    msgspec.Meta(
        ge=1,
        le=100,
        description="Sources (answer, chat) or results (search) wanted; default the server's "
        "`retrieval.top_k` (5). The server caps it at its `retrieval.max_top_k` (20 unless "
        "configured): above that is a 422 `invalid_body`.",
    ),
]
MaxTokens = Annotated[int, msgspec.Meta(ge=1, le=4096)]


class AnswerRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    query: Query
    filters: dict[str, Any] | None = None
    top_k: TopK | None = None
    stream: bool = True
    max_tokens: MaxTokens | None = None


class SearchRequest(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    query: Query
    filters: dict[str, Any] | None = None
    top_k: TopK | None = None


class AnswerResponse(msgspec.Struct, kw_only=True):
    request_id: str
    cache: str
    sources: list[Source]
    answer: str
    citations: list[str]
    usage: Usage
    timings_ms: dict[str, float]
    degraded: list[str]
    groundedness: float | None = None
    abstained: bool = False
    confidence: float | None = None
