"""The LLM judge's prompt and reply parsing (the HTTP path is in the integration tests)."""

from __future__ import annotations

import pytest

from evals.judge import JudgeError, build_messages, parse_verdicts

pytestmark = pytest.mark.unit


def test_prompt_numbers_sentences_and_labels_sources() -> None:
    msgs = build_messages("q?", ["One.", "Two."], {"S1": "alpha", "S2": "beta"})
    user = msgs[1]["content"]
    assert "1. One.\n2. Two." in user and "[S1] alpha" in user and "[S2] beta" in user


def test_verdicts_parse_from_prose_wrapped_json() -> None:
    reply = 'Sure!\n```json\n{"verdicts": [{"sentence": 2, "supported": false},'
    reply += ' {"sentence": 1, "supported": true}]}\n```'
    v = parse_verdicts(reply, 2)
    assert v.supported == [True, False] and v.score == 0.5


@pytest.mark.parametrize(
    "reply",
    [
        "no json here",
        '{"verdicts": [{"sentence": 1, "supported": true}]}',  # sentence 2 missing
        '{"verdicts": [{"sentence": 1, "supported": "yes"}, {"sentence": 2, "supported": true}]}',
        '{"other": 1}',
    ],
)
def test_incomplete_or_malformed_verdicts_are_errors(reply: str) -> None:
    with pytest.raises(JudgeError):
        parse_verdicts(reply, 2)
