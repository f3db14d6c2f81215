"""Request coalescing: identical concurrent requests run once.

In a process, the first request starts the work as a task of its own (not tied to its client) and
later ones wait for it; the work is cancelled only when every waiter has gone. Across replicas,
Redis holds a short lock per key: the holder computes, writes the result to L2 and publishes its
key; the others wait for that publish (polling L2 as a safety net) instead of computing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Generic, TypeVar

from service.cache.redis_link import RedisLink, RedisUnavailable, as_bytes

T = TypeVar("T")
E = TypeVar("E")
log = logging.getLogger("ragline.cache")

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class _Flight(Generic[T]):
    def __init__(self, task: asyncio.Task[T]) -> None:
        self.task = task
        self.waiters = 0


class SingleFlight(Generic[T]):
    """In-process coalescing of awaitables by key."""

    def __init__(self) -> None:
        self._flights: dict[str, _Flight[T]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    async def run(self, key: str, factory: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """The result, and whether this call joined a flight another request had started."""
        flight = self._flights.get(key)
        joined = flight is not None
        if flight is None:
            flight = _Flight(asyncio.ensure_future(factory()))
            self._flights[key] = flight
            flight.task.add_done_callback(self._forgetter(key, flight))
        flight.waiters += 1
        try:
            return await asyncio.shield(flight.task), joined
        except asyncio.CancelledError:
            if flight.waiters == 1 and not flight.task.done():
                flight.task.cancel()  # the last waiter left: abort the work
            raise
        finally:
            flight.waiters -= 1

    def _forgetter(self, key: str, flight: _Flight[T]) -> Callable[[asyncio.Task[T]], None]:
        def forget(task: asyncio.Task[T]) -> None:
            if self._flights.get(key) is flight:
                del self._flights[key]
            if not task.cancelled():
                task.exception()  # the waiters got it; mark it seen so asyncio never warns

        return forget


class Broadcast(Generic[E]):
    """Events of one computation, replayed from the start to every follower as they arrive."""

    def __init__(self) -> None:
        self.events: list[E] = []
        self.finished = False
        self._wake = asyncio.Event()

    def publish(self, event: E) -> None:
        self.events.append(event)
        self._notify()

    def finish(self) -> None:
        self.finished = True
        self._notify()

    def _notify(self) -> None:
        wake, self._wake = self._wake, asyncio.Event()
        wake.set()

    async def follow(self) -> AsyncIterator[E]:
        i = 0
        while True:
            while i < len(self.events):
                yield self.events[i]
                i += 1
            if self.finished:
                return
            await self._wake.wait()


class RemoteFlights:
    """Coalescing across replicas through Redis: a lock per key, a publish when the result is in."""

    def __init__(self, link: RedisLink, *, poll_s: float = 0.05) -> None:
        self.link = link
        self.poll_s = poll_s
        self.channel = link.key("flights")
        self._waiting: dict[str, set[asyncio.Event]] = {}
        self._listener: asyncio.Task[None] | None = None
        self._release = link.client.register_script(_RELEASE)

    def start(self) -> None:
        if self._listener is None:
            self._listener = asyncio.get_running_loop().create_task(self._listen())

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener

    async def try_lock(self, key: str, ttl_ms: float) -> str | None:
        """A token if this replica now computes `key`; None if another holds it.

        Raises `RedisUnavailable` when Redis cannot say (then compute locally).
        """
        token = secrets.token_hex(8)
        got = await self.link.call(
            "lock", lambda r: r.set(key + ":lock", token, nx=True, px=max(1, int(ttl_ms)))
        )
        return token if got else None

    async def release(self, key: str, token: str) -> None:
        with contextlib.suppress(RedisUnavailable):
            await self.link.call(
                "unlock", lambda r: self._release(keys=[key + ":lock"], args=[token], client=r)
            )

    async def publish(self, key: str) -> None:
        with contextlib.suppress(RedisUnavailable):
            await self.link.call("publish", lambda r: r.publish(self.channel, key))

    async def wait(self, key: str, timeout_s: float) -> bytes | None:
        """Wait for another replica's result for `key`; None if it gave up, failed or is late."""
        wake = asyncio.Event()
        self._waiting.setdefault(key, set()).add(wake)
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_s
        try:
            while loop.time() < until:
                value = await self._peek(key)
                if value is not None:
                    return value
                if not self.link.up or not await self._locked(key):
                    return None  # the holder finished without a cacheable result, or died
                wake.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(self.poll_s, max(0.0, until - loop.time()))):
                        await wake.wait()
            return None
        finally:
            waiters = self._waiting.get(key)
            if waiters is not None:
                waiters.discard(wake)
                if not waiters:
                    del self._waiting[key]

    async def _peek(self, key: str) -> bytes | None:
        try:
            return as_bytes(await self.link.call("get", lambda r: r.get(key)))
        except RedisUnavailable:
            return None

    async def _locked(self, key: str) -> bool:
        try:
            return bool(await self.link.call("exists", lambda r: r.exists(key + ":lock")))
        except RedisUnavailable:
            return False

    async def _listen(self) -> None:
        """One subscription per process; it reconnects by itself after Redis comes back, and
        ends when the link is closed."""
        while not self.link.closed:
            if not self.link.up:
                await asyncio.sleep(self.link.settings.probe_interval_s)
                continue
            pubsub = self.link.client.pubsub()
            try:
                await pubsub.subscribe(self.channel)
                while not self.link.closed:
                    msg = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
                    if msg is not None and msg.get("type") == "message":
                        data = msg["data"]
                        key = data.decode() if isinstance(data, bytes) else str(data)
                        for wake in self._waiting.get(key, ()):
                            wake.set()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # connection lost: followers keep polling meanwhile
                log.debug("flight listener lost redis: %s", type(exc).__name__)
                await asyncio.sleep(self.link.settings.probe_interval_s)
            finally:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()  # type: ignore[no-untyped-call, unused-ignore]


__all__ = ["Broadcast", "RemoteFlights", "SingleFlight"]
