"""Which generators answer a request, in which order, and which of them are healthy.

A chain is a primary and its fallbacks, chosen per tenant (`generator.tenant_routes`), else per
operation (`generator.class_routes`: `answer`, `chat`), else the default
(`generator.backend` + `generator.fallbacks`). Each generator has a circuit breaker here (and
may have its own per upstream server); metrics read them all through `breakers()` at each scrape.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from service.config import Settings
from service.generate.breaker import CircuitBreaker
from service.generate.protocol import Generator


class GeneratorRouter:
    def __init__(
        self,
        generators: Mapping[str, Generator],
        *,
        default: Sequence[str],
        tenant_routes: Mapping[str, Sequence[str]] | None = None,
        class_routes: Mapping[str, Sequence[str]] | None = None,
        breaker_failures: int = 3,
        breaker_reset_s: float = 5.0,
    ) -> None:
        self.generators = dict(generators)
        self.default = _dedupe(default)
        self.tenant_routes = {t: _dedupe(c) for t, c in (tenant_routes or {}).items()}
        self.class_routes = {k: _dedupe(c) for k, c in (class_routes or {}).items()}
        for chain in [self.default, *self.tenant_routes.values(), *self.class_routes.values()]:
            missing = [name for name in chain if name not in self.generators]
            if missing:
                raise ValueError(f"generator route names unknown generators: {missing}")
        self.breakers_by_name = {
            name: CircuitBreaker(name, failures=breaker_failures, reset_s=breaker_reset_s)
            for name in self.generators
        }

    @classmethod
    def of(cls, *chain: Generator) -> GeneratorRouter:
        """One chain for everyone: these generators in this order (a later one of the same name
        as an earlier one is dropped)."""
        generators: dict[str, Generator] = {}
        for gen in chain:
            generators.setdefault(gen.name, gen)
        return cls(generators, default=list(generators))

    @classmethod
    def from_settings(
        cls, settings: Settings, generators: Mapping[str, Generator]
    ) -> GeneratorRouter:
        g = settings.generator
        return cls(
            generators,
            default=[g.backend, *g.fallbacks],
            tenant_routes=g.tenant_routes,
            class_routes=g.class_routes,
            breaker_failures=g.breaker_failures,
            breaker_reset_s=g.breaker_reset_ms / 1000,
        )

    def names(self, tenant_id: str = "", operation: str = "answer") -> list[str]:
        """The chain's generator names, primary first."""
        chain = self.tenant_routes.get(tenant_id) or self.class_routes.get(operation)
        return list(chain or self.default)

    def chain(
        self, tenant_id: str = "", operation: str = "answer"
    ) -> list[tuple[Generator, CircuitBreaker]]:
        return [
            (self.generators[n], self.breakers_by_name[n]) for n in self.names(tenant_id, operation)
        ]

    def version(self, tenant_id: str = "", operation: str = "answer") -> str:
        """The chain as a string, for cache keys (`openai>extractive`)."""
        return ">".join(self.names(tenant_id, operation))

    def breakers(self) -> list[CircuitBreaker]:
        """Every breaker: one per generator, then each generator's own (per upstream server)."""
        out = list(self.breakers_by_name.values())
        for gen in self.generators.values():
            out.extend(gen.breakers())
        return out

    def breaker_states(self) -> dict[str, str]:
        """`{name: closed|open|half_open}` for every breaker (see `breakers`)."""
        return {b.name: b.state.value for b in self.breakers()}

    async def aclose(self) -> None:
        for gen in self.generators.values():
            await gen.aclose()


def _dedupe(names: Sequence[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        if n not in out:
            out.append(n)
    return out
