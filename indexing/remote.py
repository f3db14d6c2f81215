"""Indexing through a running service (filled in below)."""

from __future__ import annotations

import argparse

from service.ingest.summary import Summary


async def remote_add(url: str, key: str, args: argparse.Namespace) -> Summary:
    raise NotImplementedError


async def remote_rm(url: str, key: str, args: argparse.Namespace) -> Summary:
    raise NotImplementedError
