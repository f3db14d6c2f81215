"""The client filter language (ARCHITECTURE §5) over declared metadata fields only.

    {"team": "alpha"}                       match
    {"team": {"any": ["a", "b"]}}           any-of
    {"year": {"gte": 2020, "lt": 2024}}     range (numbers or ISO dates for datetime fields)
    {"published": {"gte": "2024-01-01"}}    dates: ISO 8601, a date alone means its midnight,
                                            no offset means UTC; a datetime match is an
                                            exact-instant range

Conditions are AND-ed. `tenant_id`, `acl` and other reserved fields can never be filtered on,
except `lang` (a keyword: `{"lang": "hi"}`, `{"lang": {"any": ["en", "hi"]}}`).
The parsed form is adapter-neutral; each index adapter translates it into its engine's filter.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from typing import Any, Literal

import msgspec

from service.config import RESERVED_PAYLOAD
from service.errors import InvalidRequest

FieldType = Literal["keyword", "integer", "float", "bool", "datetime"]
RANGE_OPS = ("gt", "gte", "lt", "lte")
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
"""Integer metadata is stored as 64-bit integers: a filter value beyond is refused (422)."""
FILTERABLE_RESERVED: dict[str, FieldType] = {"lang": "keyword"}
"""Reserved payload fields a client may filter on (they say nothing about other tenants)."""


class Match(msgspec.Struct, frozen=True):
    field: str
    value: str | int | float | bool


class AnyOf(msgspec.Struct, frozen=True):
    field: str
    values: tuple[str | int, ...]


class Range(msgspec.Struct, frozen=True):
    field: str
    gt: float | str | None = None
    gte: float | str | None = None
    lt: float | str | None = None
    lte: float | str | None = None


Condition = Match | AnyOf | Range


class FilterSpec(msgspec.Struct, frozen=True):
    conditions: tuple[Condition, ...]


def _bad(field: str, why: str) -> InvalidRequest:
    return InvalidRequest(f"filter field {field!r}: {why}", code="invalid_filter")


def normalize_datetime(value: str) -> str:
    """An ISO 8601 date or datetime as RFC 3339 in UTC (what Qdrant's datetime index parses).

    Also the form indexers should store datetime metadata in. Raises ValueError when invalid.
    """
    parsed = dt.datetime.fromisoformat(value.strip())
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _check_scalar(field: str, ftype: FieldType, value: Any) -> str | int | float | bool:
    ok = {
        "keyword": isinstance(value, str),
        "integer": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, int | float) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "datetime": isinstance(value, str) and _is_datetime(value),
    }[ftype]
    if not ok:
        shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:80] + "…"
        raise _bad(field, f"expected a {ftype} value, got {type(value).__name__} {shown}")
    if ftype == "integer" and not INT64_MIN <= value <= INT64_MAX:
        raise _bad(field, "integer outside the 64-bit range")
    if ftype == "float" and not _finite(value):
        raise _bad(field, "number outside the float range")
    if ftype == "datetime":
        return normalize_datetime(value)
    return value  # type: ignore[no-any-return]


def _finite(value: float) -> bool:
    try:
        return math.isfinite(float(value))
    except OverflowError:  # an integer beyond any float
        return False


def _is_datetime(value: str) -> bool:
    try:
        normalize_datetime(value)
    except ValueError:
        return False
    return True


MAX_ANY_VALUES = 64
MAX_TERMS = 256


def _too_large(why: str) -> InvalidRequest:
    return InvalidRequest(f"filters: {why}", code="filter_too_large")


def parse_filters(
    raw: Any,
    declared: Mapping[str, FieldType],
    *,
    max_values: int = MAX_ANY_VALUES,
    max_terms: int = MAX_TERMS,
) -> FilterSpec | None:
    """Parse and bound a request's filters: at most `max_values` values per `any` and
    `max_terms` values in all (`retrieval.max_filter_values` / `max_filter_terms`), so one
    tenant's huge filters cannot make every search slow (422 `filter_too_large`)."""
    if raw is None or raw == {}:
        return None
    if not isinstance(raw, dict):
        raise InvalidRequest("filters must be a JSON object", code="invalid_filter")
    terms = sum(
        len(spec.get("any", ()))
        if isinstance(spec, dict) and isinstance(spec.get("any"), list)
        else len(spec)
        if isinstance(spec, dict)
        else 1
        for spec in raw.values()
    )
    if terms > max_terms:
        raise _too_large(f"{terms} values in all; at most {max_terms}")
    for field, spec in raw.items():
        values = spec.get("any") if isinstance(spec, dict) else None
        if isinstance(values, list) and len(values) > max_values:
            raise _too_large(f"field {field!r}: {len(values)} values in 'any'; max {max_values}")
    conds: list[Condition] = []
    for field, spec in raw.items():
        if field in RESERVED_PAYLOAD and field not in FILTERABLE_RESERVED:
            raise _bad(field, "reserved; it cannot be filtered on")
        ftype = FILTERABLE_RESERVED.get(field) or declared.get(field)
        if ftype is None:
            raise _bad(field, f"not a declared metadata field (declared: {sorted(declared)})")
        if isinstance(spec, dict):
            keys = set(spec)
            if keys == {"any"}:
                values = spec["any"]
                if (
                    not isinstance(values, list)
                    or not values
                    or ftype not in {"keyword", "integer"}
                ):
                    raise _bad(field, "'any' takes a non-empty list of keyword or integer values")
                conds.append(AnyOf(field, tuple(_check_scalar(field, ftype, v) for v in values)))  # type: ignore[misc]
            elif keys and keys <= set(RANGE_OPS):
                if ftype not in {"integer", "float", "datetime"}:
                    raise _bad(field, f"range needs a numeric or datetime field, not {ftype}")
                bounds: dict[str, Any] = {op: _check_scalar(field, ftype, spec[op]) for op in keys}
                conds.append(Range(field, **bounds))
            else:
                raise _bad(
                    field, f"unknown operator(s) {sorted(keys)}; use any, {', '.join(RANGE_OPS)}"
                )
        elif ftype == "datetime":
            instant = _check_scalar(field, ftype, spec)
            conds.append(Range(field, gte=instant, lte=instant))
        else:
            conds.append(Match(field, _check_scalar(field, ftype, spec)))
    return FilterSpec(tuple(conds))
