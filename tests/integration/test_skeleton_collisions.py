"""A Hindi word that shares a consonant skeleton with an English word by chance no longer
counts as that word, over the real embedder, Qdrant Edge and HTTP on the FastAPI pages the
project ships (`data/sample`): "बिरयानी" (biryani) and "brain" are both `brn`, and the sample's
Hindi features page says "IDE/linter/brain", so "बिरयानी कैसे बनाएं?" was answered from it (the
demo, 2026-12-07). The vowel after the first consonant must agree too
(`service.text.phonetic.vowels_agree`), and a loanword spelled in Devanagari is still met."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from service.answerability import abstain_message
from tests.helpers import answered, auth, sample_tenant_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]


@pytest.fixture(scope="module", name="sample_key")
async def _sample_key(runtime: Any, sample_dir: Path) -> str:
    return await sample_tenant_key(runtime, sample_dir, "skeletons")


async def test_a_dish_that_sounds_like_an_english_word_is_abstained_on(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    resp = await http.post(
        "/v1/answer",
        json={"query": "बिरयानी कैसे बनाएं?", "stream": False},
        headers=auth(sample_key),
    )
    assert resp.status_code == 200
    body = resp.json()
    assert body["abstained"] is True, body
    assert body["answer"] == abstain_message("hi")


async def test_a_loanword_in_devanagari_is_still_met(
    http: httpx.AsyncClient, sample_key: str
) -> None:
    body = await answered(http, sample_key, "बैकग्राउंड टास्क कैसे चलाएं?")
    assert "BackgroundTasks" in body["answer"], body
