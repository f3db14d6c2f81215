"""An optional LLM judge of groundedness through any OpenAI-compatible chat endpoint.

One request per answer: the cited sources and the numbered answer sentences go in, a JSON list
of per-sentence verdicts comes out. The judge's score is the share of sentences it calls
supported. Anything unparsable is reported as a judge error, never guessed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

import httpx
import msgspec
import regex

SYSTEM = (
    "You check whether an answer is grounded in its sources. For each numbered answer "
    "sentence, decide whether the sources fully support it (a sentence that says the sources "
    "do not answer the question counts as supported when that is true). Reply with JSON only: "
    '{"verdicts": [{"sentence": 1, "supported": true}, ...]} with one entry per sentence.'
)
MAX_SOURCE_CHARS = 4000
_JSON = regex.compile(r"\{.*\}", regex.DOTALL)


class JudgeError(Exception):
    pass


class Verdicts(msgspec.Struct):
    supported: list[bool]

    @property
    def score(self) -> float:
        return sum(self.supported) / len(self.supported) if self.supported else 1.0


def build_messages(
    question: str, sentences: Sequence[str], sources: Mapping[str, str]
) -> list[dict[str, str]]:
    blocks = "\n\n".join(f"[{sid}] {text[:MAX_SOURCE_CHARS]}" for sid, text in sources.items())
    numbered = "\n".join(f"{i}. {s}" for i, s in enumerate(sentences, start=1))
    user = (
        f"Question: {question}\n\nSources:\n{blocks or '(none)'}\n\nAnswer sentences:\n{numbered}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def parse_verdicts(content: str, n: int) -> Verdicts:
    """Verdicts from the judge's reply; every sentence must get exactly one boolean."""
    match = _JSON.search(content)
    if match is None:
        raise JudgeError("the judge's reply holds no JSON object")
    try:
        data = json.loads(match.group(0))
        rows = data["verdicts"]
        got = {int(r["sentence"]): r["supported"] for r in rows}
    except (ValueError, KeyError, TypeError) as exc:
        raise JudgeError(f"the judge's reply is not the verdict JSON: {exc}") from exc
    if sorted(got) != list(range(1, n + 1)) or not all(isinstance(v, bool) for v in got.values()):
        raise JudgeError(f"the judge gave verdicts for {sorted(got)}, expected 1..{n}")
    return Verdicts([got[i] for i in range(1, n + 1)])


class Judge:
    """Calls `{url}/chat/completions` (url as an OpenAI `base_url`, e.g. http://host:8001/v1)."""

    def __init__(
        self, url: str, model: str, *, key: str = "", timeout: float = 120, concurrency: int = 4
    ) -> None:
        base = url.rstrip("/")
        self.endpoint = base if base.endswith("/chat/completions") else f"{base}/chat/completions"
        self.model = model
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._client = httpx.AsyncClient(
            timeout=timeout,
            headers=headers,
            limits=httpx.Limits(max_connections=max(1, concurrency)),
        )

    @property
    def name(self) -> str:
        return f"{self.model} @ {self.endpoint}"

    async def judge(
        self, question: str, sentences: Sequence[str], sources: Mapping[str, str]
    ) -> Verdicts:
        if not sentences:
            return Verdicts([])
        body = {
            "model": self.model,
            "messages": build_messages(question, sentences, sources),
            "temperature": 0,
            "max_tokens": 40 + 16 * len(sentences),
        }
        try:
            resp = await self._client.post(self.endpoint, json=body)
        except httpx.HTTPError as exc:
            raise JudgeError(f"judge unreachable: {type(exc).__name__}") from exc
        if resp.status_code != 200:
            raise JudgeError(f"judge answered HTTP {resp.status_code}")
        try:
            content = str(resp.json()["choices"][0]["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise JudgeError("judge reply is not an OpenAI chat completion") from exc
        return parse_verdicts(content, len(sentences))

    async def close(self) -> None:
        await self._client.aclose()
