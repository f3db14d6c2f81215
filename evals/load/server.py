"""A Ragline server under test: its own database, state directory and index of the sample
corpus, served by `ragline serve` in a child process (as deployed), stopped and cleaned after.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import asyncpg

ROOT = Path(__file__).resolve().parents[2]
ADMIN_URL = os.environ.get(
    "RAGLINE_BENCH_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def machine() -> dict[str, Any]:
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{os.cpu_count()} cores, no GPU, {platform.machine()}",
        "python": platform.python_version(),
        "loadavg_before": [round(x, 2) for x in os.getloadavg()],
    }


def write_result(path: Path, data: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    data["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return path


class Server:
    """Set up tenants and keys, index the sample corpus, serve with extra `RAGLINE_*` env."""

    def __init__(self, env: dict[str, str], tenants: dict[str, list[str]]) -> None:
        self.extra_env = env
        self.tenants = tenants  # tenant -> users (one key each)
        self.keys: dict[str, str] = {}
        self.port = free_port()
        self.db = f"ragline_bench_{secrets.token_hex(4)}"
        self.tmp = Path(tempfile.mkdtemp(prefix="ragline-bench-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def env(self) -> dict[str, str]:
        base, _, _ = ADMIN_URL.rpartition("/")
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("RAGLINE_")}
        return {
            **inherited,
            "HF_HUB_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
            "RAGLINE_DATABASE_URL": f"{base}/{self.db}",
            "RAGLINE_STORAGE_STATE_DIR": str(self.tmp / "state"),
            **self.extra_env,
        }

    def ragline(self, *args: str) -> str:
        exe = str(Path(sys.executable).with_name("ragline"))
        out = subprocess.run(
            [exe, *args], env=self.env, check=True, capture_output=True, text=True, timeout=600
        )
        return out.stdout

    async def start(self) -> None:
        admin = await asyncpg.connect(ADMIN_URL)
        await admin.execute(f'CREATE DATABASE "{self.db}"')
        await admin.close()
        try:
            await asyncio.to_thread(self._launch)
        except BaseException:
            await self.stop()
            raise

    def _launch(self) -> None:
        for tenant, users in self.tenants.items():
            self.ragline("tenants", "create", tenant)
            self.ragline(
                "index",
                "add",
                str(ROOT / "data" / "sample"),
                "--tenant",
                tenant,
                "--public",
                "--json",
            )
            for user in users:
                key = json.loads(
                    self.ragline("keys", "create", "--tenant", tenant, "--user", user, "--json")
                )
                self.keys[f"{tenant}/{user}"] = key["key"]
        exe = str(Path(sys.executable).with_name("ragline"))
        self.proc = subprocess.Popen(
            [exe, "serve", "--port", str(self.port)],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=open(self.tmp / "server.log", "wb"),  # noqa: SIM115
            start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), 0.2),
            ):
                return
            if self.proc.poll() is not None:
                raise RuntimeError((self.tmp / "server.log").read_text()[-2000:])
            time.sleep(0.2)
        raise RuntimeError("server did not start in 120 s")

    async def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        admin = await asyncpg.connect(ADMIN_URL)
        await admin.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')
        await admin.close()
        shutil.rmtree(self.tmp, ignore_errors=True)
