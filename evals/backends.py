"""Where the questions go: the pipeline in this process, or a running service over HTTP.

Both backends turn what they see into the same `Observation` through one `Collector` fed with
the answer events as plain dicts (in-process events are converted exactly as the SSE encoder
would), so the two modes differ only in transport, and measure latency the same way: from just
before the request until the first `token` event (TTFT) and until `done` (total).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from typing import Any, Protocol

import httpx
import msgspec

from indexing.remote import retry_after_s
from service.config import Settings
from service.errors import RaglineError
from service.identity import Principal
from service.ops.answer import AnswerArgs, AnswerService, AnswerSource
from service.ops.caller import Caller
from service.ops.search import SearchArgs, SearchService
from service.pipeline.events import event_name
from service.pipeline.retrieve import Retrieval

BATCH_CLASS_HEADER = "X-Ragline-Class"
"""Admission control sheds or queues batch traffic before interactive traffic."""
MAX_RETRIES = 8


class SourceSeen(msgspec.Struct, kw_only=True):
    id: str
    doc_id: str
    title: str = ""
    score: float = 0.0
    snippet: str = ""


class Ranking(msgspec.Struct, kw_only=True):
    """The retrieval pass: chunk doc ids in rank order and the chunk texts per document."""

    doc_ids: list[str]
    texts: dict[str, str]
    degraded: list[str] = msgspec.field(default_factory=list)
    error: str | None = None


class Observation(msgspec.Struct, kw_only=True):
    """One answer as the client saw it."""

    sources: list[SourceSeen] = msgspec.field(default_factory=list)
    answer: str = ""
    citations: list[str] = msgspec.field(default_factory=list)
    ttft_ms: float | None = None
    total_ms: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_events: int = 0
    server_timings_ms: dict[str, float] = msgspec.field(default_factory=dict)
    degraded: list[str] = msgspec.field(default_factory=list)
    service_groundedness: float | None = None
    abstained: bool = False
    """`done.abstained`: the service said the sources do not answer."""
    confidence: float | None = None
    cache: str = ""
    error: str | None = None
    retries: int = 0


class Backend(Protocol):
    mode: str
    target: str

    async def search(self, query: str, top_k: int) -> Ranking: ...

    async def answer(
        self, query: str, top_k: int | None, max_tokens: int | None
    ) -> Observation: ...

    async def close(self) -> None: ...


class Collector:
    """Builds an Observation from answer events (name, JSON data) as they arrive."""

    def __init__(self) -> None:
        self.obs = Observation()
        self._t0 = time.perf_counter()
        self._pieces: list[str] = []

    def restart(self) -> None:
        self._t0 = time.perf_counter()
        self._pieces.clear()
        retries = self.obs.retries
        self.obs = Observation(retries=retries)

    def _ms(self) -> float:
        return round((time.perf_counter() - self._t0) * 1000, 3)

    def feed(self, name: str, data: dict[str, Any]) -> None:
        obs = self.obs
        if name == "meta":
            obs.cache = str(data.get("cache", ""))
        elif name == "sources":
            obs.sources = [msgspec.convert(s, SourceSeen) for s in data.get("sources", [])]
        elif name == "token":
            if obs.ttft_ms is None:
                obs.ttft_ms = self._ms()
            obs.token_events += 1
            self._pieces.append(str(data.get("text", "")))
        elif name == "done":
            obs.total_ms = self._ms()
            obs.answer = str(data.get("answer") or "".join(self._pieces).strip())
            obs.citations = list(data.get("citations", []))
            usage = data.get("usage") or {}
            obs.prompt_tokens = int(usage.get("prompt_tokens", 0))
            obs.completion_tokens = int(usage.get("completion_tokens", 0))
            obs.server_timings_ms = dict(data.get("timings_ms") or {})
            obs.degraded = list(data.get("degraded", []))
            grounded = data.get("groundedness")
            obs.service_groundedness = float(grounded) if grounded is not None else None
            obs.abstained = bool(data.get("abstained", False))
            conf = data.get("confidence")
            obs.confidence = float(conf) if conf is not None else None
        elif name == "error":
            obs.total_ms = self._ms()
            obs.answer = "".join(self._pieces).strip()
            obs.error = f"{data.get('code', 'error')}: {data.get('message', '')}"

    def fail(self, error: str) -> Observation:
        self.obs.total_ms = self._ms()
        self.obs.error = error
        return self.obs


def _texts(hits: list[dict[str, Any]]) -> dict[str, str]:
    texts: dict[str, list[str]] = {}
    for h in hits:
        texts.setdefault(str(h["doc_id"]), []).append(str(h.get("text", "")))
    return {d: "\n".join(parts) for d, parts in texts.items()}


class InProcessBackend:
    """The operations the routes call (`service.ops`), in this process, without HTTP (and
    without tenant limits: this is the operator's own run)."""

    mode = "in-process"

    def __init__(
        self,
        retriever: Retrieval,
        answers: AnswerSource,
        settings: Settings,
        principal: Principal,
        target: str = "",
    ) -> None:
        """`answers`: the runtime's cached pipeline, or a bare `AnswerPipeline` (tests build
        broken ones)."""
        self.searching = SearchService(retriever, settings)
        self.answering = AnswerService(answers, settings)
        self.principal = principal
        self.target = target or f"state dir {settings.state_dir}"

    def _caller(self) -> Caller:
        return Caller(principal=self.principal, request_id=uuid.uuid4().hex)

    async def search(self, query: str, top_k: int) -> Ranking:
        try:
            found = await self.searching.search(
                self._caller(), SearchArgs(query=query, top_k=top_k)
            )
        except RaglineError as exc:
            return Ranking(doc_ids=[], texts={}, error=f"{exc.code}: {exc.message}")
        hits = found.results
        plain = [msgspec.to_builtins(h) for h in hits]
        return Ranking(
            doc_ids=[h.doc_id for h in hits], texts=_texts(plain), degraded=list(found.degraded)
        )

    async def answer(self, query: str, top_k: int | None, max_tokens: int | None) -> Observation:
        collect = Collector()
        try:
            run = await self.answering.answer(
                self._caller(), AnswerArgs(query=query, top_k=top_k, max_tokens=max_tokens)
            )
            async for event in run.events:
                collect.feed(event_name(event), msgspec.to_builtins(event))
        except RaglineError as exc:
            return collect.fail(f"{exc.code}: {exc.message}")
        return collect.obs

    async def close(self) -> None:
        return None


class HttpBackend:
    """`/v1/search` and streaming `/v1/answer` of a running service, marked as batch traffic.

    429 and 503 answers are retried after their `Retry-After` (admission control sheds batch
    traffic first); the latency of a retried question is that of its last attempt."""

    mode = "http"

    def __init__(self, url: str, key: str, *, concurrency: int = 4, timeout: float = 60) -> None:
        self.target = url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.target,
            timeout=timeout,
            headers={"Authorization": f"Bearer {key}", BATCH_CLASS_HEADER: "batch"},
            limits=httpx.Limits(max_connections=max(2, concurrency * 2)),
        )

    @staticmethod
    def _wait(resp: httpx.Response) -> float | None:
        if resp.status_code not in (429, 503):
            return None
        return retry_after_s(resp.headers.get("Retry-After"))

    @staticmethod
    def _problem(resp: httpx.Response) -> str:
        try:
            body = resp.json()
            return f"{body.get('code', resp.status_code)}: {body.get('detail', '')}"
        except ValueError:
            return f"http {resp.status_code}"

    async def search(self, query: str, top_k: int) -> Ranking:
        for _ in range(MAX_RETRIES):
            resp = await self._client.post("/v1/search", json={"query": query, "top_k": top_k})
            wait = self._wait(resp)
            if wait is not None:
                await asyncio.sleep(wait)
                continue
            if resp.status_code != 200:
                return Ranking(doc_ids=[], texts={}, error=self._problem(resp))
            body = resp.json()
            hits = list(body["results"])
            return Ranking(
                doc_ids=[str(h["doc_id"]) for h in hits],
                texts=_texts(hits),
                degraded=list(body.get("degraded", [])),
            )
        return Ranking(doc_ids=[], texts={}, error="overloaded: gave up after retries")

    async def answer(self, query: str, top_k: int | None, max_tokens: int | None) -> Observation:
        body: dict[str, Any] = {"query": query, "stream": True}
        if top_k is not None:
            body["top_k"] = top_k
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        collect = Collector()
        for attempt in range(MAX_RETRIES):
            collect.restart()
            collect.obs.retries = attempt
            try:
                async with self._client.stream("POST", "/v1/answer", json=body) as resp:
                    wait = self._wait(resp)
                    if wait is not None:
                        await resp.aread()
                        await asyncio.sleep(wait)
                        continue
                    if resp.status_code != 200:
                        await resp.aread()
                        return collect.fail(self._problem(resp))
                    await self._read_sse(resp, collect)
                    return collect.obs
            except httpx.HTTPError as exc:
                return collect.fail(f"transport: {type(exc).__name__}")
        return collect.fail("overloaded: gave up after retries")

    @staticmethod
    async def _read_sse(resp: httpx.Response, collect: Collector) -> None:
        name: str | None = None
        data: list[str] = []
        async for line in resp.aiter_lines():
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and name is not None:
                collect.feed(name, json.loads("\n".join(data)) if data else {})
                if name in ("done", "error"):
                    return
                name, data = None, []
        if collect.obs.error is None and not collect.obs.total_ms:
            collect.fail("stream ended before done")

    async def close(self) -> None:
        await self._client.aclose()
