"""Load the settings: defaults, then an optional TOML file, then `RAGLINE_*` environment variables.

A bad value stops start-up with a `ConfigError` that names the key (`database.pool_max`) and,
when it came from the environment, the variable (`RAGLINE_DATABASE_POOL_MAX`). Ranges are
declared on the fields (`service.config.sections`); `check` holds the rules that relate fields.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from service.config.sections import RESERVED_PAYLOAD, Settings

ENV_PREFIX = "RAGLINE_"
# `RAGLINE_*` variables read by tools around the service, not settings (tests use RAGLINE_TEST_*)
NOT_SETTINGS = frozenset(
    {"RAGLINE_CONFIG", "RAGLINE_SHARED_DATA", "RAGLINE_VLLM_HOME", "RAGLINE_VLLM_PYTHON"}
)


class ConfigError(Exception):
    """A setting could not be read or has a bad value; the message names the key."""


def _sections() -> dict[str, type[msgspec.Struct]]:
    info = msgspec.inspect.type_info(Settings)
    assert isinstance(info, msgspec.inspect.StructType)
    out: dict[str, type[msgspec.Struct]] = {}
    for f in info.fields:
        assert isinstance(f.type, msgspec.inspect.StructType)
        out[f.name] = f.type.cls
    return out


def _env_overrides(environ: Mapping[str, str]) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Map `RAGLINE_<SECTION>_<FIELD>` variables onto the settings tree.

    Returns the overrides and, for error messages, which variable set which key.
    """
    sections = _sections()
    tree: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for var, raw in environ.items():
        if not var.startswith(ENV_PREFIX) or var in NOT_SETTINGS or var.startswith("RAGLINE_TEST_"):
            continue
        rest = var[len(ENV_PREFIX) :].lower()
        for name, cls in sections.items():
            if not rest.startswith(name + "_"):
                continue
            field = rest[len(name) + 1 :]
            if field not in cls.__struct_fields__:
                raise ConfigError(f"{var}: unknown setting {name}.{field}")
            value: Any = raw
            if raw[:1] in "[{":
                try:
                    value = msgspec.json.decode(raw)
                except msgspec.DecodeError as exc:
                    raise ConfigError(f"{var} ({name}.{field}): not valid JSON: {exc}") from exc
            tree.setdefault(name, {})[field] = value
            origin[f"{name}.{field}"] = var
            break
        else:
            raise ConfigError(f"{var}: unknown setting (no section matches)")
    return tree, origin


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def load_settings(
    path: str | Path | None = None, environ: Mapping[str, str] | None = None
) -> Settings:
    """Load settings; `path` (or `RAGLINE_CONFIG`) names an optional TOML file."""
    env = os.environ if environ is None else environ
    path = path or env.get("RAGLINE_CONFIG") or None
    tree: dict[str, Any] = {}
    if path is not None:
        try:
            tree = tomllib.loads(Path(path).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(f"config file {path}: {exc.strerror}") from exc
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"config file {path}: {exc}") from exc
    origin = {key: f"in {path}" for key in _keys(tree)}
    overrides, from_env = _env_overrides(env)
    origin.update(from_env)
    tree = _merge(tree, overrides)
    try:
        settings = msgspec.convert(tree, Settings, strict=False)
    except msgspec.ValidationError as exc:
        raise ConfigError(_name_the_key(str(exc), origin, tree)) from exc
    check(settings)
    return settings


def _keys(tree: Mapping[str, Any]) -> list[str]:
    """`section.field` of every field a TOML file sets."""
    return [
        f"{name}.{field}"
        for name, section in tree.items()
        if isinstance(section, Mapping)
        for field in section
    ]


def _name_the_key(message: str, origin: Mapping[str, str], tree: Mapping[str, Any]) -> str:
    """msgspec says e.g. "Expected `int` >= 1 - at `$.database.pool_max`"; this says
    "setting database.pool_max (RAGLINE_DATABASE_POOL_MAX): Expected `int` >= 1, got '0'"."""
    if " - at `$." in message:
        what, where = message.rsplit(" - at `$.", 1)
        key = where.rstrip("`").split("[")[0]
        source = origin.get(key)
        section, _, field = key.partition(".")
        values = tree.get(section)
        value = values.get(field) if isinstance(values, Mapping) and "[" not in where else None
        got = f", got {value!r}" if value is not None and "got" not in what else ""
        return f"setting {key}{f' ({source})' if source else ''}: {what}{got}"
    return f"settings: {message}"


def check(s: Settings) -> None:
    """The rules that relate settings to each other (ranges are declared on the fields)."""
    a = s.admission
    for target, hard_cap in (
        ("queue_target_ms", "max_queue_wait_ms"),
        ("batch_queue_target_ms", "batch_max_queue_wait_ms"),
    ):
        if getattr(a, target) > getattr(a, hard_cap):
            raise ConfigError(f"setting admission.{target}: must be in 0..admission.{hard_cap}")
    if 0 < a.max_in_flight <= a.batch_max_in_flight:
        raise ConfigError(
            "setting admission.batch_max_in_flight: must be < admission.max_in_flight"
            " (interactive traffic keeps slots batch cannot take)"
        )
    if s.retrieval.top_k > s.retrieval.max_top_k:
        raise ConfigError("setting retrieval.top_k: must be <= retrieval.max_top_k")
    if s.database.pool_min > s.database.pool_max:
        raise ConfigError("setting database.pool_min: must be <= database.pool_max")
    if s.rerank.backend == "cross_encoder" and not s.rerank.model_dir:
        raise ConfigError("setting rerank.model_dir: required by rerank.backend = cross_encoder")
    for field in s.retrieval.metadata_fields:
        if field in RESERVED_PAYLOAD:
            raise ConfigError(
                f"setting retrieval.metadata_fields: {field!r} is reserved"
                f" ({', '.join(sorted(RESERVED_PAYLOAD))} are Ragline's own)"
            )
    g = s.generator
    chains = [[g.backend, *g.fallbacks], *g.tenant_routes.values(), *g.class_routes.values()]
    if any(not chain for chain in chains):
        raise ConfigError("setting generator routes: a chain needs at least one generator")
    if any("openai" in chain for chain in chains) and not g.base_urls:
        raise ConfigError("setting generator.base_urls: the `openai` generator needs a URL")
    for tenant, cap in g.tenant_max_tokens.items():
        if cap <= 0:
            raise ConfigError(f"setting generator.tenant_max_tokens.{tenant}: must be > 0")
