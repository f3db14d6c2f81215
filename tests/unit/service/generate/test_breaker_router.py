from __future__ import annotations

from collections.abc import Sequence

import pytest

from service.generate.breaker import CircuitBreaker, State
from service.generate.extractive import ExtractiveGenerator
from service.generate.protocol import GenerationRecord, Generator, Passage, TokenStream
from service.generate.router import GeneratorRouter

pytestmark = pytest.mark.unit


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_breaker_opens_after_consecutive_failures_only() -> None:
    b = CircuitBreaker("g", failures=3, reset_s=5, clock=Clock())
    b.failure()
    b.failure()
    b.success()  # a success in between resets the count
    b.failure()
    b.failure()
    assert b.state is State.CLOSED and b.allow()
    b.failure()
    assert b.state is State.OPEN and not b.allow()
    assert b.opened_total == 1


def test_breaker_half_open_lets_one_probe_and_closes_on_success() -> None:
    clock = Clock()
    b = CircuitBreaker("g", failures=1, reset_s=5, clock=clock)
    b.failure()
    assert b.state is State.OPEN
    clock.now += 4.9
    assert not b.allow()  # still inside the reset period
    clock.now += 0.2
    assert b.allow()  # the probe
    assert b.state is State.HALF_OPEN
    assert not b.allow()  # only one probe at a time
    b.success()
    assert b.state is State.CLOSED and b.allow() and b.opened_total == 1


def test_breaker_failed_probe_opens_again_and_released_probe_frees_slot() -> None:
    clock = Clock()
    b = CircuitBreaker("g", failures=2, reset_s=1, clock=clock)
    b.failure()
    b.failure()
    clock.now += 1.5
    assert b.allow()
    b.failure()  # the probe failed: open again at once, for another reset period
    assert b.state is State.OPEN and not b.allow()
    clock.now += 1.5
    assert b.allow()
    b.release()  # the probe's client left: no verdict, the next request may probe
    assert b.allow()


class Named:
    """A model generator that is never asked to stream here, with its own upstream breakers."""

    deterministic = False
    instant = False

    def __init__(self, name: str, *upstreams: str) -> None:
        self.name = name
        self.upstreams = [CircuitBreaker(f"{name}:{u}") for u in upstreams]
        self.closed = False

    def stream(
        self,
        question: str,
        passages: Sequence[Passage],
        *,
        max_tokens: int,
        context: str = "",
        record: GenerationRecord | None = None,
    ) -> TokenStream:
        raise NotImplementedError

    def breakers(self) -> Sequence[CircuitBreaker]:
        return self.upstreams

    async def aclose(self) -> None:
        self.closed = True


def test_router_picks_tenant_then_class_then_default_chain() -> None:
    gens: dict[str, Generator] = {
        "extractive": ExtractiveGenerator(),
        "openai": Named("openai"),
        "local": Named("local"),
    }
    router = GeneratorRouter(
        gens,
        default=["openai", "extractive"],
        tenant_routes={"acme": ["local", "extractive", "extractive"]},
        class_routes={"chat": ["local", "openai", "extractive"]},
    )
    assert router.names("acme", "chat") == ["local", "extractive"]
    assert router.names("globex", "chat") == ["local", "openai", "extractive"]
    assert router.names("globex", "answer") == ["openai", "extractive"]
    assert router.version("globex") == "openai>extractive"
    assert [g.name for g, _ in router.chain("globex")] == ["openai", "extractive"]
    assert router.breaker_states() == {
        "extractive": "closed",
        "openai": "closed",
        "local": "closed",
    }


async def test_router_lists_every_breaker_and_closes_every_generator() -> None:
    remote = Named("openai", "http://a", "http://b")
    router = GeneratorRouter.of(remote, ExtractiveGenerator(), ExtractiveGenerator())
    assert router.names() == ["openai", "extractive"]
    assert [b.name for b in router.breakers()] == [
        "openai",
        "extractive",
        "openai:http://a",
        "openai:http://b",
    ]
    remote.upstreams[1].failure()
    remote.upstreams[1].failure()
    remote.upstreams[1].failure()
    assert router.breaker_states()["openai:http://b"] == "open"
    assert router.breaker_states()["openai"] == "closed"
    await router.aclose()
    assert remote.closed


def test_router_refuses_unknown_generator_names() -> None:
    with pytest.raises(ValueError, match="unknown"):
        GeneratorRouter({"extractive": ExtractiveGenerator()}, default=["openai", "extractive"])
