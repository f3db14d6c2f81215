"""One worker thread with a bounded backlog: CPU work a request can go on without.

Groundedness (`ground.py`) is a scorer run that cannot be cancelled once started. It gets one
thread (a second took a core from the query embedder under load; token alignment, which ran on
one too, now runs no model) and a backlog bound: a call that would queue past it is not made (the
caller goes on without its result and says so), and a caller that stops waiting leaves the
run to finish on its own, still counted against the bound until it does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


class BoundedWorker:
    def __init__(self, name: str, max_backlog: int) -> None:
        self.max_backlog = max_backlog
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._backlog = 0
        self._lock = threading.Lock()
        self.skipped = 0
        """Calls gone without: not made (busy) or not waited for (late)."""

    def submit(
        self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> asyncio.Future[T] | None:
        """`fn(*args)` on the worker, or None (counted in `skipped`) when the backlog is full."""
        with self._lock:
            if self._backlog >= self.max_backlog:
                self.skipped += 1
                return None
            self._backlog += 1

        def run() -> T:
            try:
                return fn(*args, **kwargs)
            finally:
                with self._lock:
                    self._backlog -= 1

        return asyncio.get_running_loop().run_in_executor(self._executor, run)

    async def wait(
        self, future: asyncio.Future[T], deadline: AbstractAsyncContextManager[object]
    ) -> T | None:
        """The result, or None (counted in `skipped`) when `deadline` (`asyncio.timeout`, a
        budget's stage) raises TimeoutError first; the run goes on without a waiter."""
        try:
            async with deadline:
                return await asyncio.shield(future)
        except TimeoutError:
            self.skipped += 1
            return None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
