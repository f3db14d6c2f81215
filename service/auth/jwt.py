"""JWT principals: a tenant trusts one OIDC issuer, and a token it signed acts as
`user:<user claim>` with `group:<each group>` (ARCHITECTURE §3).

Verification is PyJWT's (signature, `exp`, `nbf`, `iss`, `aud` with a small leeway); this module
decides *which* key and algorithm may verify a token, before PyJWT sees it:

- the algorithm comes from an allow-list (RS256, ES256; HS256 only for a tenant with a configured
  secret), so `alg: none` and every other algorithm are refused;
- RS256/ES256 verify only with a JWKS key of the matching type, HS256 only with the tenant's
  secret: a token that claims HS256 can never be checked against a public key (HS/RS confusion);
- an unknown `kid` refreshes the JWKS at most once per `min_refresh_s` per source (concurrent
  misses share one fetch), so a flood of random `kid`s cannot make Ragline hammer the IdP.

Every refusal is a 401 with a stable code naming the check that failed; no message ever contains
the token or a claim value.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import jwt
import msgspec
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAudienceError,
    InvalidIssuerError,
    InvalidSignatureError,
    MissingRequiredClaimError,
    PyJWTError,
)

from service.errors import Unauthorized, UpstreamError
from service.identity import Principal

ALGORITHMS = ("RS256", "ES256", "HS256")
_KEY_TYPE = {"RS256": "RSA", "ES256": "EC"}
MAX_GROUPS = 1000
MAX_NAME = 256
MAX_JWKS_BYTES = 1_000_000
MAX_TOKEN_BYTES = 16_384


class TokenRejected(Unauthorized):
    title = "Invalid bearer token"


class JwksUnavailable(UpstreamError):
    code = "jwks_unavailable"
    title = "The identity provider's keys could not be read"


def reject(code: str, detail: str) -> TokenRejected:
    return TokenRejected(detail, code=code)


class JwtConfig(msgspec.Struct, frozen=True, kw_only=True):
    """One tenant's trusted issuer (a row of `tenant_jwt`, plus its group-id names)."""

    tenant_id: str
    issuer: str
    audience: str
    jwks_url: str | None = None
    jwks_file: str | None = None
    hs256_secret: str | None = None
    groups_claim: str = "groups"
    user_claim: str = "sub"
    group_prefix: str = ""
    group_names: Mapping[str, str] = msgspec.field(default_factory=dict)

    @property
    def jwks_source(self) -> str | None:
        return self.jwks_url or self.jwks_file


def looks_like_jwt(credential: str) -> bool:
    """A compact JWS: three base64url parts. API keys (`rk_…`) never contain a dot."""
    return credential.count(".") == 2 and not credential.startswith("rk_")


class JwksSource:
    """The keys at one JWKS URL or file: cached, refreshed when stale or on an unknown `kid`,
    never more often than once per `min_refresh_s`."""

    def __init__(
        self,
        location: str,
        *,
        min_refresh_s: float,
        max_age_s: float,
        timeout_s: float,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.location = location
        self.min_refresh_s = min_refresh_s
        self.max_age_s = max_age_s
        self.timeout_s = timeout_s
        self.client = client
        self.keys: dict[str, jwt.PyJWK] = {}
        self.anonymous: list[jwt.PyJWK] = []  # keys without a `kid`
        self.loaded_at: float | None = None
        self.attempted_at = float("-inf")
        self.fetches = 0
        self._lock = asyncio.Lock()

    async def key(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        found = self._find(kid, alg)
        now = time.monotonic()
        stale = self.loaded_at is None or now - self.loaded_at > self.max_age_s
        if found is not None and not stale:
            return found
        async with self._lock:  # concurrent misses wait for one fetch
            found = self._find(kid, alg)
            now = time.monotonic()
            stale = self.loaded_at is None or now - self.loaded_at > self.max_age_s
            if (found is None or stale) and now - self.attempted_at >= self.min_refresh_s:
                self.attempted_at = now
                await self._refresh(keep_old=self.loaded_at is not None)
                found = self._find(kid, alg)
            elif self.loaded_at is None:  # never read, and the last try was just now
                raise JwksUnavailable("the issuer's JWKS could not be read; retry shortly")
        return found

    def _find(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        """The key named by `kid`; else the one key that fits `alg` among those the JWKS gives
        no id (or, for a token without `kid`, among all)."""
        if kid is not None and kid in self.keys:
            return self.keys[kid]
        pool = self.anonymous if kid is not None else [*self.anonymous, *self.keys.values()]
        usable = [k for k in pool if _fits(k, alg)]
        return usable[0] if len(usable) == 1 else None

    async def _refresh(self, *, keep_old: bool) -> None:
        self.fetches += 1
        try:
            raw = await self._read()
            keys, anonymous = parse_jwks(raw)
        except (OSError, httpx.HTTPError, ValueError) as exc:
            if keep_old:  # the IdP is down: the keys we had still verify
                return
            raise JwksUnavailable(
                f"the issuer's JWKS could not be read ({type(exc).__name__})"
            ) from None
        self.keys, self.anonymous = keys, anonymous
        self.loaded_at = time.monotonic()

    async def _read(self) -> bytes:
        if "://" not in self.location:
            path = Path(self.location)
            return await asyncio.to_thread(path.read_bytes)
        client = self.client or httpx.AsyncClient()
        try:
            async with asyncio.timeout(self.timeout_s):
                resp = await client.get(self.location, follow_redirects=False)
            resp.raise_for_status()
            if len(resp.content) > MAX_JWKS_BYTES:
                raise ValueError("JWKS too large")
            return resp.content
        except TimeoutError:
            raise httpx.TimeoutException("JWKS fetch timed out") from None
        finally:
            if self.client is None:
                await client.aclose()


def parse_jwks(raw: bytes) -> tuple[dict[str, jwt.PyJWK], list[jwt.PyJWK]]:
    """The usable signing keys of a JWKS document (others, e.g. encryption keys, are skipped)."""
    doc = json.loads(raw)
    if not isinstance(doc, dict) or not isinstance(doc.get("keys"), list):
        raise ValueError("not a JWKS document")
    keys: dict[str, jwt.PyJWK] = {}
    anonymous: list[jwt.PyJWK] = []
    for entry in doc["keys"]:
        if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
            continue
        if entry.get("kty") not in ("RSA", "EC"):
            continue  # symmetric keys never come from a JWKS
        try:
            key = jwt.PyJWK(entry)
        except PyJWTError:
            continue
        if hasattr(key.key, "public_key"):  # a JWKS that carries private parts: verify only
            key.key = key.key.public_key()
        kid = entry.get("kid")
        if isinstance(kid, str) and kid:
            keys[kid] = key
        else:
            anonymous.append(key)
    return keys, anonymous


def _fits(key: jwt.PyJWK, alg: str) -> bool:
    """The key is of the algorithm's type (and, for EC, on P-256), and does not name another
    algorithm."""
    data = key._jwk_data
    if data.get("kty") != _KEY_TYPE.get(alg):
        return False
    if alg == "ES256" and data.get("crv") != "P-256":
        return False
    named = data.get("alg")
    return named is None or named == alg


class JwtVerifier:
    """Turns a bearer JWT into a principal of the tenant whose issuer signed it."""

    def __init__(
        self,
        pool: asyncpg.Pool | None,
        *,
        leeway_s: float = 30.0,
        min_refresh_s: float = 30.0,
        jwks_max_age_s: float = 600.0,
        fetch_timeout_s: float = 3.0,
        config_ttl_s: float = 30.0,
        configs: Sequence[JwtConfig] | None = None,
    ) -> None:
        self.pool = pool
        self.leeway_s = leeway_s
        self.min_refresh_s = min_refresh_s
        self.jwks_max_age_s = jwks_max_age_s
        self.fetch_timeout_s = fetch_timeout_s
        self.config_ttl_s = config_ttl_s
        self._by_issuer: dict[str, list[JwtConfig]] = {}
        self._loaded_at = float("-inf")
        self._sources: dict[str, JwksSource] = {}
        self._load_lock = asyncio.Lock()
        self._client: httpx.AsyncClient | None = None
        if configs is not None:
            self._index(configs)
            self._loaded_at = float("inf")

    def invalidate(self) -> None:
        """Forget the tenants' settings (a JWT setting or group name changed somewhere)."""
        if self._loaded_at != float("inf"):
            self._loaded_at = float("-inf")

    def source(self, location: str) -> JwksSource:
        src = self._sources.get(location)
        if src is None:
            if self._client is None and "://" in location:
                self._client = httpx.AsyncClient(
                    timeout=self.fetch_timeout_s, limits=httpx.Limits(max_connections=8)
                )
            src = JwksSource(
                location,
                min_refresh_s=self.min_refresh_s,
                max_age_s=self.jwks_max_age_s,
                timeout_s=self.fetch_timeout_s,
                client=self._client,
            )
            self._sources[location] = src
        return src

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()

    async def principal(self, token: str, tenant_hint: str | None = None) -> Principal:
        if len(token) > MAX_TOKEN_BYTES:
            raise reject("malformed_token", "the bearer token is too long")
        try:
            header = jwt.get_unverified_header(token)
            unverified = jwt.decode(token, options={"verify_signature": False})
        except PyJWTError:
            raise reject("malformed_token", "the bearer token is not a well-formed JWT") from None
        alg = header.get("alg")
        if alg not in ALGORITHMS:
            raise reject("alg_not_allowed", "the token's algorithm is not accepted")
        config = await self._config_for(unverified, tenant_hint)
        key = await self._key_for(config, header, alg)
        claims = self._verify(token, key, alg, config)
        return self._principal(config, claims)

    async def _config_for(self, unverified: dict[str, Any], tenant_hint: str | None) -> JwtConfig:
        await self._ensure_loaded()
        iss = unverified.get("iss")
        if not isinstance(iss, str) or not iss:
            raise reject("missing_claim", "the token has no `iss` claim")
        candidates = self._by_issuer.get(iss, [])
        if tenant_hint is not None:
            candidates = [c for c in candidates if c.tenant_id == tenant_hint]
        if not candidates:
            raise reject("wrong_issuer", "no tenant trusts the token's issuer")
        if len(candidates) == 1:
            return candidates[0]
        aud = unverified.get("aud")
        auds = {aud} if isinstance(aud, str) else set(aud) if isinstance(aud, list) else set()
        matching = [c for c in candidates if c.audience in auds]
        if not matching:
            raise reject("wrong_audience", "the token is not for this service's audience")
        if len(matching) > 1:
            raise reject(
                "ambiguous_tenant",
                "several tenants trust this issuer and audience: send `X-Ragline-Tenant`",
            )
        return matching[0]

    async def _key_for(self, config: JwtConfig, header: dict[str, Any], alg: str) -> Any:
        if alg == "HS256":
            if not config.hs256_secret:
                raise reject("alg_not_allowed", "HS256 tokens are not accepted for this tenant")
            return config.hs256_secret
        location = config.jwks_source
        if location is None:
            raise reject("alg_not_allowed", "the token's algorithm is not accepted")
        kid = header.get("kid")
        if kid is not None and (not isinstance(kid, str) or len(kid) > MAX_NAME):
            raise reject("unknown_kid", "the token's key id is not one of the issuer's keys")
        jwk = await self.source(location).key(kid, alg)
        if jwk is None:
            raise reject("unknown_kid", "the token's key id is not one of the issuer's keys")
        if not _fits(jwk, alg):
            raise reject("alg_not_allowed", "the token's algorithm does not match its key")
        return jwk.key

    def _verify(self, token: str, key: Any, alg: str, config: JwtConfig) -> dict[str, Any]:
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=config.audience,
                issuer=config.issuer,
                leeway=self.leeway_s,
                options={"require": ["exp", "iss", "aud"]},
            )
        except ExpiredSignatureError:
            raise reject("token_expired", "the token has expired") from None
        except ImmatureSignatureError:
            raise reject("token_not_yet_valid", "the token is not valid yet (nbf/iat)") from None
        except InvalidAudienceError:
            raise reject("wrong_audience", "the token is not for this tenant's audience") from None
        except InvalidIssuerError:
            raise reject("wrong_issuer", "the token's issuer is not this tenant's") from None
        except InvalidSignatureError:
            raise reject("bad_signature", "the token's signature does not verify") from None
        except MissingRequiredClaimError as exc:
            raise reject("missing_claim", f"the token has no `{exc.claim}` claim") from None
        except PyJWTError:
            raise reject("invalid_token", "the token could not be verified") from None
        return claims

    def _principal(self, config: JwtConfig, claims: dict[str, Any]) -> Principal:
        user = claims.get(config.user_claim)
        if not isinstance(user, str) or not user.strip() or len(user) > MAX_NAME:
            raise reject("missing_claim", f"the token has no usable `{config.user_claim}` claim")
        claim_names = claims.get("_claim_names")
        overage = isinstance(claim_names, dict) and (
            config.groups_claim in claim_names or "groups" in claim_names
        )
        if overage or claims.get("hasgroups") is True:
            raise reject(
                "groups_overage",
                "the identity provider sent a reference instead of the user's groups (too many"
                " groups): configure it to emit only the groups Ragline needs",
            )
        raw = claims.get(config.groups_claim)
        if raw is None:
            values: list[Any] = []
        elif isinstance(raw, str):
            values = [raw]  # some IdPs send one group as a string: it is that one group
        elif isinstance(raw, list):
            values = raw
        else:
            raise reject("invalid_groups_claim", "the token's groups claim is not a list")
        if len(values) > MAX_GROUPS or any(
            not isinstance(v, str) or not v.strip() or len(v) > MAX_NAME for v in values
        ):
            raise reject("invalid_groups_claim", "the token's groups claim has invalid entries")
        groups = {
            config.group_prefix + config.group_names.get(v.strip(), v.strip()) for v in values
        }
        return Principal(
            tenant_id=config.tenant_id,
            user_id=user.strip(),
            groups=tuple(sorted(groups)),
            scopes=frozenset({"query"}),
            key_id="",
            via="jwt",
        )

    async def _ensure_loaded(self) -> None:
        if self.pool is None or time.monotonic() - self._loaded_at < self.config_ttl_s:
            return
        async with self._load_lock:
            if time.monotonic() - self._loaded_at < self.config_ttl_s:
                return
            async with self.pool.acquire() as conn:
                configs = await load_configs(conn)
            self._index(configs)
            self._loaded_at = time.monotonic()

    def _index(self, configs: Sequence[JwtConfig]) -> None:
        by_issuer: dict[str, list[JwtConfig]] = {}
        for c in configs:
            by_issuer.setdefault(c.issuer, []).append(c)
        self._by_issuer = by_issuer


async def load_configs(conn: asyncpg.Connection) -> list[JwtConfig]:
    rows = await conn.fetch(
        "SELECT tenant_id, issuer, audience, jwks_url, jwks_file, hs256_secret, groups_claim,"
        " user_claim, group_prefix FROM tenant_jwt"
    )
    names: dict[str, dict[str, str]] = {}
    for r in await conn.fetch("SELECT tenant_id, group_id, group_name FROM tenant_group_names"):
        names.setdefault(r["tenant_id"], {})[r["group_id"]] = r["group_name"]
    return [
        JwtConfig(
            tenant_id=r["tenant_id"],
            issuer=r["issuer"],
            audience=r["audience"],
            jwks_url=r["jwks_url"],
            jwks_file=r["jwks_file"],
            hs256_secret=r["hs256_secret"],
            groups_claim=r["groups_claim"],
            user_claim=r["user_claim"],
            group_prefix=r["group_prefix"],
            group_names=names.get(r["tenant_id"], {}),
        )
        for r in rows
    ]
