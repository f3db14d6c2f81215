"""The key cache (expiry on hits, clears that race a lookup), durations, may_assert patterns and
act_as bounds, without a server."""

from __future__ import annotations

import json
import time
from datetime import timedelta

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from service.api.auth import KeyCache
from service.auth.act_as import acting_principal
from service.auth.jwt import JwksSource, parse_jwks
from service.db.keys import KeyGrant, check_may_assert, may_assert, parse_duration
from service.errors import Forbidden, InvalidRequest
from service.identity import Principal

pytestmark = pytest.mark.unit

P = Principal(tenant_id="t", user_id="u", groups=("eng",), key_id="k1")


def test_a_cached_grant_past_its_expiry_is_refused_on_a_hit() -> None:
    cache = KeyCache(ttl_s=60)
    cache.put(b"d", KeyGrant(principal=P, expires_at=time.time() - 0.001))
    assert cache.get(b"d") == (True, None)
    cache.put(b"e", KeyGrant(principal=P, expires_at=time.time() + 60))
    assert cache.get(b"e") == (True, P)


def test_a_lookup_that_raced_a_clear_is_not_cached() -> None:
    cache = KeyCache()
    generation = cache.generation
    cache.clear()  # a revocation arrived while the lookup was reading the database
    cache.put(b"d", KeyGrant(principal=P), generation)
    assert cache.get(b"d") == (False, None)


def test_durations() -> None:
    assert parse_duration("90d") == timedelta(days=90)
    assert parse_duration("1s") == parse_duration("1") == timedelta(seconds=1)
    for bad in ("0s", "0", "d", "-1d", "1y", "99999999d", "1.5h"):
        with pytest.raises(InvalidRequest):
            parse_duration(bad)


def test_may_assert_patterns() -> None:
    assert check_may_assert(["group:*", "group:eng", "user:*"]) == [
        "group:*",
        "group:eng",
        "user:*",
    ]
    for bad in ("*", "eng", "admin:*", "group:"):
        with pytest.raises(InvalidRequest):
            check_may_assert([bad])
    assert may_assert(["group:team-*"], "group:team-a")
    assert not may_assert(["group:team-*"], "group:eng")
    assert not may_assert(["group:eng"], "group:eng2")


FRONTEND = KeyGrant(
    principal=Principal(
        tenant_id="t",
        user_id="frontend",
        groups=("ops",),
        scopes=frozenset({"query", "act_as"}),
        key_id="fk",
    ),
    may_assert=("group:eng", "group:team-*"),
)


def test_act_as_within_the_allowance() -> None:
    p = acting_principal(FRONTEND, {"x-ragline-user": "ana", "x-ragline-groups": "eng, team-a"})
    assert (p.user_id, p.groups, p.key_id, p.via) == ("ana", ("eng", "team-a"), "fk", "act_as")
    assert p.scopes == frozenset({"query"})
    # no headers: the key's own principal
    assert acting_principal(FRONTEND, {}) == FRONTEND.principal


def test_act_as_beyond_the_allowance_or_without_the_scope() -> None:
    with pytest.raises(Forbidden) as exc:
        acting_principal(FRONTEND, {"x-ragline-user": "ana", "x-ragline-groups": "eng,sales"})
    assert exc.value.code == "assert_not_allowed"
    plain = KeyGrant(principal=P)
    with pytest.raises(Forbidden) as exc:
        acting_principal(plain, {"x-ragline-user": "ana"})
    assert exc.value.code == "act_as_forbidden"
    for headers in (
        {"x-ragline-groups": "eng"},  # groups without a user
        {"x-ragline-user": ""},
        {"x-ragline-user": "a:b"},
        {"x-ragline-user": "ana", "x-ragline-groups": "group:eng"},
    ):
        with pytest.raises(InvalidRequest):
            acting_principal(FRONTEND, headers)
    users = KeyGrant(principal=FRONTEND.principal, may_assert=("group:*", "user:emp-*"))
    with pytest.raises(Forbidden):
        acting_principal(users, {"x-ragline-user": "ceo"})
    assert acting_principal(users, {"x-ragline-user": "emp-7"}).user_id == "emp-7"


def test_jwks_key_choice() -> None:
    """By `kid`; a token without one uses the single key that fits; a JWKS key without an id
    serves tokens whatever their `kid`; never a key of the wrong type."""

    rsa_pub = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    ec_pub = ec.generate_private_key(ec.SECP256R1()).public_key()
    doc = {
        "keys": [
            RSAAlgorithm.to_jwk(rsa_pub, as_dict=True) | {"kid": "r1"},
            ECAlgorithm.to_jwk(ec_pub, as_dict=True),  # no kid
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hs"},  # symmetric: never from a JWKS
            RSAAlgorithm.to_jwk(rsa_pub, as_dict=True) | {"kid": "e1", "use": "enc"},
        ]
    }
    src = JwksSource("unused", min_refresh_s=30, max_age_s=600, timeout_s=1)
    src.keys, src.anonymous = parse_jwks(json.dumps(doc).encode())
    assert set(src.keys) == {"r1"} and len(src.anonymous) == 1
    assert src._find("r1", "RS256") is src.keys["r1"]
    assert src._find(None, "RS256") is src.keys["r1"]
    assert src._find(None, "ES256") is src.anonymous[0]
    assert src._find("whatever", "ES256") is src.anonymous[0]
    assert src._find("whatever", "RS256") is None
    assert src._find("hs", "HS256") is None
