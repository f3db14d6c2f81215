"""Where queries run on a quantized copy (`embedder.query_quantization`), `/v1/search` embeds
on it and answers embed their question on the fp32 model (the answerability model was fitted on
its vectors): one model pass per answer, and answers keyed as the fp32 model's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evals.backends import InProcessBackend
from service.config import load_settings
from service.embed.loader import load_embedder
from service.embed.protocol import for_queries
from service.identity import Principal
from service.pipeline.budget import Budget
from service.runtime import Runtime
from tests.helpers import index_files, write

pytestmark = pytest.mark.integration

DOC = (
    "# Uploads\n\nFiles are uploaded with a multipart form. The upload limit is 25 MB per file, "
    "and larger files are refused with a 413 error.\n"
)


class Recorder:
    """Stands in front of one of the batcher's models and notes what it embedded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.name, self.dim, self.max_tokens = inner.name, inner.dim, inner.max_tokens

    def embed(self, texts: Any) -> Any:
        self.texts += list(texts)
        return self.inner.embed(texts)


async def test_searches_run_on_the_quantized_copy_and_answers_on_fp32(
    settings: Any, state_dir: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    (state / "models").symlink_to(state_dir / "models")  # the session's export, no new one
    env = {
        "RAGLINE_DATABASE_URL": settings.database.url,
        "RAGLINE_STORAGE_STATE_DIR": str(state),
        "RAGLINE_EMBEDDER_QUERY_QUANTIZATION": "split8",
        "RAGLINE_LIMITS_ENABLED": "false",
        "RAGLINE_BUDGET_TTFT_MS": "60000",
        "RAGLINE_BUDGET_EMBED_MS": "30000",
        "RAGLINE_BUDGET_SEARCH_MS": "30000",
    }
    s = load_settings(environ=env)
    embedder = load_embedder(s, lone=True)
    assert embedder.query_model == "split8"
    rt = await Runtime.open(s, embedder=embedder)
    try:
        b: Any = rt.batcher
        searches, answers = Recorder(b.embedder), Recorder(b.exact)
        # a lone search's wide session exists where there is more than one core
        lone_searches = Recorder(b.alone if b.alone is not None else b.embedder)
        lone_answers = Recorder(b.exact_alone)
        b.embedder, b.exact, b.exact_alone = searches, answers, lone_answers
        b.alone = lone_searches if b.alone is not None else None
        docs = tmp_path / "docs"
        write(docs, "uploads.md", DOC)
        summary = await index_files(rt, "qm", docs, public=True)
        assert summary.failed == 0, summary.errors
        who = Principal(tenant_id="qm", user_id="u")
        question = "What is the upload limit per file?"

        hits = await rt.retriever.retrieve(
            who, question, filters=None, top_k=3, budget=Budget(60_000)
        )
        assert hits and question in searches.texts + lone_searches.texts
        assert question not in answers.texts + lone_answers.texts

        backend = InProcessBackend(rt.retriever, rt.answers, s, who)
        answer = await backend.answer(question, 3, None)
        assert answer.error is None and "25 MB" in answer.answer, answer
        searched = searches.texts + lone_searches.texts
        exact = answers.texts + lone_answers.texts
        assert searched.count(question) == 1 and exact.count(question) == 1
        assert rt.pipeline.retriever is rt.answer_retriever is not rt.retriever

        # the two paths' vectors: fp32's own for the answer, the copy's for the search
        fp32 = embedder.embed([question])
        copy = for_queries(embedder).embed([question])
        assert not np.array_equal(fp32, copy)
        assert float((fp32 * copy).sum()) > 0.995
        # their caches never mix: answers and their retrievals are keyed as fp32's
        assert rt.answers.keys.retrieval_version != rt.caching.keys.retrieval_version
    finally:
        await rt.close()
