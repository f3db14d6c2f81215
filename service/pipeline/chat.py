"""From a chat transcript to one question: the last user message is the question; earlier user
turns are condensed into a short context that widens retrieval and is shown to the generator.

Client `system` messages are ignored: the answer prompt's system prefix is Ragline's, stable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from service.errors import InvalidRequest
from service.generate.prompt import clip

CONTEXT_TURNS = 3
CONTEXT_CHARS = 500


class Turn(Protocol):
    role: str

    def text(self) -> str: ...


def condense(messages: Sequence[Turn]) -> tuple[str, str]:
    """(question, context): the last user message, and up to 3 earlier user turns, newest last."""
    users = [m.text().strip() for m in messages if m.role == "user"]
    users = [u for u in users if u]
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
