"""Property-based fuzzing of every operation in Ragline's own OpenAPI schema (Schemathesis):
valid and invalid requests generated from `/schema/openapi.json`, sent over a real socket with a
valid key. Zero 5xx, and every error carries a stable code: problem+json on the native routes,
OpenAI's error envelope on the OpenAI-compatible ones (issue #13 item 4).

Bounded and deterministic: a fixed number of examples per operation and generation mode, with
Hypothesis derandomized (the same cases every run), and no example database.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode

from tests.helpers import make_key

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

EXAMPLES = 25
"""Per operation and per generation mode (positive, negative)."""
SKIP = re.compile(r"^/(schema|ui|static)(/|$)")
"""The schema and the chat page's files: static, not API operations."""
CODE = re.compile(r"^[a-z][a-z0-9_]*$")
OPENAI = re.compile(r"^/v1/(chat/completions|models)(/|$)")
"""The OpenAI-compatible routes: their errors are OpenAI's envelope, not problem+json."""


def is_openai_path(path: str) -> bool:
    return OPENAI.match(path) is not None


def violation(method: str, path: str, resp: schemathesis.Response) -> str | None:
    """What is wrong with one response, or None."""
    status = resp.status_code
    if status >= 500:
        return f"{status} {resp.text[:200]}"
    if status < 400:
        return None
    ctype = (resp.headers.get("content-type") or [""])[0]
    try:
        body: Any = resp.json()
    except ValueError:
        return f"{status} error is not JSON: {resp.text[:200]}"
    if is_openai_path(path):
        err = body.get("error") if isinstance(body, dict) else None
        if not ctype.startswith("application/json") or not isinstance(err, dict):
            return f"{status} not OpenAI's error envelope: {ctype} {resp.text[:200]}"
        code, message = err.get("code"), err.get("message")
    else:
        if not ctype.startswith("application/problem+json") or not isinstance(body, dict):
            return f"{status} not problem+json: {ctype} {resp.text[:200]}"
        code, message = body.get("code"), body.get("detail")
        if body.get("status") != status:
            return f"{status} problem says status {body.get('status')}"
    if not isinstance(code, str) or not CODE.match(code) or not message:
        return f"{status} no stable code: {resp.text[:200]}"
    return None


def last_turn_is_users(case: Any) -> Any:
    """The schema cannot say that a chat's last message must be the user's and hold some text
    (any `role` and an empty list are accepted): make it so, or whether a positive chat case
    gets past validation at all would be left to chance (it once got none of 25)."""
    body = case.body
    if isinstance(body, dict) and isinstance(body.get("messages"), list):
        messages = body["messages"]
        if not messages or not isinstance(messages[-1], dict):
            messages.append({"role": "user", "content": "How do I enable CORS?"})
        last = messages[-1]
        last["role"] = "user"
        content = last.get("content")
        if not (isinstance(content, str) and content.strip()):
            last["content"] = "How do I enable CORS?"
    return case


class Fuzzer:
    def __init__(self, base_url: str, key: str) -> None:
        self.base_url = base_url
        self.headers = {"Authorization": f"Bearer {key}"}
        self.session = requests.Session()
        self.sent: dict[str, int] = {}
        """Requests sent per operation."""
        self.problems: list[str] = []
        self.statuses: dict[str, dict[int, int]] = {}
        """Responses per operation and status: what the run actually reached."""

    def run(self) -> None:
        schema = schemathesis.openapi.from_url(f"{self.base_url}/schema/openapi.json")
        try:
            for result in schema.get_all_operations():
                op = result.ok()
                if not SKIP.match(op.path):
                    for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
                        self.operation(op, mode)
        finally:
            self.session.close()

    def operation(self, op: Any, mode: GenerationMode) -> None:
        name = f"{op.method.upper()} {op.path}"
        self.sent.setdefault(name, 0)

        strategy = op.as_strategy(generation_mode=mode)
        if mode is GenerationMode.POSITIVE and is_openai_path(op.path) and op.method == "post":
            strategy = strategy.map(last_turn_is_users)

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES,
            derandomize=True,
            database=None,
            deadline=None,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def check(case: Any) -> None:
            resp = case.call(
                base_url=self.base_url, session=self.session, headers=self.headers, timeout=30
            )
            self.sent[name] += 1
            seen = self.statuses.setdefault(name, {})
            seen[resp.status_code] = seen.get(resp.status_code, 0) + 1
            bad = violation(case.method, case.formatted_path, resp)
            if bad is not None and len(self.problems) < 50:
                self.problems.append(f"{name} ({mode.value}): {bad}\n  {case.as_curl_command()}")

        check()


async def test_every_operation_survives_fuzzing(
    runtime: Any, server: str, http: httpx.AsyncClient
) -> None:
    key = await make_key(runtime, "fuzzed", "fuzzer", ["eng"], scopes=("query", "index"))
    fuzzer = Fuzzer(server, key)
    await asyncio.to_thread(fuzzer.run)
    sent = fuzzer.sent
    # valid requests reached the answer, search and chat paths, not only their validation
    for name in ("POST /v1/answer", "POST /v1/search", "POST /v1/chat/completions"):
        assert fuzzer.statuses[name].get(200, 0) > 0, (name, fuzzer.statuses[name])
    assert not fuzzer.problems, "\n".join(fuzzer.problems)
    # every API operation of the schema was exercised, the main ones among them
    assert {"POST /v1/answer", "POST /v1/search", "POST /v1/chat/completions"} <= set(sent)
    assert all(n >= EXAMPLES for n in sent.values()), sent
    resp = await http.get("/healthz")
    assert resp.status_code == 200
