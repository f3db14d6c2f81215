"""One answer: retrieve, number the sources, stream the generator, finish with `done`.

`prepare` does everything before the first byte (so its failures are proper HTTP problems);
`events` streams the rest and turns late failures into an `error` event.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from typing import Any

import msgspec

from service import telemetry
from service.answerability import Decision, answer_confidence, decide, load_model, realign
from service.config import Settings
from service.errors import (
    DeadlineExceeded,
    InvalidRequest,
    Overloaded,
    RaglineError,
    UpstreamError,
)
from service.generate.extractive import NO_ANSWER
from service.generate.prompt import PROMPT_VERSION
from service.generate.protocol import GenerationRecord, Passage, citations_in
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.filters import AnyOf, FilterSpec
from service.index.protocol import Hit
from service.pipeline.abstain import abstention
from service.pipeline.align import Aligner
from service.pipeline.budget import Budget
from service.pipeline.definition import page_about, page_opening, with_opening
from service.pipeline.events import Done, Event, Meta, Source, Sources, Token, Usage
from service.pipeline.generation import generate
from service.pipeline.ground import Grounder
from service.pipeline.language import COPIES, answer_sources
from service.pipeline.operation import ANSWER
from service.pipeline.pointers import (
    MAX_GUESSES,
    follow_pointers,
    follow_subject_links,
    page_guesses,
    unfound_pointers_down,
)
from service.pipeline.procedure import (
    PAGE_HITS,
    first_procedure,
    passage_of,
    with_next_chunk,
    with_procedure,
)
from service.pipeline.retrieve import Retrieval, one_question
from service.pipeline.term_lists import term_lists_last
from service.pipeline.trim import trim
from service.text.instructions import asks_how

log = logging.getLogger("ragline.pipeline")

SNIPPET_CHARS = 240


def snippet(text: str, limit: int = SNIPPET_CHARS) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit] + "…"


def number_sources(hits: Sequence[Hit]) -> list[Source]:
    return [
        Source(
            id=f"S{i}",
            doc_id=h.doc_id,
            title=h.title,
            source_uri=h.source_uri,
            score=round(h.score, 6),
            snippet=snippet(h.text),
        )
        for i, h in enumerate(hits, start=1)
    ]


class Question(msgspec.Struct, kw_only=True, frozen=True):
    """One question as an answer pipeline takes it (besides who asks)."""

    query: str
    filters: FilterSpec | None
    top_k: int
    max_tokens: int
    request_id: str
    operation: str = ANSWER
    """Picks the generator chain (`chat` for chat completions)."""
    context: str = ""
    """A chat's condensed earlier turns."""
    idempotency_key: str | None = None
    body_digest: str = ""
    """With `idempotency_key`: the digest of the request it binds the key to."""

    @property
    def search_text(self) -> str:
        """What is searched for: the question, widened by a chat's earlier turns."""
        return f"{self.context}\n{self.query}" if self.context else self.query


class PreparedAnswer(msgspec.Struct, kw_only=True):
    """An answer retrieved, trimmed and numbered, ready for its generator."""

    request_id: str
    query: str
    hits: list[Hit]
    sources: list[Source]
    max_tokens: int
    cache: str
    budget: Any  # Budget
    tenant_id: str = ""
    operation: str = ANSWER
    context: str = ""
    answerability: Decision | None = None
    """Whether the sources answer the question; not answerable: abstain, no generator."""
    procedure: str | None = None
    """The passage that holds a how-question's page procedure, when it was moved up (first or
    second) among the sources (`service.pipeline.procedure`): the answer goes on with its
    steps."""
    definition: str | None = None
    """The passage that holds the opening of the page a what-question asks about, when it was
    moved up to first among the sources (`service.pipeline.definition`): the answer opens with
    its sentence that names the subject."""

    def timings_so_far(self) -> dict[str, float]:
        """Stage times known before the stream starts (retrieval)."""
        budget: Budget = self.budget
        return dict(budget.timings_ms)


class AnswerPipeline:
    def __init__(
        self,
        retriever: Retrieval,
        router: GeneratorRouter,
        settings: Settings,
        grounder: Grounder | None = None,
        aligner: Aligner | None = None,
    ) -> None:
        """`router` picks each request's generator chain (`GeneratorRouter.of(gen, fallback)`
        for one fixed chain); `aligner` the token alignment an unsure answerability decision
        takes (None: the cheaper model decides alone)."""
        self.retriever = retriever
        self.settings = settings
        self.router = router
        self.grounder = grounder or Grounder.from_settings(settings.grounding, None)
        self.aligner = aligner

    async def prepare(self, principal: Principal, q: Question) -> PreparedAnswer:
        """Retrieve under the budget; `context` (condensed earlier turns) widens the search.

        The bare pipeline keeps no idempotency records (the runtime's `CachingPipeline` does):
        a request with an idempotency key is refused rather than silently not protected."""
        if q.idempotency_key is not None:
            raise InvalidRequest(
                "idempotency keys need the answer cache", code="idempotency_unavailable"
            )
        budget = Budget(self.settings.budget.ttft_ms)
        with one_question():  # its later searches (`_sources`) reuse the question's vector
            hits = await self.retriever.retrieve(
                principal,
                q.search_text,
                filters=q.filters,
                top_k=COPIES * q.top_k,
                budget=budget,
            )
            sources, moved, opening, unexpanded = await self._sources(principal, q, hits, budget)
        t = self.settings.trim  # before numbering: S1…Sn are the passages the generator sees

        def trimmed(found: Sequence[Hit]) -> list[Hit]:
            return trim(
                found,
                budget_tokens=t.context_tokens,
                duplicate_threshold=t.duplicate_threshold,
                merge=t.merge_neighbours,
            )

        async with budget.timed("trim"):
            hits = trimmed(sources)
            # whether the sources answer is judged on them as the answerability model was
            # fitted: without the procedure's next chunk, which only carries its steps on
            judged = hits if unexpanded is None else trimmed(unexpanded)
        procedure = passage_of(hits, moved)  # trim may have merged it into a neighbour
        definition = passage_of(hits, opening)
        # the request's own k and sources (its search asked for COPIES times as many)
        telemetry.annotate(k=q.top_k, hits=len(hits))
        decision = await self._decide(q.query, judged, budget)
        return PreparedAnswer(
            request_id=q.request_id,
            query=q.query,
            hits=hits,
            sources=number_sources(hits),
            max_tokens=q.max_tokens,
            cache="miss",
            budget=budget,
            tenant_id=principal.tenant_id,
            operation=q.operation,
            context=q.context,
            answerability=decision,
            procedure=procedure,
            definition=definition,
        )

    async def _sources(
        self, principal: Principal, q: Question, hits: list[Hit], budget: Budget
    ) -> tuple[list[Hit], Hit | None, Hit | None, list[Hit] | None]:
        """The answer's `q.top_k` sources from the ranked `hits` (`answer_sources`), each
        passage that only points to another page replaced by that page
        (`service.pipeline.pointers`); a page the search did not find is asked for once more,
        for the question, within the documents its links may name, and a pointer whose page is
        still not among them gives its place to the next source that is no pointer and is on
        the question's subject (`unfound_pointers_down`). A question that asks how
        gets its top page's first procedure as its second source, or its first where it `leads`
        (`service.pipeline.procedure`), from one more search within that page; a question
        that asks what a source's page is about (`page_about`) gets that page's opening as its
        first source when it says what it is (`service.pipeline.definition`), from the same
        search. Each comes back with the sources when it was moved up among them; and the
        sources as they were before the procedure's passage took its next chunk
        (`with_next_chunk`), when it did."""
        top = answer_sources(q.query, self._followed(hits, q.query), q.top_k)
        guesses = list(dict.fromkeys(g for h in top for g in page_guesses(h, hits)))
        if guesses:
            docs = guesses[: 2 * MAX_GUESSES]
            more = await self._within(principal, q, docs, q.top_k, budget, "pointer_search")
            if more is not None:
                seen = {h.id for h in hits}
                hits = [*hits, *(h for h in more if h.id not in seen)]
                top = answer_sources(q.query, self._followed(hits, q.query), q.top_k)
        top = unfound_pointers_down(top, q.query)
        how = asks_how(q.query)
        # the page the question asks about, if a source, and what it asks about
        about, subject = page_about(q.query, top) or (None, frozenset[str]())
        if not top or q.top_k < 2 or not (how or subject):
            return top, None, None, None
        docs = list(dict.fromkeys([top[0].doc_id, *([about.doc_id] if about else [])]))
        page = await self._within(
            principal,
            q,
            docs,
            PAGE_HITS * len(docs),
            budget,
            "procedure_search" if how else "page_search",
        )
        procedure = (
            first_procedure([h for h in page if h.doc_id == top[0].doc_id])
            if page is not None and how
            else None
        )
        opening = (
            page_opening([h for h in page if h.doc_id == about.doc_id], subject, q.query)
            if page is not None and about is not None and subject
            else None
        )
        if opening is not None and opening.id == top[0].id:
            opening = None  # the top source already: nothing changes
        moved = None
        if procedure is not None and procedure.id != top[0].id:  # moved up
            top = with_procedure(top, procedure, q.top_k, q.query)
            if any(h.id == procedure.id for h in top):
                moved = procedure
        if opening is not None:
            top = with_opening(top, opening, q.top_k, then=moved)  # what it is, then how
        unexpanded = None
        if procedure is not None and page is not None and self.settings.trim.merge_neighbours:
            grown = with_next_chunk(top, procedure, page, q.query)  # it takes its next chunk
            if grown != top:
                top, unexpanded = grown, top
        return top, moved, opening, unexpanded

    async def _within(
        self,
        principal: Principal,
        q: Question,
        docs: Sequence[str],
        top_k: int,
        budget: Budget,
        what: str,
    ) -> list[Hit] | None:
        """The question searched once more within `docs`, under the principal's and the
        question's own filters (a page of another tenant, or one the user may not read, is
        never found); None when that search is late or fails: the answer goes on without it,
        and `done.degraded` says so (`<what>_timeout`, `<what>_busy`, `<what>_unavailable`)."""
        within = AnyOf("doc_id", tuple(docs))
        conditions = (*(q.filters.conditions if q.filters else ()), within)
        try:
            return await self.retriever.retrieve(
                principal,
                q.search_text,
                filters=FilterSpec(conditions=conditions),
                top_k=top_k,
                budget=budget,
            )
        except DeadlineExceeded:
            budget.degrade(f"{what}_timeout")
        except Overloaded:  # the embedder's queue is full: the answer goes on without it
            budget.degrade(f"{what}_busy")
        except UpstreamError:
            budget.degrade(f"{what}_unavailable")
        return None

    @staticmethod
    def _followed(hits: Sequence[Hit], query: str) -> list[Hit]:
        """Pointers yield to the pages they point to, and passages off the question's subject
        to the linked pages on it (`service.pipeline.pointers`)."""
        return follow_subject_links(follow_pointers(term_lists_last(hits)), query)

    async def _decide(self, query: str, hits: Sequence[Hit], budget: Budget) -> Decision | None:
        """Does the evidence answer? The cheap model first; where it is unsure, token
        alignment (word-piece vectors, no model run) and the model that reads it."""
        if not self.settings.generator.abstain:
            return None
        model = load_model()
        async with budget.timed("answerability"):
            decision = decide(query, hits, model)
        if self.aligner is not None and hits and model.wants_alignment(decision.signals):
            async with budget.timed("alignment"):
                aligned = self.aligner.align(query, hits)
            if aligned is not None:
                decision = realign(decision, aligned, model)
        return decision

    async def events(self, p: PreparedAnswer) -> AsyncIterator[Event]:
        budget: Budget = p.budget
        telemetry.note_cache(p.cache)
        yield Meta(request_id=p.request_id, cache=p.cache)
        yield Sources(sources=p.sources)
        if p.answerability is not None and not p.answerability.answerable:
            async for event in abstention(p.answerability, budget):
                yield event
            return
        passages = [
            Passage(
                id=s.id,
                title=h.title,
                text=h.text,
                sentence_scores=h.sentence_scores,
                procedure=h.id == p.procedure,
                definition=h.id == p.definition,
            )
            for s, h in zip(p.sources, p.hits, strict=True)
        ]
        pieces: list[str] = []
        record = GenerationRecord()
        try:
            async for piece in generate(
                self.router.chain(p.tenant_id, p.operation),
                p.query,
                passages,
                max_tokens=p.max_tokens,
                budget=budget,
                first_token_ms=self.settings.budget.generate_first_token_ms,
                record=record,
                context=p.context,
            ):
                if not pieces:
                    telemetry.first_token()
                pieces.append(piece)
                yield Token(text=piece)
        except RaglineError as exc:
            telemetry.note_error(exc.code)
            yield exc.to_event()
            return
        except Exception as exc:  # the stream has started: report, then close cleanly
            log.error("answer failed request_id=%s: %s", p.request_id, type(exc).__name__)
            yield UpstreamError("the answer failed; it was logged", code="internal").to_event()
            return
        answer = "".join(pieces).strip()
        async with budget.timed("grounding"):  # after the last token: never before the first
            grounded = await self.grounder.score(
                answer, {s.id: h.text for s, h in zip(p.sources, p.hits, strict=True)}
            )
        usage = Usage(
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens or len(pieces),
            generator=record.generator,
            prompt_version=PROMPT_VERSION,
        )
        telemetry.annotate(model=record.generator)
        telemetry.note_tokens(usage.prompt_tokens, usage.completion_tokens)
        yield Done(
            answer=answer,
            citations=citations_in(answer, [s.id for s in p.sources]),
            usage=usage,
            timings_ms=dict(budget.timings_ms, total=round(budget.elapsed_ms(), 3)),
            degraded=list(budget.degraded),
            groundedness=grounded,
            abstained=answer == NO_ANSWER,
            confidence=answer_confidence(p.answerability, p.query, answer, answer == NO_ANSWER),
        )

    def version(self, tenant_id: str = "", operation: str = ANSWER) -> str:
        """What shapes an answer besides the data (prompt and generator chain): for cache keys."""
        return f"{PROMPT_VERSION}/{self.router.version(tenant_id, operation)}"
