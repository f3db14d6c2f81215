"""One error mapping (`RaglineError.to_problem` / `headers` / `to_event` / `to_openai`), the
typed request state, and the operation layer's pieces that need no server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from service.db.documents import DocRow
from service.errors import (
    DeadlineExceeded,
    ErrorEvent,
    HttpProblem,
    InvalidRequest,
    RaglineError,
    RateLimited,
    UpstreamError,
)
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.plan import Changed, DocPlanner, Settled
from service.ops.answer import AnswerRun
from service.pipeline.events import Done, Event, Meta, Source, Sources, Usage
from service.request_state import RequestState


def test_an_error_renders_itself_as_a_problem_with_its_headers() -> None:
    exc = RateLimited("tenant over its interactive limit", retry_after=1.2)
    p = exc.to_problem("rid-1")
    assert (p.status, p.code, p.title, p.request_id) == (429, "rate_limited", exc.title, "rid-1")
    assert p.type == "https://ragline.dev/problems/rate_limited" and p.detail == exc.message
    assert exc.headers() == {"Retry-After": "2"}
    assert InvalidRequest("bad", code="invalid_body").headers() == {}
    http = HttpProblem(405, "method_not_allowed", "Method Not Allowed", "nope").to_problem()
    assert (http.status, http.code, http.request_id) == (405, "method_not_allowed", "")


def test_an_error_event_hands_back_the_very_error_it_was_made_from() -> None:
    exc = DeadlineExceeded("no token within the budget")
    event = exc.to_event()
    assert (event.code, event.message) == ("budget_exceeded", exc.message)
    assert RaglineError.from_event(event) is exc
    # An event made some other way (no error kept) reports a failed dependency with its code.
    bare = RaglineError.from_event(ErrorEvent(code="generator_failed", message="gone"))
    assert isinstance(bare, UpstreamError) and bare.code == "generator_failed"
    assert exc.to_openai() == {
        "error": {
            "message": exc.message,
            "type": "server_error",
            "code": "budget_exceeded",
            "param": None,
        }
    }


class _Started:
    def __init__(self) -> None:
        self.request_id = "r1"
        self.cache = "miss"
        self.sources = [Source(id="S1", doc_id="d", title="", source_uri="", score=1, snippet="")]

    def timings_so_far(self) -> dict[str, float]:
        return {"search": 1.0}


async def _events(*events: Event) -> AsyncIterator[Event]:
    for e in events:
        yield e


async def test_a_whole_answer_raises_the_error_its_stream_reported() -> None:
    exc = DeadlineExceeded("late")
    run = AnswerRun(_Started(), 64, _events(Meta(request_id="r1", cache="miss"), exc.to_event()))
    with pytest.raises(DeadlineExceeded) as got:
        await run.result()
    assert got.value is exc and got.value.status == 504

    done = Done(answer="a", citations=[], usage=Usage(), timings_ms={}, degraded=[])
    run = AnswerRun(_Started(), 64, _events(Sources(sources=[]), done))
    answer = await run.result()
    assert answer.done is done and answer.sources[0].doc_id == "d"  # the prepared sources
    assert run.timings_so_far() == {"search": 1.0}

    with pytest.raises(UpstreamError, match="without a result"):
        await AnswerRun(_Started(), 64, _events()).result()


def test_the_request_state_is_one_object_per_scope() -> None:
    scope: dict[str, Any] = {"type": "http"}
    state = RequestState.from_scope(scope)  # type: ignore[arg-type]
    state.request_id = "abc"
    again = RequestState.from_scope(scope)  # type: ignore[arg-type]
    assert again is state and again.request_id == "abc" and again.admission == "interactive"


def _doc(doc_id: str, text: str = "text", acl: list[str] | None = None) -> SourceDoc:
    return SourceDoc(doc_id=doc_id, text=text, title="", acl=acl, origin=f"/src/{doc_id}")


def test_one_planner_decides_each_document() -> None:
    indexed = _doc("same", acl=["public"])
    salt = "s"
    digest = indexed.content_hash(["public"], {}, salt)
    known = {
        "same": DocRow(
            doc_id="same", content_hash=digest, acl=[], version=1, chunk_count=1, status="indexed"
        )
    }
    planner = DocPlanner(known, allow=[], public=False, meta={}, salt=salt)
    assert planner.plan(_doc("same", acl=["public"])) == Settled(doc_id="same", action="unchanged")
    new = planner.plan(_doc("new", acl=["group:eng"]))
    assert isinstance(new, Changed) and new.acl == ["group:eng"] and new.old is None
    dup = planner.plan(_doc("new", acl=["group:eng"]))
    assert isinstance(dup, Settled) and dup.action == "failed" and dup.failure is not None
    assert dup.failure.reason.startswith("duplicate document id 'new'")
    no_acl = planner.plan(_doc("open"))
    assert isinstance(no_acl, Settled) and no_acl.failure is not None
    assert "no ACL" in no_acl.failure.reason
    broken = planner.plan(LoadError(path="/src/gone.md", reason="not UTF-8 text", doc_id="gone"))
    assert isinstance(broken, Settled) and broken.action == "failed"
    assert "gone" in planner.seen and "/src/gone.md" in planner.errored  # --prune keeps it
