"""`Idempotency-Key`: a retried request (same key, same principal, same body) within the window
gets the first answer replayed — never a second generation; the same key with another body is a
422 (`idempotency_key_reused`). A retry that arrives while the first is still running waits for
it (up to `cache.idempotency_wait_s`, then 409 `idempotency_in_progress`).

Records live in Redis when it is up (so every replica sees them) and in a local store always;
keys are scoped to the tenant and the principal's identities, so one principal's key never
collides with, nor reveals anything about, another's. A replay respects today's permissions:
the caller (`service.cache.answers`) serves a record only if the principal can still see every
source it shows, and otherwise answers afresh (`Claim.recompute`).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Literal

import msgspec

from service.cache.keys import Keys, canonical_json, digest
from service.cache.records import AnswerRecord
from service.cache.redis_link import RedisLink, RedisUnavailable, as_bytes
from service.cache.stats import Stats
from service.cache.store import L1Cache
from service.errors import ClientError, InvalidRequest
from service.identity import Principal, visibility_fingerprint

POLL_S = 0.05
MAX_KEY_CHARS = 255


class IdempotencyInProgress(ClientError):
    status = 409
    code = "idempotency_in_progress"
    title = "A request with this Idempotency-Key is still running"
    retry_after = 1.0


class IdemEntry(msgspec.Struct, kw_only=True):
    digest: str
    state: Literal["pending", "done"]
    record: AnswerRecord | None = None


_decoder = msgspec.json.Decoder(IdemEntry)


def request_digest(body: Any) -> str:
    """The body as the service understood it (canonical JSON), hashed."""
    return digest(canonical_json(body))


class Claim:
    """Either a finished answer to replay, or the right (and duty) to produce it."""

    def __init__(
        self, store: IdempotencyStore, key: str, digest_: str, record: AnswerRecord | None
    ) -> None:
        self.store = store
        self.key = key
        self.digest = digest_
        self.record = record
        self._settled = record is not None

    async def complete(self, record: AnswerRecord) -> None:
        if not self._settled:
            self._settled = True
            entry = IdemEntry(digest=self.digest, state="done", record=record)
            await self.store._write(self.key, entry, self.store.window_s)

    def recompute(self) -> Claim:
        """The recorded answer may no longer be served (a source it shows was deleted or
        hidden since): answer afresh, and record the new answer in its place."""
        self.store.stats.inc("idempotency", outcome="recomputed")
        return Claim(self.store, self.key, self.digest, None)

    async def release(self) -> None:
        """The first attempt failed or was abandoned: a retry may run again."""
        if not self._settled:
            self._settled = True
            await self.store._delete(self.key)


class IdempotencyStore:
    def __init__(
        self,
        link: RedisLink | None,
        keys: Keys,
        *,
        window_s: float,
        wait_s: float,
        stats: Stats,
        max_local: int = 50_000,
    ) -> None:
        self.link = link
        self.keys = keys
        self.window_s = window_s
        self.wait_s = wait_s
        self.pending_ttl_s = min(window_s, max(60.0, 2 * wait_s))
        self.stats = stats
        self.local = L1Cache(max_local, 256 * 1024 * 1024)
        self._changed: dict[str, asyncio.Event] = {}

    async def claim(self, principal: Principal, idem_key: str, body_digest: str) -> Claim:
        if not idem_key or len(idem_key) > MAX_KEY_CHARS:
            raise InvalidRequest(
                f"Idempotency-Key: 1 to {MAX_KEY_CHARS} characters", code="invalid_idempotency_key"
            )
        who = visibility_fingerprint(principal.tenant_id, principal.identities)
        key = self.keys.idempotency(principal.tenant_id, who, idem_key)
        loop = asyncio.get_running_loop()
        until = loop.time() + self.wait_s
        while True:
            entry = await self._read(key)
            if entry is None:
                mine = IdemEntry(digest=body_digest, state="pending")
                if await self._reserve(key, mine):
                    self.stats.inc("idempotency", outcome="first")
                    return Claim(self, key, body_digest, None)
                continue
            if entry.digest != body_digest:
                self.stats.inc("idempotency", outcome="reused_key")
                raise InvalidRequest(
                    "this Idempotency-Key was used with a different request body",
                    code="idempotency_key_reused",
                )
            if entry.state == "done" and entry.record is not None:
                self.stats.inc("idempotency", outcome="replayed")
                return Claim(self, key, body_digest, entry.record)
            if loop.time() >= until:
                raise IdempotencyInProgress("the first request with this key has not finished")
            changed = self._changed.setdefault(key, asyncio.Event())
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(POLL_S):
                    await changed.wait()

    def _notify(self, key: str) -> None:
        event = self._changed.pop(key, None)
        if event is not None:
            event.set()

    async def _read(self, key: str) -> IdemEntry | None:
        raw: bytes | None = None
        if self.link is not None and self.link.up:
            with contextlib.suppress(RedisUnavailable):
                raw = as_bytes(await self.link.call("idem_get", lambda r: r.get(key)))
        if raw is None:  # also what was recorded here while Redis was down
            raw = self.local.get(key)
        return _decoder.decode(raw) if raw is not None else None

    async def _reserve(self, key: str, entry: IdemEntry) -> bool:
        raw = msgspec.json.encode(entry)
        ttl = self.pending_ttl_s
        if self.link is not None and self.link.up:
            try:
                ok = await self.link.call(
                    "idem_reserve", lambda r: r.set(key, raw, nx=True, px=int(ttl * 1000))
                )
            except RedisUnavailable:
                ok = None
            if ok is not None:
                if ok:
                    self.local.set(key, raw, ttl)
                return bool(ok)
        if self.local.get(key) is not None:
            return False
        self.local.set(key, raw, ttl)
        return True

    async def _write(self, key: str, entry: IdemEntry, ttl_s: float) -> None:
        raw = msgspec.json.encode(entry)
        self.local.set(key, raw, ttl_s)
        if self.link is not None and self.link.up:
            with contextlib.suppress(RedisUnavailable):
                await self.link.call(
                    "idem_set", lambda r: r.set(key, raw, px=max(1, int(ttl_s * 1000)))
                )
        self._notify(key)

    async def _delete(self, key: str) -> None:
        self.local.delete(key)
        if self.link is not None and self.link.up:
            with contextlib.suppress(RedisUnavailable):
                await self.link.call("idem_del", lambda r: r.delete(key))
        self._notify(key)
