"""The `openai` generator: streaming chat completions from OpenAI-compatible servers (vLLM).

One pooled `httpx.AsyncClient` serves every request; a request goes to the least busy server of
the pool whose own circuit is closed. Closing our iterator (client gone, deadline missed) leaves
the `async with` that owns the upstream response, which closes the half-read connection: vLLM
sees the disconnect and aborts the sequence, freeing its KV blocks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import httpx
import msgspec

from service.config import Settings
from service.generate.breaker import CircuitBreaker
from service.generate.prompt import build_messages
from service.generate.protocol import GenerationRecord, GeneratorFailed, Passage, TokenStream


class _Delta(msgspec.Struct):
    content: str | None = None


class _Choice(msgspec.Struct):
    delta: _Delta = msgspec.field(default_factory=_Delta)
    finish_reason: str | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = msgspec.field(default_factory=list)
    usage: _Usage | None = None
    error: Any = None


_decode_chunk = msgspec.json.Decoder(_Chunk).decode


class Endpoint:
    """One upstream server of the pool, with its own breaker and in-flight count."""

    def __init__(self, base_url: str, breaker: CircuitBreaker) -> None:
        self.base_url = base_url.rstrip("/")
        self.breaker = breaker
        self.in_flight = 0


class OpenAIGenerator:
    name = "openai"
    deterministic = False  # answers are not cached whole (see service/cache/answers.py)
    instant = False  # a model: its first token has a deadline

    def __init__(
        self,
        base_urls: Sequence[str],
        *,
        model: str,
        api_key: str = "",
        temperature: float = 0.0,
        connect_timeout_s: float = 0.5,
        read_timeout_s: float = 10.0,
        max_connections: int = 64,
        breaker_failures: int = 3,
        breaker_reset_s: float = 5.0,
        slow_after_s: float = 0.6,
        max_source_chars: int = 1200,
        max_prompt_chars: int = 6000,
    ) -> None:
        if not base_urls:
            raise ValueError("the openai generator needs at least one base URL")
        self.endpoints = [
            Endpoint(
                url,
                CircuitBreaker(f"openai:{url}", failures=breaker_failures, reset_s=breaker_reset_s),
            )
            for url in base_urls
        ]
        self.model = model
        self.temperature = temperature
        self.slow_after_s = slow_after_s
        self.max_source_chars = max_source_chars
        self.max_prompt_chars = max_prompt_chars
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._next = 0
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=connect_timeout_s,
                read=read_timeout_s,
                write=connect_timeout_s,
                pool=connect_timeout_s,
            ),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
        )

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIGenerator:
        g = settings.generator
        return cls(
            g.base_urls,
            model=g.model,
            api_key=g.api_key,
            temperature=g.temperature,
            connect_timeout_s=g.connect_timeout_ms / 1000,
            read_timeout_s=g.read_timeout_ms / 1000,
            max_connections=g.max_connections,
            breaker_failures=g.breaker_failures,
            breaker_reset_s=g.breaker_reset_ms / 1000,
            slow_after_s=settings.budget.generate_first_token_ms / 1000,
            max_source_chars=g.max_source_chars,
            max_prompt_chars=g.max_prompt_chars,
        )

    def pick(self) -> Endpoint:
        """The least busy server whose circuit lets a request through (round robin on ties)."""
        n = len(self.endpoints)
        order = [self.endpoints[(self._next + i) % n] for i in range(n)]
        self._next = (self._next + 1) % n
        for ep in sorted(order, key=lambda e: e.in_flight):
            if ep.breaker.allow():
                return ep
        raise GeneratorFailed("every upstream server's circuit is open")

    async def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> TokenStream:
        messages = build_messages(
            question,
            passages,
            context=context,
            max_source_chars=self.max_source_chars,
            max_prompt_chars=self.max_prompt_chars,
        )
        body = {
            "model": self.model,
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if record is not None:
            record.generator = self.name
        ep = self.pick()
        ep.in_flight += 1
        started = time.monotonic()
        first = False
        verdict = False
        try:
            async with self.client.stream(
                "POST", ep.base_url + "/chat/completions", json=body, headers=self._headers
            ) as resp:
                if resp.status_code != 200:
                    raise GeneratorFailed(f"upstream answered HTTP {resp.status_code}")
                async for line in resp.aiter_lines():
                    if not line.startswith("data:"):
                        continue
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = _decode_chunk(data)
                    except msgspec.DecodeError:
                        raise GeneratorFailed("upstream sent a malformed chunk") from None
                    if chunk.error is not None:
                        raise GeneratorFailed("upstream reported an error mid-stream")
                    if chunk.usage is not None and record is not None:
                        record.prompt_tokens = chunk.usage.prompt_tokens
                        record.completion_tokens = chunk.usage.completion_tokens
                    for choice in chunk.choices:
                        if choice.finish_reason and record is not None:
                            record.finish_reason = choice.finish_reason
                        if choice.delta.content:
                            if not first:
                                first = verdict = True
                                ep.breaker.success()
                            if record is not None and chunk.usage is None:
                                record.completion_tokens += 1
                            yield choice.delta.content
            if not first:
                verdict = True
                ep.breaker.success()  # an empty answer is still an answer
        except httpx.HTTPError as exc:
            verdict = True
            ep.breaker.failure()
            raise GeneratorFailed(f"upstream request failed: {type(exc).__name__}") from None
        except GeneratorFailed:
            verdict = True
            ep.breaker.failure()
            raise
        finally:
            ep.in_flight -= 1
            if not verdict:
                # Cancelled before the first token: slow if it outlived the first-token
                # deadline, otherwise the client simply left and says nothing about the server.
                if time.monotonic() - started >= self.slow_after_s:
                    ep.breaker.failure()
                else:
                    ep.breaker.release()

    def breakers(self) -> Sequence[CircuitBreaker]:
        """One per upstream server (`openai:<base url>`)."""
        return [ep.breaker for ep in self.endpoints]

    async def aclose(self) -> None:
        await self.client.aclose()
