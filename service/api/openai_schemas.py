"""Bodies of the OpenAI-compatible `POST /v1/chat/completions` (the subset chat UIs use).

Unknown request fields are ignored, as OpenAI clients send many (`n`, `user`, `tools`…).
Ragline's extras: `filters` and `top_k` in the request; `sources` and `ragline` in responses.
"""

from __future__ import annotations

from typing import Any

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


class ChatRequest(msgspec.Struct, kw_only=True):
    messages: list[ChatMessage]
    model: str = "ragline"
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
    """What `done` carries besides the text: for clients that know Ragline."""

    request_id: str
    cache: str
    citations: list[str]
    degraded: list[str]
    timings_ms: dict[str, float]
    generator: str
    prompt_version: str
    abstained: bool = False
    """The sources do not answer: the message says so in the question's language."""
    confidence: float | None = None


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


class ChatChunk(msgspec.Struct, kw_only=True, omit_defaults=True):
    id: str
    object: str = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChunkChoice]
    usage: ChatUsage | None = None
    sources: list[Source] | None = None
    ragline: RaglineInfo | None = None
