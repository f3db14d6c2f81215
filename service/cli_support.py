"""Helpers every `ragline` command module uses: print (table or JSON), run a coroutine, open the
database for one command, share a sub-command group between packages."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

from service.config import Settings
from service.db.pool import open_pool


def emit(data: Any, as_json: bool, render: Callable[[Any], object] | None = None) -> None:
    if as_json or render is None:
        sys.stdout.write(msgspec.json.encode(data).decode() + "\n")
    else:
        render(data)


def run_async(fn: Callable[[], Awaitable[int]]) -> int:
    return asyncio.run(fn())  # type: ignore[arg-type]


async def with_pool(settings: Settings, fn: Callable[[Any], Awaitable[int]]) -> int:
    pool = await open_pool(settings)
    try:
        async with pool.acquire() as conn:
            return await fn(conn)
    finally:
        await pool.close()


def on_db(settings: Settings, fn: Callable[[Any], Awaitable[int]]) -> int:
    """Runs a command's `fn(conn)` on a database connection opened for it; its exit code."""
    return run_async(lambda: with_pool(settings, fn))


def command_group(sub: Any, name: str, help_text: str) -> Any:
    """The sub-command group `name` (e.g. `bench`), created by the first package that asks and
    reused by the others, so several packages can add commands to one group."""
    existing = sub.choices.get(name)
    if existing is not None:
        for action in existing._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action
        return existing.add_subparsers(dest="sub", required=True)
    return sub.add_parser(name, help=help_text).add_subparsers(dest="sub", required=True)
