"""What admission checks about the client before it may hold anything: failed authentications
per client address, and requests in progress per key and per tenant.

A slow or hostile client must not hold what others need. So a request is authenticated and its
whole body read (under `server.body_timeout_ms`) before it may take an admission slot; while it
does so it counts against its key's and tenant's concurrency caps (429 `concurrency_limited`
beyond them), and a client address that keeps failing authentication is refused without a key
lookup (429 `auth_failures`), so a flood of invalid keys costs a dictionary lookup each.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from service.cache.stats import Stats
from service.config import AdmissionSettings
from service.errors import RateLimited
from service.identity import Principal

_MAX_ADDRESSES = 100_000
"""Failure windows kept at once (an address flood cannot grow memory without bound)."""


class FailedAuth:
    """Failed (and successful) authentications per client address, in fixed windows. An address
    is over budget once it failed `limit` times in the window *and* more often than it
    succeeded, so an address shared by many good clients (a NAT, a proxy) is not locked out by
    the few failures among them. Authentications still in progress count as failures until they
    end (each distinct key once), so a burst of concurrent bad keys cannot all slip under the
    budget before the first one fails."""

    def __init__(self, limit: int, window_s: float) -> None:
        self.limit = limit
        self.window_s = window_s
        self._windows: dict[str, tuple[float, int, int]] = {}
        self.pending: dict[str, dict[bytes, int]] = {}

    def _window(self, address: str, now: float) -> tuple[float, int, int]:
        start, failed, succeeded = self._windows.get(address, (now, 0, 0))
        if now - start >= self.window_s:
            return now, 0, 0
        return start, failed, succeeded

    def retry_after(self, address: str) -> float | None:
        """Seconds until `address` may try unknown keys again, or None when it may now."""
        now = time.monotonic()
        start, failed, succeeded = self._window(address, now)
        failing = failed + len(self.pending.get(address, ()))
        if failing < self.limit or failing <= succeeded:
            return None
        return max(0.0, start + self.window_s - now)

    def failed(self, address: str) -> None:
        self._count(address, failed=1)

    def succeeded(self, address: str) -> None:
        self._count(address, succeeded=1)

    def _count(self, address: str, *, failed: int = 0, succeeded: int = 0) -> None:
        now = time.monotonic()
        start, f, s = self._window(address, now)
        if len(self._windows) >= _MAX_ADDRESSES and address not in self._windows:
            self._windows = {a: w for a, w in self._windows.items() if now - w[0] < self.window_s}
            if len(self._windows) >= _MAX_ADDRESSES:
                self._windows.clear()
        self._windows[address] = (start, f + failed, s + succeeded)


class Concurrency:
    """Requests in progress per key and per tenant, each capped."""

    def __init__(self, key_max: int, tenant_max: int, retry_after_s: float) -> None:
        self.key_max = key_max
        self.tenant_max = tenant_max
        self.retry_after_s = retry_after_s
        self.keys: dict[str, int] = {}
        self.tenants: dict[str, int] = {}

    @contextmanager
    def hold(self, principal: Principal) -> Iterator[None]:
        key = principal.key_id or f"user:{principal.user_id}"
        tenant = principal.tenant_id
        if self.keys.get(key, 0) >= self.key_max:
            raise self._refusal(f"this key already has {self.key_max} requests in progress")
        if self.tenants.get(tenant, 0) >= self.tenant_max:
            raise self._refusal(f"this tenant already has {self.tenant_max} requests in progress")
        self.keys[key] = self.keys.get(key, 0) + 1
        self.tenants[tenant] = self.tenants.get(tenant, 0) + 1
        try:
            yield
        finally:
            _decrement(self.keys, key)
            _decrement(self.tenants, tenant)

    def _refusal(self, message: str) -> RateLimited:
        return RateLimited(message, retry_after=self.retry_after_s, code="concurrency_limited")


def _decrement(counts: dict[Any, int], name: Any) -> None:
    left = counts[name] - 1
    if left:
        counts[name] = left
    else:
        del counts[name]


class RecentlyValid:
    """Digests of keys that authenticated recently: an address over its failure budget (a NAT
    shared with an attacker) still gets these looked up, and nothing else."""

    def __init__(self, ttl_s: float = 600.0, max_keys: int = 100_000) -> None:
        self.ttl_s = ttl_s
        self.max_keys = max_keys
        self._seen: dict[bytes, float] = {}

    def add(self, digest: bytes) -> None:
        if len(self._seen) >= self.max_keys and digest not in self._seen:
            self._seen.clear()
        self._seen[digest] = time.monotonic() + self.ttl_s

    def __contains__(self, digest: object) -> bool:
        until = self._seen.get(digest) if isinstance(digest, bytes) else None
        return until is not None and until > time.monotonic()


class ClientGuard:
    def __init__(self, settings: AdmissionSettings, stats: Stats) -> None:
        self.failures = FailedAuth(settings.auth_failures_per_ip, settings.auth_failure_window_s)
        self.recently_valid = RecentlyValid()
        self.concurrency = Concurrency(
            settings.key_max_concurrent, settings.tenant_max_concurrent, settings.retry_after_s
        )
        self.stats = stats
        stats.gauge("admission_keys_in_progress", lambda: float(len(self.concurrency.keys)))

    @contextmanager
    def authenticating(self, address: str, digest: bytes) -> Iterator[Callable[[bytes], bool]]:
        """Around one authentication of the key `digest` from `address`: yields which digests
        may cost a lookup (any, unless the address is over its failed-authentication budget;
        then only keys that were valid recently), and counts the key as pending meanwhile."""
        allowed = (
            _any_key
            if self.failures.retry_after(address) is None
            else self.recently_valid.__contains__
        )
        pending = self.failures.pending.setdefault(address, {})
        pending[digest] = pending.get(digest, 0) + 1
        try:
            yield allowed
        finally:
            _decrement(pending, digest)
            if not pending:
                self.failures.pending.pop(address, None)

    def auth_succeeded(self, address: str, digest: bytes) -> None:
        self.recently_valid.add(digest)
        self.failures.succeeded(address)

    def auth_failed(self, address: str) -> None:
        self.stats.inc("auth_failures")
        self.failures.failed(address)


def _any_key(digest: bytes) -> bool:
    return True
