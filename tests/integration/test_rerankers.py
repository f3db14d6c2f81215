"""The model-backed rerankers on real weights: a tiny CrossEncoder made here from the packaged
MiniLM (nothing downloaded; its head is untrained, so only the code path is tested), and MaxSim
over the exported ONNX embedder's token vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from service.embed.protocol import packaged_model_dir
from service.index.protocol import Hit
from service.rerank.cross_encoder import CrossEncoderReranker
from service.rerank.loader import load_reranker
from service.rerank.maxsim import MaxSimReranker
from service.rerank.stage import RerankStage

pytestmark = pytest.mark.integration

QUERY = "When does the Bangalore office open?"
HITS = [
    Hit(
        id="a", doc_id="a", chunk_ix=0, score=0.9, title="Kumquats", text="Globex exports kumquats."
    ),
    Hit(
        id="b",
        doc_id="b",
        chunk_ix=0,
        score=0.8,
        title="Office hours",
        text="The Bangalore office opens at nine in the morning.",
    ),
    Hit(
        id="c", doc_id="c", chunk_ix=0, score=0.7, title="Deploys", text="Deploys run on Tuesdays."
    ),
]


@pytest.fixture(scope="module")
def tiny_cross_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CrossEncoder directory built from the packaged MiniLM weights with a fresh 1-logit head."""
    # torch + transformers: only when this fixture runs, not at collection
    import torch  # noqa: PLC0415
    from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: PLC0415

    src = packaged_model_dir()
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        str(src), num_labels=1, local_files_only=True
    )
    tokenizer = AutoTokenizer.from_pretrained(str(src), local_files_only=True)
    out = tmp_path_factory.mktemp("tiny-ce")
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def with_rerank(settings: Any, **kw: Any) -> Any:
    return msgspec.structs.replace(settings, rerank=msgspec.structs.replace(settings.rerank, **kw))


async def test_cross_encoder_from_a_local_directory(
    settings: Any, tiny_cross_encoder: Path
) -> None:
    reranker = load_reranker(
        with_rerank(settings, backend="cross_encoder", model_dir=str(tiny_cross_encoder))
    )
    assert reranker is not None and reranker.name == f"cross_encoder:{tiny_cross_encoder.name}"
    scores = reranker.score(QUERY, HITS)
    assert len(scores) == 3 and len(set(scores)) == 3
    assert reranker.score(QUERY, HITS) == pytest.approx(scores)  # deterministic
    stage = RerankStage(reranker)
    reranked = await stage.rerank(QUERY, HITS)
    stage.close()
    assert [h.id for h in reranked] == [
        HITS[i].id for i in sorted(range(3), key=lambda i: -scores[i])
    ]
    assert reranked[0].scores["rerank"] == pytest.approx(max(scores))


def test_cross_encoder_needs_a_model_directory(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"config\.json"):
        CrossEncoderReranker(tmp_path)


def test_maxsim_prefers_the_chunk_that_matches_the_query(settings: Any, embedder: Any) -> None:
    reranker = load_reranker(with_rerank(settings, backend="maxsim"))
    assert isinstance(reranker, MaxSimReranker)
    ms = reranker.maxsim(QUERY, HITS)
    assert max(range(3), key=lambda i: ms[i]) == 1
    same = reranker.maxsim(HITS[1].text, [HITS[1]])[0]
    assert same > 0.95  # every query token finds itself
    scores = reranker.score(QUERY, HITS)
    assert max(range(3), key=lambda i: scores[i]) == 1
