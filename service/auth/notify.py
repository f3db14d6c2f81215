"""Telling every replica that credentials changed (a key revoked or expired early, a JWT setting
changed): the change itself is in PostgreSQL, whose `auth_epoch` every replica polls; this adds
the fast path over Redis — a version counter (INCR) that replicas poll often, and a pub/sub
message that wakes them at once. A missed message is caught by the version, a Redis outage by
the epoch: see `service.auth.revocation`.
"""

from __future__ import annotations

import asyncio
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from service.cache.redis_link import RedisLink, RedisUnavailable
from service.config import Settings

log = logging.getLogger("ragline.auth")


def version_key(prefix: str) -> str:
    return f"{prefix}auth:version"


def channel(prefix: str) -> str:
    return f"{prefix}auth:changed"


async def bump(client: Redis, prefix: str) -> int:
    version = int(await client.incr(version_key(prefix)))
    await client.publish(channel(prefix), str(version))
    return version


async def notify_auth_change(settings: Settings, client: Redis | None = None) -> None:
    """Best effort: without Redis (or with Redis down) replicas notice within the epoch poll."""
    if not settings.redis.url:
        return
    own = client is None
    c: Redis = client or Redis.from_url(settings.redis.url, socket_timeout=1.0)
    try:
        async with asyncio.timeout(2.0):
            await bump(c, settings.redis.prefix)
    except (TimeoutError, RedisError, OSError) as exc:
        log.warning("could not tell replicas over redis (%s); they poll the database", exc)
    finally:
        if own:
            await c.aclose()


async def notify_link(link: RedisLink | None) -> None:
    """The same from a running replica, over its own Redis link."""
    if link is None:
        return
    try:
        await link.call("auth_bump", lambda r: bump(r, link.prefix), timeout_ms=1000)
    except RedisUnavailable:
        log.warning("could not tell replicas over redis; they poll the database")
