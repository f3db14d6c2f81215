"""JWT principals with a real token flow: a JWKS endpoint on loopback, keys made here, tokens
signed here, and the served app verifying them over a real socket."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import threading
import time
from collections.abc import AsyncIterator, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from service.app import create_app
from service.db.jwt_settings import JwtSettingsInput, set_jwt
from service.db.tenants import create_tenant
from service.errors import InvalidRequest
from tests.helpers import auth, index_files, write
from tests.serving import free_port, serve_app

pytestmark = [pytest.mark.integration]

TENANT = "jwtco"
ISSUER = "https://idp.example.test/realms/jwtco"
AUDIENCE = "ragline-jwtco"
MIN_REFRESH_S = 1.0

ENG = """---
title: Eng runbook
acl: [group:eng]
---
The pelican failover switches the primary database in four minutes.
"""
SALES = """---
title: Sales playbook
acl: [group:sales]
---
The pelican discount gives partners eleven percent off the first year.
"""
PUBLIC = """---
title: Lobby
acl: [public]
---
The lobby has a pelican statue near the door.
"""


class Jwks:
    """A JWKS endpoint on loopback that counts its fetches and can change its keys."""

    def __init__(self) -> None:
        self.doc: dict[str, Any] = {"keys": []}
        self.hits = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.hits += 1
                body = json.dumps(outer.doc).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def publish(self, *keys: tuple[str, Any]) -> None:
        entries = []
        for kid, private in keys:
            pub = private.public_key()
            algo = RSAAlgorithm if isinstance(pub, rsa.RSAPublicKey) else ECAlgorithm
            entry = algo.to_jwk(pub, as_dict=True)
            entry.update(kid=kid, use="sig")
            entries.append(entry)
        self.doc = {"keys": entries}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def rsa_key() -> Any:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


KEY1 = rsa_key()
KEY2 = rsa_key()
EC1 = ec.generate_private_key(ec.SECP256R1())


def claims(user: str = "ana", groups: Any = ("eng",), **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    out: dict[str, Any] = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": user,
        "iat": now,
        "nbf": now,
        "exp": now + 300,
        "groups": list(groups) if isinstance(groups, tuple | list) else groups,
    }
    out.update(extra)
    return {k: v for k, v in out.items() if v is not None}


def token(payload: dict[str, Any], key: Any = KEY1, kid: str = "k1", alg: str = "RS256") -> str:
    return jwt.encode(payload, key, algorithm=alg, headers={"kid": kid})


@pytest.fixture(scope="module")
def jwks() -> Iterator[Jwks]:
    j = Jwks()
    j.publish(("k1", KEY1), ("ec1", EC1))
    yield j
    j.close()


@pytest.fixture(scope="module")
async def app(
    settings: Any, runtime: Any, jwks: Jwks, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[tuple[str, Any]]:

    docs = tmp_path_factory.mktemp("jwtdocs")
    write(docs, "eng.md", ENG)
    write(docs, "sales.md", SALES)
    write(docs, "lobby.md", PUBLIC)
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, TENANT)
        await set_jwt(
            conn,
            TENANT,
            JwtSettingsInput(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks.url),
            operator=True,
        )
    summary = await index_files(runtime, TENANT, docs)
    assert summary.failed == 0, summary.errors
    application = create_app(settings, runtime=runtime)
    async with serve_app(application) as url:
        verifier = application.state.key_cache.jwt
        verifier.min_refresh_s = MIN_REFRESH_S
        yield url, application


@pytest.fixture
async def http(app: tuple[str, Any]) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=app[0], timeout=20) as client:
        yield client


async def search_titles(http: httpx.AsyncClient, tok: str) -> set[str]:
    resp = await http.post("/v1/search", json={"query": "pelican", "top_k": 10}, headers=auth(tok))
    assert resp.status_code == 200, resp.text
    return {r["title"] for r in resp.json()["results"]}


async def problem(http: httpx.AsyncClient, tok: str, status: int = 401) -> str:
    resp = await http.post("/v1/search", json={"query": "pelican"}, headers=auth(tok))
    assert resp.status_code == status, resp.text
    assert resp.headers["content-type"].startswith("application/problem+json")
    body = resp.json()
    assert tok not in resp.text and tok.split(".")[1] not in resp.text  # never echoed
    return str(body["code"])


async def test_groups_decide_what_a_token_sees(http: httpx.AsyncClient) -> None:
    assert await search_titles(http, token(claims("ana", ["eng"]))) == {"Eng runbook", "Lobby"}
    assert await search_titles(http, token(claims("raj", ["sales"]))) == {
        "Sales playbook",
        "Lobby",
    }
    assert await search_titles(http, token(claims("zed", []))) == {"Lobby"}


async def test_es256_tokens_verify_with_the_ec_key(http: httpx.AsyncClient) -> None:
    tok = token(claims("ana", ["eng"]), EC1, "ec1", "ES256")
    assert "Eng runbook" in await search_titles(http, tok)
    # the RSA key's kid with ES256: the key type does not match the algorithm
    assert await problem(http, token(claims(), EC1, "k1", "ES256")) == "alg_not_allowed"


async def test_each_bad_token_names_the_failed_check(http: httpx.AsyncClient) -> None:
    now = int(time.time())
    assert await problem(http, token(claims(exp=now - 120, iat=now - 600))) == "token_expired"
    assert await problem(http, token(claims(nbf=now + 600))) == "token_not_yet_valid"
    assert await problem(http, token(claims(aud="someone-else"))) == "wrong_audience"
    assert await problem(http, token(claims(iss="https://evil.test/"))) == "wrong_issuer"
    assert await problem(http, token(claims(exp=None))) == "missing_claim"
    assert await problem(http, token(claims(), KEY2, "k1")) == "bad_signature"
    assert await problem(http, "eyJhbGciOi.not-a.jwt") == "malformed_token"
    unsigned = jwt.encode(claims(), None, algorithm="none")
    assert await problem(http, unsigned) == "alg_not_allowed"


async def test_a_tenant_header_cannot_redirect_a_token(http: httpx.AsyncClient) -> None:
    tok = token(claims("ana", ["eng"]))
    resp = await http.post(
        "/v1/search",
        json={"query": "pelican"},
        headers={**auth(tok), "X-Ragline-Tenant": "acme"},
    )
    assert resp.status_code == 401 and resp.json()["code"] == "wrong_issuer"


async def test_hs_rs_confusion_is_refused(http: httpx.AsyncClient) -> None:
    """An HS256 token whose HMAC secret is the issuer's public key (the classic confusion):
    the tenant has no HS256 secret, so the algorithm itself is refused."""

    pem = KEY1.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = {"alg": "HS256", "typ": "JWT", "kid": "k1"}
    signing_input = ".".join(
        jwt.utils.base64url_encode(json.dumps(p).encode()).decode()
        for p in (header, claims("ana", ["eng"]))
    )

    sig = hmac.new(pem, signing_input.encode(), hashlib.sha256).digest()
    forged = signing_input + "." + jwt.utils.base64url_encode(sig).decode()
    assert await problem(http, forged) == "alg_not_allowed"


async def test_a_groups_claim_that_is_a_string_is_one_group(http: httpx.AsyncClient) -> None:
    assert "Eng runbook" in await search_titles(http, token(claims("ana", "eng")))
    assert await problem(http, token(claims("ana", {"eng": True}))) == "invalid_groups_claim"
    assert await problem(http, token(claims("ana", ["eng", 7]))) == "invalid_groups_claim"


async def test_entra_overage_is_refused_not_answered_without_groups(
    http: httpx.AsyncClient,
) -> None:
    overage = claims(
        "ana",
        None,
        _claim_names={"groups": "src1"},
        _claim_sources={
            "src1": {"endpoint": "https://graph.microsoft.com/v1.0/me/getMemberObjects"}
        },
    )
    assert await problem(http, token(overage)) == "groups_overage"
    assert await problem(http, token(claims("ana", None, hasgroups=True))) == "groups_overage"


async def test_changed_groups_show_in_the_next_answer_caches_included(
    http: httpx.AsyncClient,
) -> None:
    body = {"query": "What does the pelican do?", "stream": False, "top_k": 5}

    async def answer(tok: str) -> dict[str, Any]:
        resp = await http.post("/v1/answer", json=body, headers=auth(tok))
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    first = await answer(token(claims("mia", ["eng"])))
    assert "Eng runbook" in {s["title"] for s in first["sources"]}
    # the same user, now only in sales: nothing of eng, whatever was cached
    second = await answer(token(claims("mia", ["sales"])))
    titles = {s["title"] for s in second["sources"]}
    assert "Eng runbook" not in titles and "Sales playbook" in titles
    # another user with the same effective groups shares the cached answer
    again = await answer(token(claims("noa", ["sales", "not-in-any-acl"])))
    assert again["cache"] == "hit" and again["sources"] == second["sources"]


async def test_rotation_and_a_flood_of_unknown_kids(
    http: httpx.AsyncClient, jwks: Jwks, app: tuple[str, Any]
) -> None:
    assert await search_titles(http, token(claims("ana", ["eng"])))
    # the IdP rotates: k2 appears next to k1; a k2 token works once the JWKS is re-read
    jwks.publish(("k1", KEY1), ("k2", KEY2), ("ec1", EC1))
    await asyncio.sleep(MIN_REFRESH_S + 0.05)
    assert "Eng runbook" in await search_titles(http, token(claims("ana", ["eng"]), KEY2, "k2"))
    # a flood of random kids: each is refused, and the JWKS is fetched at most once per
    # refresh interval however many arrive
    await asyncio.sleep(MIN_REFRESH_S + 0.05)
    before = jwks.hits
    started = time.monotonic()
    codes = await asyncio.gather(
        *(problem(http, token(claims(), KEY2, secrets.token_hex(8))) for _ in range(60))
    )
    elapsed = time.monotonic() - started
    assert set(codes) == {"unknown_kid"}
    assert jwks.hits - before <= 1 + int(elapsed / MIN_REFRESH_S)
    # k1 retired: its tokens stop working after the next refresh
    jwks.publish(("k2", KEY2))
    await asyncio.sleep(MIN_REFRESH_S + 0.05)
    await problem(http, token(claims(), KEY2, "k-unknown"))  # triggers the refresh
    assert await problem(http, token(claims())) == "unknown_kid"


async def test_jwks_file_and_group_names(
    runtime: Any, settings: Any, tmp_path: Path, app: tuple[str, Any]
) -> None:
    """A tenant configured with a JWKS file, Entra-style group ids named by its table, and a
    group prefix."""

    path = tmp_path / "jwks.json"
    # a careless JWKS file with the private parts too: only the public key is used
    entry = RSAAlgorithm.to_jwk(KEY1, as_dict=True) | {"kid": "f1"}
    path.write_text(json.dumps({"keys": [entry]}))
    iss = "https://login.microsoftonline.test/tid/v2.0"
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, "entraco")
        await set_jwt(
            conn,
            "entraco",
            JwtSettingsInput(
                issuer=iss,
                audience="api://ragline",
                jwks_file=str(path),
                group_prefix="aad-",
                group_names={"0f3c-11": "eng"},
            ),
            operator=True,
        )
    docs = tmp_path / "docs"
    write(docs, "eng.md", ENG.replace("group:eng", "group:aad-eng"))
    assert (await index_files(runtime, "entraco", docs)).failed == 0
    app[1].state.key_cache.jwt.invalidate()
    tok = token(claims("u1", ["0f3c-11"], iss=iss, aud="api://ragline"), KEY1, "f1")
    async with httpx.AsyncClient(base_url=app[0], timeout=20) as http:
        assert await search_titles(http, tok) == {"Eng runbook"}
        other = token(claims("u2", ["77aa-22"], iss=iss, aud="api://ragline"), KEY1, "f1")
        assert await search_titles(http, other) == set()


async def test_hs256_only_with_an_explicit_secret(runtime: Any, app: tuple[str, Any]) -> None:

    secret = secrets.token_urlsafe(40)
    iss = "https://hs.example.test"
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, "hsco")
        with pytest.raises(InvalidRequest):
            await set_jwt(
                conn,
                "hsco",
                JwtSettingsInput(issuer=iss, audience="a", hs256_secret="short"),
                operator=False,
            )
        await set_jwt(
            conn,
            "hsco",
            JwtSettingsInput(issuer=iss, audience="a", hs256_secret=secret),
            operator=False,
        )
    app[1].state.key_cache.jwt.invalidate()
    async with httpx.AsyncClient(base_url=app[0], timeout=20) as http:
        good = jwt.encode(claims("h", [], iss=iss, aud="a"), secret, algorithm="HS256")
        resp = await http.post("/v1/search", json={"query": "x"}, headers=auth(good))
        assert resp.status_code == 200, resp.text
        wrong = jwt.encode(claims("h", [], iss=iss, aud="a"), "x" * 40, algorithm="HS256")
        assert await problem(http, wrong) == "bad_signature"
        # an RS256 token for this tenant: it has no JWKS, so RS256 is not accepted
        assert await problem(http, token(claims("h", [], iss=iss, aud="a"))) == "alg_not_allowed"


async def test_an_unreachable_jwks_is_a_503_not_a_bad_token(
    runtime: Any, app: tuple[str, Any]
) -> None:

    iss = "https://down.example.test"
    url = f"http://127.0.0.1:{free_port()}/jwks.json"  # nothing listens there
    async with runtime.pool.acquire() as conn:
        await create_tenant(conn, "downco")
        await set_jwt(
            conn, "downco", JwtSettingsInput(issuer=iss, audience="a", jwks_url=url), operator=True
        )
    app[1].state.key_cache.jwt.invalidate()
    async with httpx.AsyncClient(base_url=app[0], timeout=20) as http:
        for _ in range(2):  # the first try, and one inside the refresh interval
            tok = token(claims("d", [], iss=iss, aud="a"))
            resp = await http.post("/v1/search", json={"query": "x"}, headers=auth(tok))
            assert resp.status_code == 503 and resp.json()["code"] == "jwks_unavailable"
            assert "retry-after" in resp.headers
