"""Walk a generator chain under the first-token deadline; fall back when a generator is late,
failing, busy or its circuit is open. Every such step is named in `budget.degraded`.

A generator that is not `instant` must produce its first piece within
`budget.generate_first_token_ms`, capped by what is left of the TTFT budget; the extractive
generator is instant and always runs to the end, so a chain ending in it always answers.
After the first piece there is no going back: a later failure is an error for the caller.
Every failure is counted in `ragline_generator_errors_total{model, kind}` (kind: `timeout`,
`busy`, `error`, `mid_answer`); all but `busy` also count against the generator's breaker.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

from service import telemetry
from service.errors import DeadlineExceeded, RaglineError
from service.generate.breaker import CircuitBreaker
from service.generate.protocol import (
    GenerationRecord,
    Generator,
    GeneratorBusy,
    GeneratorFailed,
    Passage,
)
from service.pipeline.budget import Budget


async def generate(
    chain: Sequence[tuple[Generator, CircuitBreaker]],
    question: str,
    passages: Sequence[Passage],
    *,
    max_tokens: int,
    budget: Budget,
    first_token_ms: float,
    record: GenerationRecord,
    context: str = "",
) -> AsyncIterator[str]:
    t0 = time.perf_counter()
    timed_out = False
    for i, (gen, breaker) in enumerate(chain):
        last = i == len(chain) - 1
        if not last and not breaker.allow():
            budget.degrade(f"generator_circuit_open_{gen.name}")
            continue
        attempt = GenerationRecord()
        it = gen.stream(question, passages, max_tokens=max_tokens, context=context, record=attempt)
        try:
            if gen.instant:  # no model: no deadline, still a span
                async with budget.timed("generate_first_token", generator=gen.name):
                    first = await anext(it, None)
            else:
                async with budget.stage("generate_first_token", first_token_ms, generator=gen.name):
                    first = await anext(it, None)
        except TimeoutError:
            await it.aclose()
            breaker.failure()
            telemetry.generator_error(gen.name, "timeout")
            budget.degrade(f"generator_timeout_{gen.name}")
            timed_out = True
            continue
        except GeneratorBusy:
            await it.aclose()
            breaker.release()
            telemetry.generator_error(gen.name, "busy")
            budget.degrade(f"generator_busy_{gen.name}")
            continue
        except asyncio.CancelledError:
            await it.aclose()
            breaker.release()
            raise
        except Exception:
            await it.aclose()
            breaker.failure()
            telemetry.generator_error(gen.name, "error")
            budget.degrade(f"generator_error_{gen.name}")
            continue
        breaker.success()
        budget.timings_ms["generate_first_token"] = round((time.perf_counter() - t0) * 1000, 3)
        async with budget.timed("generate_total"):
            try:
                if first is not None:
                    yield first
                async for piece in it:
                    yield piece
            except RaglineError:
                breaker.failure()
                telemetry.generator_error(gen.name, "mid_answer")
                raise
            except Exception as exc:
                breaker.failure()
                telemetry.generator_error(gen.name, "mid_answer")
                raise GeneratorFailed(f"{gen.name} failed mid-answer") from exc
            finally:
                await it.aclose()
                record.generator = attempt.generator or gen.name
                record.prompt_tokens = attempt.prompt_tokens
                record.completion_tokens = attempt.completion_tokens
                record.finish_reason = attempt.finish_reason
        return
    if timed_out:
        raise DeadlineExceeded("no generator produced a first token within the budget")
    raise GeneratorFailed("no generator could answer")
