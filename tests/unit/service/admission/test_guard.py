"""Admission's client checks: the failed-authentication budget per address and the per-key and
per-tenant concurrency caps (service/admission/guard.py)."""

from __future__ import annotations

import pytest

from service.admission.guard import ClientGuard, Concurrency, FailedAuth
from service.cache.stats import Stats
from service.config import AdmissionSettings
from service.errors import RateLimited
from service.identity import Principal

pytestmark = pytest.mark.unit


def who(tenant: str, key: str) -> Principal:
    return Principal(tenant_id=tenant, user_id="u", groups=(), scopes=("query",), key_id=key)


def test_an_address_over_its_failure_budget_is_refused_until_the_window_ends() -> None:
    failures = FailedAuth(limit=3, window_s=60)
    for _ in range(3):
        assert failures.retry_after("10.0.0.1") is None
        failures.failed("10.0.0.1")
    wait = failures.retry_after("10.0.0.1")
    assert wait is not None and 59 < wait <= 60
    assert failures.retry_after("10.0.0.2") is None  # other addresses are not affected
    shared = FailedAuth(limit=3, window_s=60)  # a NAT: mostly good clients, a few failures
    for _ in range(5):
        shared.succeeded("10.0.0.3")
    for _ in range(4):
        shared.failed("10.0.0.3")
    assert shared.retry_after("10.0.0.3") is None
    for _ in range(2):
        shared.failed("10.0.0.3")
    assert shared.retry_after("10.0.0.3") is not None  # now mostly failing
    expired = FailedAuth(limit=1, window_s=0.0)
    expired.failed("10.0.0.1")
    assert expired.retry_after("10.0.0.1") is None


def test_keys_in_flight_count_against_the_budget_once_each() -> None:
    guard = ClientGuard(AdmissionSettings(auth_failures_per_ip=2), Stats())
    with guard.authenticating("a", b"k1") as first, guard.authenticating("a", b"k1"):
        assert first(b"anything")  # one distinct key pending: under the budget
        with guard.authenticating("a", b"k2"), guard.authenticating("a", b"k3") as third:
            assert not third(b"unknown")  # two distinct keys pending: only known-good ones
            assert not third(b"k9")
    guard.auth_succeeded("b", b"good")
    guard.auth_failed("a")
    guard.auth_failed("a")
    with guard.authenticating("a", b"x") as blocked:
        assert not blocked(b"x")
        assert blocked(b"good")  # valid recently: still looked up
    assert guard.failures.pending == {}


def test_concurrency_caps_per_key_then_per_tenant_and_release() -> None:
    caps = Concurrency(key_max=2, tenant_max=3, retry_after_s=1.0)
    with caps.hold(who("t", "k1")), caps.hold(who("t", "k1")):
        with pytest.raises(RateLimited) as key_full, caps.hold(who("t", "k1")):
            pass
        assert key_full.value.code == "concurrency_limited" and key_full.value.status == 429
        with caps.hold(who("t", "k2")):
            with pytest.raises(RateLimited), caps.hold(who("t", "k3")):
                pass
            with caps.hold(who("other", "k4")):  # another tenant is not affected
                pass
    assert caps.keys == {} and caps.tenants == {}
