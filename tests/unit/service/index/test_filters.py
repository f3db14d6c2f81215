from __future__ import annotations

import pytest

from service.errors import InvalidRequest
from service.index.filters import AnyOf, Match, Range, parse_filters

pytestmark = pytest.mark.unit
DECLARED = {
    "team": "keyword",
    "year": "integer",
    "score": "float",
    "published": "datetime",
    "draft": "bool",
}


def test_match_any_and_range() -> None:
    spec = parse_filters(
        {
            "team": "eng",
            "year": {"any": [2023, 2024]},
            "score": {"gte": 0.5},
            "published": {"lt": "2024-01-01"},
        },
        DECLARED,  # type: ignore[arg-type]
    )
    assert spec is not None
    assert spec.conditions == (
        Match("team", "eng"),
        AnyOf("year", (2023, 2024)),
        Range("score", gte=0.5),
        Range("published", lt="2024-01-01T00:00:00Z"),
    )
    assert parse_filters(None, DECLARED) is None and parse_filters({}, DECLARED) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        ({"tenant_id": "x"}, "tenant_id"),
        ({"acl": ["public"]}, "acl"),
        ({"unknown": 1}, "unknown"),
        ({"year": "2024"}, "year"),
        ({"draft": 1}, "draft"),
        ({"team": {"gte": 1}}, "team"),
        ({"published": {"lt": "yesterday"}}, "published"),
        ({"year": {"any": []}}, "year"),
        ({"year": {"between": [1, 2]}}, "year"),
    ],
)
def test_bad_filters_name_the_field(raw: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidRequest, match=repr(field)) as err:
        parse_filters(raw, DECLARED)  # type: ignore[arg-type]
    assert err.value.status == 422 and err.value.code == "invalid_filter"


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("2024-01-01", "2024-01-01T00:00:00Z"),
        ("2024-01-01T10:30:00", "2024-01-01T10:30:00Z"),
        ("2024-01-01T10:30:00+05:30", "2024-01-01T05:00:00Z"),
        ("2024-01-01T10:30:00.250Z", "2024-01-01T10:30:00.250000Z"),
    ],
)
def test_dates_are_normalised_to_utc(given: str, stored: str) -> None:
    spec = parse_filters({"published": {"gte": given}}, DECLARED)  # type: ignore[arg-type]
    assert spec is not None and spec.conditions == (Range("published", gte=stored),)


def test_a_datetime_match_is_an_exact_instant() -> None:
    spec = parse_filters({"published": "2024-03-05"}, DECLARED)  # type: ignore[arg-type]
    instant = "2024-03-05T00:00:00Z"
    assert spec is not None and spec.conditions == (Range("published", gte=instant, lte=instant),)


def test_filters_are_bounded_per_any_and_in_all() -> None:
    ok = parse_filters({"team": {"any": ["a", "b", "c"]}}, DECLARED, max_values=3)  # type: ignore[arg-type]
    assert ok is not None
    with pytest.raises(InvalidRequest) as many:
        parse_filters({"team": {"any": ["a", "b", "c", "d"]}}, DECLARED, max_values=3)  # type: ignore[arg-type]
    assert many.value.code == "filter_too_large" and many.value.status == 422
    terms = {"team": {"any": ["a", "b"]}, "year": {"any": [1, 2]}, "score": {"gte": 0.1}}
    assert parse_filters(terms, DECLARED, max_terms=5) is not None  # type: ignore[arg-type]
    with pytest.raises(InvalidRequest) as total:
        parse_filters(terms, DECLARED, max_terms=4)  # type: ignore[arg-type]
    assert total.value.code == "filter_too_large"


@pytest.mark.parametrize(
    "raw",
    [
        {"year": 2**63},
        {"year": -(2**63) - 1},
        {"year": {"any": [1, 2**64]}},
        {"year": {"gte": 10**400}},
        {"score": 10**400},
        {"score": {"lt": -(10**309)}},
    ],
)
def test_numbers_beyond_what_the_index_stores_are_refused(raw: dict[str, object]) -> None:
    with pytest.raises(InvalidRequest) as err:
        parse_filters(raw, DECLARED)
    assert err.value.code == "invalid_filter" and err.value.status == 422


def test_the_64_bit_edges_are_accepted() -> None:
    spec = parse_filters({"year": {"gte": -(2**63), "lte": 2**63 - 1}}, DECLARED)
    assert spec is not None and spec.conditions == (Range("year", gte=-(2**63), lte=2**63 - 1),)


def test_lang_is_the_one_reserved_field_a_client_may_filter_on() -> None:
    spec = parse_filters({"lang": "hi"}, DECLARED)  # type: ignore[arg-type]
    assert spec is not None and spec.conditions == (Match("lang", "hi"),)
    spec = parse_filters({"lang": {"any": ["en", "hi"]}}, DECLARED)  # type: ignore[arg-type]
    assert spec is not None and spec.conditions == (AnyOf("lang", ("en", "hi")),)
    for raw in ({"lang": 3}, {"lang": {"gte": "a"}}, {"doc_id": "x"}, {"tenant_id": "t"}):
        with pytest.raises(InvalidRequest) as err:
            parse_filters(raw, DECLARED)  # type: ignore[arg-type]
        assert err.value.code == "invalid_filter"
