from __future__ import annotations

import msgspec
import pytest

from service.config import GeneratorSettings
from service.errors import InvalidRequest
from service.generate.caps import output_cap
from service.generate.prompt import PROMPT_VERSION, SYSTEM_PROMPT, build_messages, clip
from service.generate.protocol import Passage
from service.pipeline.chat import condense, with_referent

pytestmark = pytest.mark.unit

PASSAGES = [
    Passage(id="S1", title="Office", text="The office opens at nine."),
    Passage(id="S2", title="", text="word " * 500),
]


def test_prompt_is_system_prefix_then_numbered_sources_then_question() -> None:
    system, user = build_messages("When does it open?", PASSAGES, max_source_chars=100)
    assert system == {"role": "system", "content": SYSTEM_PROMPT}
    assert "[S1]" in SYSTEM_PROMPT and "do not answer" in SYSTEM_PROMPT
    body = user["content"]
    assert body.startswith("Sources:\n\n[S1] Office\nThe office opens at nine.\n\n[S2]\n")
    assert body.endswith("Question: When does it open?")
    assert len(body) < 300  # S2 clipped to its 100-character share
    assert PROMPT_VERSION


def test_prompt_total_budget_drops_late_sources_and_context_goes_before_question() -> None:
    many = [Passage(id=f"S{i}", title="t", text="x " * 300) for i in range(1, 6)]
    _, user = build_messages("q?", many, context="earlier", max_prompt_chars=1000)
    assert "[S2]" in user["content"] and "[S5]" not in user["content"]
    assert user["content"].index("Earlier in this conversation: earlier") < user["content"].index(
        "Question: q?"
    )


def test_clip_keeps_short_text_and_cuts_long_at_a_word() -> None:
    assert clip("  a   b ", 10) == "a b"
    assert clip("alpha beta gamma", 12) == "alpha beta …"


def test_output_cap_per_request_per_tenant_and_hard_limit() -> None:
    g = msgspec.convert(
        {"max_tokens": 200, "max_tokens_limit": 1000, "tenant_max_tokens": {"small": 50}},
        GeneratorSettings,
    )
    assert output_cap(g, "any", None) == 200
    assert output_cap(g, "any", 700) == 700
    assert output_cap(g, "any", 5000) == 1000
    assert output_cap(g, "small", None) == 50
    assert output_cap(g, "small", 10) == 10


class M:
    def __init__(self, role: str, content: str) -> None:
        self.role, self.content = role, content

    def text(self) -> str:
        return self.content


def test_condense_takes_last_user_question_and_earlier_user_turns() -> None:
    q, ctx = condense(
        [
            M("system", "be nice"),
            M("user", "one"),
            M("assistant", "a"),
            M("user", "two"),
            M("user", "three"),
            M("user", "four"),
            M("user", "what now?"),
        ]
    )
    assert q == "what now?"
    assert ctx == "two / three / four"
    assert condense([M("user", "only")]) == ("only", "")


@pytest.mark.parametrize(
    "messages", [[M("system", "x")], [M("user", "q"), M("assistant", "a")], [M("user", " ")]]
)
def test_condense_refuses_transcripts_without_a_final_user_question(messages: list[M]) -> None:
    with pytest.raises(InvalidRequest):
        condense(messages)


@pytest.mark.parametrize(
    ("earlier", "question", "standalone"),
    [
        ("What is CORS?", "How do I enable it?", "How do I enable it? (cors)"),
        ("CORS क्या है?", "इसे कैसे चालू करें?", "इसे कैसे चालू करें? (cors)"),
        (
            "background tasks kya hote hain?",
            "inhe kaise chalayein?",
            "inhe kaise chalayein? (background tasks)",
        ),
        ("What is CORS?", "What is the capital of France?", "What is the capital of France?"),
    ],
)
def test_a_follow_up_that_refers_back_carries_what_the_turn_before_was_about(
    earlier: str, question: str, standalone: str
) -> None:
    turns = [M("user", earlier), M("assistant", "…"), M("user", question)]
    assert with_referent(question, turns) == standalone
    assert with_referent(question, [M("user", question)]) == question  # no turn before
