"""Bodies of the OpenAI-compatible routes (`/v1/chat/completions`, `/v1/models`): the subset
chat UIs use, in OpenAI's exact wire format.

Unknown request fields are ignored, as OpenAI clients send many (`n`, `user`, `tools`…).
Ragline's extras: `filters` and `top_k` in the request; `sources` and `ragline` in responses.

Wire rule: a struct with `omit_defaults=True` drops every field equal to its default when
encoded, so a constant such as `object` is a required field there (no default), never a default.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from service.api.schemas import MaxTokens, TopK
from service.pipeline.events import Source


class ContentPart(msgspec.Struct, kw_only=True):
    type: str
    text: str = ""


class ChatMessage(msgspec.Struct, kw_only=True):
    role: str
    content: str | list[ContentPart] | None = None

    def text(self) -> str:
        if isinstance(self.content, list):
            return "".join(p.text for p in self.content if p.type == "text")
        return self.content or ""


class StreamOptions(msgspec.Struct, kw_only=True):
    include_usage: bool = False


MAX_MODEL_CHARS = 256


class ChatRequest(msgspec.Struct, kw_only=True):
    messages: list[ChatMessage]
    model: Annotated[str, msgspec.Meta(max_length=MAX_MODEL_CHARS)] = "ragline"
    """Echoed in the response (OpenAI's wire format), so bounded: a longer one is a 422."""
    stream: bool = False
    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None
    stream_options: StreamOptions | None = None
    filters: dict[str, Any] | None = None
    top_k: TopK | None = None


class AssistantMessage(msgspec.Struct, kw_only=True):
    role: str = "assistant"
    content: str


class Choice(msgspec.Struct, kw_only=True):
    index: int = 0
    message: AssistantMessage
    finish_reason: str


class ChatUsage(msgspec.Struct, kw_only=True):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class RaglineInfo(msgspec.Struct, kw_only=True):
    """What `done` carries besides the text: for clients that know Ragline (the chat page too).

    `abstained`: the sources do not answer the question; the message says so in its language;
    `confidence`: the estimated chance (0..1) that the answer (or the abstention) is right;
    `groundedness`: share of the answer its cited sources support (0..1), null when not scored.
    """

    request_id: str
    cache: str
    citations: list[str]
    groundedness: float | None
    degraded: list[str]
    sources: list[Source]
    timings_ms: dict[str, float]
    generator: str
    prompt_version: str
    abstained: bool
    confidence: float | None


class ChatCompletion(msgspec.Struct, kw_only=True):
    id: str
    object: str = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: ChatUsage
    sources: list[Source]
    ragline: RaglineInfo


class Delta(msgspec.Struct, kw_only=True, omit_defaults=True):
    role: str | None = None
    content: str | None = None


class ChunkChoice(msgspec.Struct, kw_only=True):
    index: int = 0
    delta: Delta
    finish_reason: str | None = None


CHUNK_OBJECT = "chat.completion.chunk"


class ChatChunk(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    object: str  # required: with omit_defaults a default would never be sent
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChatUsage | None = None
    sources: list[Source] | None = None
    ragline: RaglineInfo | None = None


class Model(msgspec.Struct, kw_only=True):
    id: str
    object: str = "model"
    created: int
    owned_by: str


class ModelList(msgspec.Struct, kw_only=True):
    object: str = "list"
    data: list[Model]
