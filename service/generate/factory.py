"""Build the generators that some route names, and the router over them (one wiring place)."""

from __future__ import annotations

import asyncio

from service.config import Settings
from service.generate.extractive import ExtractiveGenerator
from service.generate.local import LocalGenerator
from service.generate.openai import OpenAIGenerator
from service.generate.protocol import Generator
from service.generate.router import GeneratorRouter

CPU_GENERATORS = frozenset({"extractive", "local"})
"""Generators that answer on this machine's CPU (admission sizes its slots by cores for them)."""


def routed_names(settings: Settings) -> set[str]:
    g = settings.generator
    names: set[str] = {g.backend, *g.fallbacks, "extractive"}
    for chain in [*g.tenant_routes.values(), *g.class_routes.values()]:
        names.update(chain)
    return names


async def open_router(settings: Settings) -> GeneratorRouter:
    """Every routed generator, opened; the local model loads in a thread (seconds)."""
    names = routed_names(settings)
    generators: dict[str, Generator] = {
        "extractive": ExtractiveGenerator(settings.generator.max_sentences)
    }
    if "openai" in names:
        generators["openai"] = OpenAIGenerator.from_settings(settings)
    if "local" in names:
        generators["local"] = await asyncio.to_thread(LocalGenerator.load, settings)
    return GeneratorRouter.from_settings(settings, generators)
