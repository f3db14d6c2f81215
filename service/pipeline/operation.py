"""Which operation an answer serves: it picks the generator chain
(`generator.class_routes`) and is part of the answer cache key."""

from __future__ import annotations

ANSWER = "answer"
CHAT = "chat"
