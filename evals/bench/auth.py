"""What authenticating one request costs on the request path, per credential: a cached API key,
and a JWT verified from scratch (RS256, ES256) by `JwtVerifier` with its JWKS already read — the
work every token request does, since tokens are never cached.

    python -m evals.bench.auth --n 5000 --out bench/results/auth.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

from service.api.auth import KeyCache
from service.auth.jwt import JwtConfig, JwtVerifier
from service.db.keys import KeyGrant, hash_key
from service.identity import Principal


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(n: int) -> dict[str, Any]:

    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_key = ec.generate_private_key(ec.SECP256R1())
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jwks.json"
        keys = [
            RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True) | {"kid": "r"},
            ECAlgorithm.to_jwk(ec_key.public_key(), as_dict=True) | {"kid": "e"},
        ]
        path.write_text(json.dumps({"keys": keys}))
        config = JwtConfig(tenant_id="t", issuer="https://i", audience="a", jwks_file=str(path))
        verifier = JwtVerifier(None, configs=[config])
        now = int(time.time())
        claims = {"iss": "https://i", "aud": "a", "sub": "u", "exp": now + 3600,
                  "groups": [f"g{i}" for i in range(20)]}  # fmt: skip
        tokens = {
            "jwt_rs256": jwt.encode(claims, rsa_key, algorithm="RS256", headers={"kid": "r"}),
            "jwt_es256": jwt.encode(claims, ec_key, algorithm="ES256", headers={"kid": "e"}),
        }
        out: dict[str, Any] = {}
        for name, tok in tokens.items():
            await verifier.principal(tok)  # reads the JWKS once
            times = []
            for _ in range(n):
                t0 = time.perf_counter()
                await verifier.principal(tok)
                times.append((time.perf_counter() - t0) * 1e6)
            out[name] = times
        cache = KeyCache(ttl_s=3600)
        key = "rk_bench_" + "x" * 43
        cache.put(hash_key(key), KeyGrant(principal=Principal(tenant_id="t", user_id="u")))
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            cache.grant(hash_key(key))
            times.append((time.perf_counter() - t0) * 1e6)
        out["api_key_cached"] = times
    return {
        name: {
            "n": n,
            "p50_us": round(statistics.median(t), 1),
            "p99_us": round(_pct(t, 0.99), 1),
        }
        for name, t in out.items()
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--n", type=int, default=5000)
    p.add_argument("--out", type=Path)
    args = p.parse_args(argv)
    results = asyncio.run(run(args.n))
    text = json.dumps(
        {"bench": "auth", "at": time.strftime("%Y-%m-%dT%H:%M:%SZ"), "results": results}, indent=2
    )
    print(text)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
