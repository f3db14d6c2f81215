"""The events of one answer (ARCHITECTURE §5), independent of HTTP."""

from __future__ import annotations

import msgspec

from service.errors import ErrorEvent


class Source(msgspec.Struct, kw_only=True):
    id: str
    doc_id: str
    title: str
    source_uri: str
    score: float
    snippet: str


class Usage(msgspec.Struct, kw_only=True):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    generator: str = ""
    """The generator that produced the answer (after any fallback)."""
    prompt_version: str = ""
    """`service.generate.prompt.PROMPT_VERSION` of the prompt used."""


class Meta(msgspec.Struct, kw_only=True, tag="meta"):
    request_id: str
    cache: str


class Sources(msgspec.Struct, kw_only=True, tag="sources"):
    sources: list[Source]


class Token(msgspec.Struct, kw_only=True, tag="token"):
    text: str


class Done(msgspec.Struct, kw_only=True, tag="done"):
    answer: str
    citations: list[str]
    usage: Usage
    timings_ms: dict[str, float]
    degraded: list[str]
    groundedness: float | None = None
    """Share of the answer its cited sources support (0..1), scored after the last token;
    null when scoring is off, busy or late."""
    abstained: bool = False
    """The sources do not answer the question (service.answerability): the answer is a fixed
    message in the question's language, and no model ran."""
    confidence: float | None = None
    """How likely the answer is right (0..1): p(answerable) of the calibrated answerability
    model for an answer, 1 - p for an abstention; null when not computed."""


Event = Meta | Sources | Token | Done | ErrorEvent
"""The `error` event is the error's own rendering: `service.errors.ErrorEvent`."""


def event_name(event: Event) -> str:
    """The event's name on the wire (its tag): `meta`, `sources`, `token`, `done`, `error`."""
    return str(type(event).__struct_config__.tag)
