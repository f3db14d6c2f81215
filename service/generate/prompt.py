"""The versioned answer prompt: a stable system prefix, numbered sources, then the question.

The system message never varies between requests, tenants or backends, so vLLM's prefix cache
reuses its KV blocks; everything request-specific comes after it. Bump `PROMPT_VERSION` whenever
the wording or layout changes: it goes into cache keys and usage records.
"""

from __future__ import annotations

from collections.abc import Sequence

from service.generate.protocol import Passage

PROMPT_VERSION = "rag-2"

SYSTEM_PROMPT = (
    "You answer questions using only the numbered sources given with each question.\n"
    "Rules:\n"
    "- Use only facts stated in the sources. Do not use outside knowledge.\n"
    "- After each sentence that uses a source, cite it in square brackets like [S1], "
    "or [S1, S2] for several.\n"
    "- If the sources do not answer the question, say plainly: "
    '"The sources do not answer this question." Do not guess.\n'
    "- Answer in the language of the question. Be brief: at most a few sentences."
)

Message = dict[str, str]


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters at a word boundary, marked with an ellipsis."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit] + " …"


def render_sources(passages: Sequence[Passage], *, max_source_chars: int, max_total: int) -> str:
    """`[S1] title` then the (clipped) text of each source, stopping at the total budget."""
    blocks: list[str] = []
    left = max_total
    for p in passages:
        if left <= 0:
            break
        body = clip(p.text, min(max_source_chars, left))
        left -= len(body)
        blocks.append(f"[{p.id}] {p.title}\n{body}" if p.title else f"[{p.id}]\n{body}")
    return "\n\n".join(blocks)


def build_messages(
    question: str,
    passages: Sequence[Passage],
    *,
    context: str = "",
    max_source_chars: int = 1200,
    max_prompt_chars: int = 6000,
) -> list[Message]:
    """Chat messages for one answer; `context` is the condensed earlier conversation."""
    parts = [
        "Sources:\n\n"
        + (
            render_sources(passages, max_source_chars=max_source_chars, max_total=max_prompt_chars)
            or "(no sources)"
        )
    ]
    if context:
        parts.append("Earlier in this conversation: " + clip(context, 600))
    parts.append("Question: " + question.strip())
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": "\n\n".join(parts)},
    ]
