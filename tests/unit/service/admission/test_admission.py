"""The admission gate and local token buckets, without HTTP."""

from __future__ import annotations

import asyncio

import pytest

from service.admission.buckets import Bucket, LocalBuckets, TenantLimiter, buckets_for
from service.admission.gate import BATCH, INTERACTIVE, AdmissionGate, slot_counts, usable_cores
from service.cache.stats import Stats
from service.config import (
    AdmissionSettings,
    ConfigError,
    LimitsSettings,
    TenantLimits,
    load_settings,
)
from service.errors import Overloaded, RateLimited

pytestmark = pytest.mark.unit


def gate(**kw: float) -> AdmissionGate:
    base = {
        "max_in_flight": 2,
        "max_queue": 1,
        "queue_target_ms": 100.0,
        "max_queue_wait_ms": 200.0,
        "batch_max_in_flight": 1,
        "batch_max_queue": 5,
        "batch_queue_target_ms": 500.0,
        "batch_max_queue_wait_ms": 1000.0,
    }
    base.update(kw)
    return AdmissionGate(AdmissionSettings(**base), Stats(), cpu_bound=True)  # type: ignore[arg-type]


async def test_full_queue_is_refused_at_once() -> None:
    g = gate()
    await g.acquire(INTERACTIVE)
    await g.acquire(INTERACTIVE)
    waiter = asyncio.create_task(g.acquire(INTERACTIVE))
    await asyncio.sleep(0)
    with pytest.raises(Overloaded) as err:
        await g.acquire(INTERACTIVE)
    assert err.value.status == 503 and err.value.retry_after
    g.release(INTERACTIVE)
    assert await asyncio.wait_for(waiter, 1) >= 0  # the queued one got the freed slot
    assert g.total_in_flight == 2


async def test_queue_wait_is_bounded() -> None:
    g = gate(queue_target_ms=30.0, max_queue_wait_ms=30.0)
    await g.acquire(INTERACTIVE)
    await g.acquire(INTERACTIVE)
    with pytest.raises(Overloaded):
        await g.acquire(INTERACTIVE)
    assert len(g.queues[INTERACTIVE]) == 0 and g.total_in_flight == 2


async def test_batch_never_takes_the_interactive_slots() -> None:
    g = gate(max_in_flight=3)
    await g.acquire(BATCH)
    batch_waiter = asyncio.create_task(g.acquire(BATCH))
    await asyncio.sleep(0)
    assert not batch_waiter.done()  # batch may hold one slot only
    await g.acquire(INTERACTIVE)
    await g.acquire(INTERACTIVE)  # interactive still gets the rest
    batch_waiter.cancel()


async def test_interactive_waiters_go_before_batch_waiters() -> None:
    g = gate(max_in_flight=2, batch_max_in_flight=1, max_queue=5)
    await g.acquire(INTERACTIVE)
    await g.acquire(INTERACTIVE)
    order: list[str] = []

    async def wait(cls: str) -> None:
        await g.acquire(cls)
        order.append(cls)

    b = asyncio.create_task(wait(BATCH))
    await asyncio.sleep(0)
    i = asyncio.create_task(wait(INTERACTIVE))
    await asyncio.sleep(0)
    g.release(INTERACTIVE)
    await asyncio.sleep(0)
    assert order == [INTERACTIVE]  # batch came first but waits
    g.release(INTERACTIVE)
    await asyncio.wait_for(b, 1)
    await i
    assert order == [INTERACTIVE, BATCH]


async def test_cancelled_waiter_frees_its_place() -> None:
    g = gate()
    await g.acquire(INTERACTIVE)
    await g.acquire(INTERACTIVE)
    w = asyncio.create_task(g.acquire(INTERACTIVE))
    await asyncio.sleep(0)
    w.cancel()
    with pytest.raises(asyncio.CancelledError):
        await w
    g.release(INTERACTIVE)
    g.release(INTERACTIVE)
    assert g.total_in_flight == 0


def test_local_bucket_limits_requests_and_tokens() -> None:
    b = LocalBuckets()
    req, tok = Bucket(1.0, 2.0), Bucket(10.0, 100.0)
    assert b.admit("r", req, "t", tok) == 0
    assert b.admit("r", req, "t", tok) == 0
    wait = b.admit("r", req, "t", tok)
    assert 0 < wait <= 1.0
    b2 = LocalBuckets()
    b2.charge("t", tok, 150)  # spent more than the balance: next request must wait
    assert b2.admit("r", req, "t", tok) > 0


def test_batch_and_interactive_have_their_own_buckets() -> None:
    limits = TenantLimits(requests_per_second=5, batch_requests_per_second=1, batch_burst=1)
    (ri, _), (rb, _) = buckets_for(limits, INTERACTIVE), buckets_for(limits, BATCH)
    assert ri.rate == 5 and rb.rate == 1 and rb.capacity == 1


async def test_a_queue_too_long_to_clear_in_time_refuses_at_once() -> None:
    g = gate(max_in_flight=2, max_queue=50, queue_target_ms=50.0, max_queue_wait_ms=100.0)
    g.avg_hold_s = 0.08  # measured: a request holds its slot ~80 ms
    await g.acquire(INTERACTIVE)
    await g.acquire(INTERACTIVE)
    waiter = asyncio.create_task(g.acquire(INTERACTIVE))  # ~40 ms expected: it may queue
    await asyncio.sleep(0)
    assert len(g.queues[INTERACTIVE]) == 1
    with pytest.raises(Overloaded):
        await g.acquire(INTERACTIVE)  # ~80 ms expected: over the 50 ms target
    # refused before queueing, not after waiting out the 100 ms
    assert g.stats.count("admission", outcome="rejected_predicted_wait") == 1
    assert len(g.queues[INTERACTIVE]) == 1
    g.release(INTERACTIVE)
    await asyncio.wait_for(waiter, 1)


async def test_the_wait_estimate_learns_from_each_requests_own_slot_time() -> None:
    g = gate(max_in_flight=2)
    async with g.slot(INTERACTIVE):
        await asyncio.sleep(0.05)
    first = g.avg_hold_s
    assert 0.05 <= first < 0.5
    async with g.slot(INTERACTIVE):
        pass  # a quick one pulls the average down, by its weight only
    assert 0.85 * first <= g.avg_hold_s < first
    assert g.total_in_flight == 0


async def test_a_tenant_over_its_limit_is_refused_without_asking_the_buckets_again() -> None:
    limits = LimitsSettings(
        default=TenantLimits(requests_per_second=0, tokens_per_minute=0),
        tenants={"capped": TenantLimits(requests_per_second=2, burst=1, tokens_per_minute=0)},
    )
    limiter = TenantLimiter(limits, None, Stats())
    asked: list[str] = []
    admit = limiter.local.admit

    def counting(*args: object) -> float:
        asked.append("capped")
        return admit(*args)  # type: ignore[arg-type]

    limiter.local.admit = counting  # type: ignore[method-assign]
    await limiter.admit("capped", INTERACTIVE)
    for _ in range(3):
        with pytest.raises(RateLimited) as err:
            await limiter.admit("capped", INTERACTIVE)
        assert 0 < err.value.retry_after <= 0.5
    assert len(asked) == 2  # the first refusal asked; the next two were answered from memory
    await limiter.admit("other", INTERACTIVE)  # unlimited tenant: untouched
    await asyncio.sleep(0.55)  # the bucket has refilled: asked again, and admitted
    await limiter.admit("capped", INTERACTIVE)
    assert len(asked) == 3


async def test_a_queued_request_is_served_past_the_target_and_refused_only_at_the_cap() -> None:
    g = gate(max_in_flight=2, max_queue=5, queue_target_ms=20.0, max_queue_wait_ms=300.0)
    await g.acquire(INTERACTIVE)
    await g.acquire(INTERACTIVE)
    waiter = asyncio.create_task(g.acquire(INTERACTIVE))  # nothing measured yet: it queues
    await asyncio.sleep(0.1)  # five times the target, well inside the cap
    assert not waiter.done()
    g.release(INTERACTIVE, held_s=0.1)
    assert await asyncio.wait_for(waiter, 1) >= 100  # served, with its wait in ms
    assert g.stats.count("admission", outcome="admitted_after_wait") == 1


def test_a_queue_target_above_its_hard_cap_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"admission\.queue_target_ms"):
        load_settings(
            environ={
                "RAGLINE_ADMISSION_QUEUE_TARGET_MS": "500",
                "RAGLINE_ADMISSION_MAX_QUEUE_WAIT_MS": "400",
            }
        )


def test_slots_are_sized_for_where_the_answer_is_generated() -> None:
    cores = usable_cores()
    assert slot_counts(AdmissionSettings(), cpu_bound=True) == (4 * cores, max(1, cores))
    assert slot_counts(AdmissionSettings(), cpu_bound=False) == (64, 16)
    assert slot_counts(AdmissionSettings(max_in_flight=10), cpu_bound=True) == (10, 2)
    with pytest.raises(ConfigError):
        slot_counts(AdmissionSettings(max_in_flight=3, batch_max_in_flight=3), cpu_bound=True)


async def test_batch_is_refused_at_once_while_interactive_requests_wait() -> None:
    g = gate(max_in_flight=2, batch_max_in_flight=1, max_queue=5)
    await g.acquire(INTERACTIVE)
    await g.acquire(INTERACTIVE)
    waiting = asyncio.create_task(g.acquire(INTERACTIVE))
    await asyncio.sleep(0)
    with pytest.raises(Overloaded) as err:
        await g.acquire(BATCH)  # no wait to predict: it would only queue behind interactive
    assert err.value.retry_after and not g.queues[BATCH]
    assert g.stats.count("admission", outcome="rejected_interactive_waiting") == 1
    g.release(INTERACTIVE)
    await asyncio.wait_for(waiting, 1)
