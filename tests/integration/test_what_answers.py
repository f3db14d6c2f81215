"""A question for what something is or does, over the real embedder, Qdrant Edge and HTTP: the
sentence that names it is quoted with the one after it that says what it is or does ("यह …
लौटाता है"); a how-question's answer does not take it."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.helpers import answered, index_pages, make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

PAGE = "hi/docs/tutorial/encoder.md"
ENCODER = """# JSON संगत Encoder

कुछ मामलों में आपको किसी data type को JSON के साथ संगत किसी चीज़ में convert करने की ज़रूरत पड़
सकती है।

## `jsonable_encoder` का उपयोग करना

इसी तरह, यह database एक Pydantic model स्वीकार नहीं करेगा, केवल एक `dict`। इसके लिए आप
`jsonable_encoder` का उपयोग कर सकते हैं। यह एक object, जैसे Pydantic model, प्राप्त करता है और
JSON संगत version लौटाता है।
"""


@pytest.fixture(scope="module")
async def tenant(runtime: Any, tmp_path_factory: pytest.TempPathFactory) -> str:
    await index_pages(runtime, "what-docs", tmp_path_factory.mktemp("what"), {PAGE: ENCODER})
    return "what-docs"


async def test_what_it_does_follows_the_sentence_that_names_it(
    http: httpx.AsyncClient, runtime: Any, tenant: str
) -> None:
    key = await make_key(runtime, tenant, "uma", [])
    body = await answered(http, key, "jsonable_encoder क्या करता है?")
    assert "`jsonable_encoder` का उपयोग कर सकते हैं" in body["answer"], body["answer"]
    assert "JSON संगत version लौटाता है" in body["answer"], body["answer"]
    body = await answered(http, key, "jsonable_encoder का उपयोग कैसे करें?")
    assert "JSON संगत version लौटाता है" not in body["answer"], body["answer"]
