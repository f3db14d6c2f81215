"""An answer's sources: as many as asked, one copy per translated page (the pipeline asks the
search for more hits, so dropped copies leave their places to the next pages down)."""

from __future__ import annotations

import pytest

from service.config import load_settings
from service.generate.router import GeneratorRouter
from service.identity import Principal
from service.index.protocol import Hit
from service.pipeline.answer import AnswerPipeline, Question
from tests.cache_helpers import CountingGenerator, ListRetrieval

pytestmark = pytest.mark.unit


def _copies() -> list[Hit]:
    """Ranked hits where each Hindi page has its English copy next."""
    hits = []
    for n in range(10):
        for lang in ("hi", "en"):
            doc = f"{lang}/docs/page{n}.md"
            hits.append(Hit(id=doc, doc_id=doc, chunk_ix=0, score=1.0, text=f"p{n}", lang=lang))
    return hits


async def test_a_hindi_question_gets_top_k_sources_when_pages_have_english_copies() -> None:
    retrieval = ListRetrieval(_copies())
    pipeline = AnswerPipeline(
        retrieval, GeneratorRouter.of(CountingGenerator()), load_settings(environ={})
    )
    q = Question(query="पेज कहाँ है?", filters=None, top_k=4, max_tokens=64, request_id="r")
    prepared = await pipeline.prepare(Principal(tenant_id="t", user_id="u", groups=()), q)
    assert [s.doc_id for s in prepared.sources] == [f"hi/docs/page{n}.md" for n in range(4)]
    assert retrieval.asked == [8]
