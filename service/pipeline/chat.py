"""From a chat transcript to one question: the last user message is the question; earlier user
turns are condensed into a short context that widens retrieval and is shown to the generator.
A question that refers back ("How do I enable it?" after "What is CORS?") carries what the
user's turn before it was about, which says what "it" is (`with_referent`): the answerability
decision and the extractive answer read the question alone, and "enable" alone is answered by
nothing.

Client `system` messages are ignored: the answer prompt's system prefix is Ragline's, stable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import regex

from service.errors import InvalidRequest
from service.generate.prompt import clip
from service.text.question_words import asks
from service.text.tokenize import content_words

CONTEXT_TURNS = 3
CONTEXT_CHARS = 500
REFERENT_CHARS = 200

REFERS_BACK = regex.compile(
    r"(?<![\p{L}\p{M}])(?:it|its|this|that|these|those|they|them|their|one"
    r"|ise|isko|iska|iski|iske|inhe|inhen|inko|unhe|unhen|unko|usko|yeh|woh"
    r"|इसे|इसको|इसका|इसकी|इसके|इन्हें|इनको|इनका|उसे|उसको|उसका|उन्हें|उनको|उनका|यह|ये|वह|वे)"
    r"(?![\p{L}\p{M}])",
    regex.IGNORECASE,
)
"""A pronoun a follow-up uses for what an earlier turn asked about (English, Hinglish, Hindi)."""


class Turn(Protocol):
    role: str

    def text(self) -> str: ...


def user_turns(messages: Sequence[Turn]) -> list[str]:
    """The user messages' texts, stripped, the empty ones left out, oldest first."""
    users = [m.text().strip() for m in messages if m.role == "user"]
    return [u for u in users if u]


def condense(messages: Sequence[Turn]) -> tuple[str, str]:
    """(question, context): the last user message, and up to 3 earlier user turns, newest last."""
    users = user_turns(messages)
    if not users:
        raise InvalidRequest("messages: no user message with text", code="invalid_body")
    if messages[-1].role != "user":
        raise InvalidRequest("messages: the last message must be the user's", code="invalid_body")
    if not messages[-1].text().strip():
        raise InvalidRequest(
            "messages: the last user message is empty or only whitespace", code="invalid_body"
        )
    question = users[-1]
    earlier = users[:-1][-CONTEXT_TURNS:]
    context = clip(" / ".join(earlier), CONTEXT_CHARS) if earlier else ""
    return question, context


def with_referent(question: str, messages: Sequence[Turn]) -> str:
    """`question`, when it refers back to an earlier turn (`REFERS_BACK`), followed in brackets
    by what the user's turn before it was about: its words without the ones it asked with
    ("How do I enable it? (cors)" after "What is CORS?", case-folded, not "(What is CORS?)",
    which would make the question ask what something is); else as it is."""
    if REFERS_BACK.search(question) is None:
        return question
    earlier = user_turns(messages)[:-1]
    if not earlier:
        return question
    said = content_words(clip(earlier[-1], REFERENT_CHARS))
    about = " ".join(w for w in said if not asks(w))
    return f"{question} ({about})" if about else question
