"""Per-tenant token buckets: requests per second and generated tokens per minute, per request
class. In Redis (one atomic Lua script per decision, on Redis's clock) when it is configured and
up, so every replica shares them; in-process otherwise — then each replica enforces the limits
on its own, which is the documented degraded mode.

A request needs one request token and a positive token balance; the tokens it generates are
charged after it finishes (the balance may go negative, delaying the next requests).
"""

from __future__ import annotations

import math
import time

import msgspec

from service.admission.gate import BATCH
from service.cache.redis_link import RedisLink, RedisUnavailable
from service.cache.stats import Stats
from service.config import LimitsSettings, TenantLimits
from service.errors import RateLimited

_LEVEL = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local function level(key, rate, cap)
  local v = redis.call('HMGET', key, 'l', 'ts')
  local l, ts = tonumber(v[1]), tonumber(v[2])
  if l == nil then return cap end
  return math.min(cap, l + math.max(0, now - ts) * rate)
end
"""

ADMIT = (
    _LEVEL
    + """
local rr, rc, tr, tc = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local wait, rl = 0, 0
if rr > 0 then
  rl = level(KEYS[1], rr, rc)
  if rl < 1 then wait = math.max(wait, (1 - rl) / rr) end
end
if tr > 0 then
  local tl = level(KEYS[2], tr, tc)
  if tl <= 0 then wait = math.max(wait, (1 - tl) / tr) end
end
if wait > 0 then return {0, math.ceil(wait * 1000)} end
if rr > 0 then
  redis.call('HSET', KEYS[1], 'l', tostring(rl - 1), 'ts', tostring(now))
  redis.call('PEXPIRE', KEYS[1], math.ceil(rc / rr * 1000) + 1000)
end
return {1, 0}
"""
)

CHARGE = (
    _LEVEL
    + """
local rate, cap, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local l = math.max(-cap, level(KEYS[1], rate, cap) - cost)
redis.call('HSET', KEYS[1], 'l', tostring(l), 'ts', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil((cap - l) / rate * 1000) + 1000)
return 1
"""
)


MAX_EMPTY_KEYS = 10_000
"""Buckets remembered as empty before the expired ones are swept."""


class Bucket(msgspec.Struct, frozen=True):
    rate: float  # per second; <= 0 means unlimited
    capacity: float


def buckets_for(limits: TenantLimits, cls: str) -> tuple[Bucket, Bucket]:
    """(requests, generated tokens) buckets of a class."""
    if cls == BATCH:
        return (
            Bucket(limits.batch_requests_per_second, max(1.0, limits.batch_burst)),
            Bucket(limits.batch_tokens_per_minute / 60, limits.batch_tokens_per_minute),
        )
    return (
        Bucket(limits.requests_per_second, max(1.0, limits.burst)),
        Bucket(limits.tokens_per_minute / 60, limits.tokens_per_minute),
    )


class LocalBuckets:
    def __init__(self) -> None:
        self._state: dict[str, tuple[float, float]] = {}

    def _level(self, key: str, b: Bucket, now: float) -> float:
        state = self._state.get(key)
        if state is None:
            return b.capacity
        level, ts = state
        return min(b.capacity, level + max(0.0, now - ts) * b.rate)

    def admit(self, req_key: str, req: Bucket, tok_key: str, tok: Bucket) -> float:
        """0 if admitted (one request token taken), else seconds until it would be."""
        now = time.monotonic()
        wait, req_level = 0.0, 0.0
        if req.rate > 0:
            req_level = self._level(req_key, req, now)
            if req_level < 1:
                wait = max(wait, (1 - req_level) / req.rate)
        if tok.rate > 0:
            tok_level = self._level(tok_key, tok, now)
            if tok_level <= 0:
                wait = max(wait, (1 - tok_level) / tok.rate)
        if wait > 0:
            return wait
        if req.rate > 0:
            self._state[req_key] = (req_level - 1, now)
        return 0.0

    def charge(self, key: str, b: Bucket, cost: float) -> None:
        now = time.monotonic()
        self._state[key] = (max(-b.capacity, self._level(key, b, now) - cost), now)


class TenantLimiter:
    def __init__(self, settings: LimitsSettings, link: RedisLink | None, stats: Stats) -> None:
        self.settings = settings
        self.link = link
        self.stats = stats
        self.local = LocalBuckets()
        # bucket key -> monotonic time before which it cannot admit: while a tenant is over its
        # limit, its next requests get their 429 without a Redis round trip. Exact, not a guess:
        # a bucket refills at its fixed rate, and other replicas can only make it emptier.
        self._empty_until: dict[str, float] = {}
        if link is not None:
            self._admit = link.client.register_script(ADMIT)
            self._charge = link.client.register_script(CHARGE)

    def _keys(self, tenant: str, cls: str) -> tuple[str, str]:
        prefix = self.link.prefix if self.link is not None else ""
        return f"{prefix}rl:{tenant}:{cls}:req", f"{prefix}rl:{tenant}:{cls}:tok"

    def limits(self, tenant: str) -> TenantLimits:
        return self.settings.tenants.get(tenant, self.settings.default)

    async def admit(self, tenant: str, cls: str) -> None:
        """Take one request token of the tenant's class, or raise 429 with `Retry-After`."""
        if not self.settings.enabled:
            return
        req, tok = buckets_for(self.limits(tenant), cls)
        if req.rate <= 0 and tok.rate <= 0:
            return
        req_key, tok_key = self._keys(tenant, cls)
        now = time.monotonic()
        wait = self._empty_until.get(req_key, 0.0) - now
        if wait <= 0:
            shared = await self._admit_shared(req_key, req, tok_key, tok)
            wait = shared if shared is not None else self.local.admit(req_key, req, tok_key, tok)
            if wait > 0:
                if len(self._empty_until) >= MAX_EMPTY_KEYS:
                    self._empty_until = {k: t for k, t in self._empty_until.items() if t > now}
                self._empty_until[req_key] = now + wait
        if wait > 0:
            self.stats.inc("rate_limited", cls=cls)
            raise RateLimited(
                f"tenant over its {cls} limit; retry in {math.ceil(wait)} s", retry_after=wait
            )

    async def _admit_shared(
        self, req_key: str, req: Bucket, tok_key: str, tok: Bucket
    ) -> float | None:
        if self.link is None or not self.link.up:
            return None
        args = [req.rate, req.capacity, tok.rate, tok.capacity]
        try:
            allowed, wait_ms = await self.link.call(
                "limit_admit",
                lambda r: self._admit(keys=[req_key, tok_key], args=args, client=r),
            )
        except RedisUnavailable:
            return None
        return 0.0 if int(allowed) == 1 else int(wait_ms) / 1000

    async def charge(self, tenant: str, cls: str, tokens: int) -> None:
        """Charge generated tokens to the tenant's class (after the answer is done)."""
        if not self.settings.enabled or tokens <= 0:
            return
        _, tok = buckets_for(self.limits(tenant), cls)
        if tok.rate <= 0:
            return
        _, tok_key = self._keys(tenant, cls)
        if self.link is not None and self.link.up:
            args = [tok.rate, tok.capacity, tokens]
            try:
                await self.link.call(
                    "limit_charge", lambda r: self._charge(keys=[tok_key], args=args, client=r)
                )
                return
            except RedisUnavailable:
                pass
        self.local.charge(tok_key, tok, tokens)
