"""A whole answer as stored (answer cache, idempotent replays) and replayed as events."""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from service import telemetry
from service.pipeline.events import Done, Event, Source, Sources, Token, Usage


class AnswerRecord(msgspec.Struct, kw_only=True):
    sources: list[Source]
    pieces: list[str]
    answer: str
    citations: list[str]
    usage: Usage
    degraded: list[str] = msgspec.field(default_factory=list)
    groundedness: float | None = None
    abstained: bool = False
    confidence: float | None = None


record_decoder = msgspec.json.Decoder(AnswerRecord)


class Recorder:
    """Collects the events of a stream into a record; `record` is set once `done` went by."""

    def __init__(self) -> None:
        self.sources: list[Source] = []
        self.pieces: list[str] = []
        self.record: AnswerRecord | None = None

    def see(self, event: Event) -> None:
        if isinstance(event, Sources):
            self.sources = event.sources
        elif isinstance(event, Token):
            self.pieces.append(event.text)
        elif isinstance(event, Done):
            self.record = AnswerRecord(
                sources=self.sources,
                pieces=self.pieces,
                answer=event.answer,
                citations=event.citations,
                usage=event.usage,
                degraded=event.degraded,
                groundedness=event.groundedness,
                abstained=event.abstained,
                confidence=event.confidence,
            )


def replay(record: AnswerRecord, timings_ms: dict[str, float]) -> Iterator[Event]:
    """`sources`, the same `token` pieces, and `done` (with this request's own timings)."""
    yield Sources(sources=record.sources)
    for n, piece in enumerate(record.pieces):
        if n == 0:
            telemetry.first_token()  # a replay's first token counts in TTFT like any other
        yield Token(text=piece)
    yield Done(
        answer=record.answer,
        citations=record.citations,
        usage=record.usage,
        timings_ms=timings_ms,
        degraded=list(record.degraded),
        groundedness=record.groundedness,
        abstained=record.abstained,
        confidence=record.confidence,
    )
