"""A lean HTTP/1.1 client for load generation: keep-alive connections, chunked SSE read just far
enough to time the first token. httpx costs about a millisecond of CPU per request, which on two
shared cores would distort the very latencies measured here.
"""

from __future__ import annotations

import asyncio
import time

import msgspec


class Result(msgspec.Struct, kw_only=True):
    status: int
    ttft_ms: float  # time to the first `token` event (or to the whole response if none)
    total_ms: float
    cache: str = ""
    body: bytes = b""


class StaleConnection(ConnectionError):
    """The server had closed this keep-alive connection before the request was sent."""


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer


class Client:
    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._idle: list[_Conn] = []
        self.stale = 0  # keep-alive connections found closed by the server (request resent)

    async def _conn(self, fresh: bool = False) -> _Conn:
        while self._idle and not fresh:
            conn = self._idle.pop()
            if not conn.writer.is_closing():
                return conn
        reader, writer = await asyncio.open_connection(self.host, self.port)
        return _Conn(reader, writer)

    async def close(self) -> None:
        for conn in self._idle:
            conn.writer.close()
        self._idle.clear()

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> Result:
        t0 = time.perf_counter()
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}", "", ""]
        request = "\r\n".join(head).encode() + body
        for attempt in range(2):
            conn = await self._conn(fresh=attempt > 0)
            conn.writer.write(request)
            try:
                result = await self._read(conn, t0)
            except StaleConnection:
                conn.writer.close()
                self.stale += 1
                if attempt == 0:
                    continue  # the server closed an idle keep-alive connection: the request
                raise  # never reached it, so sending it again on a new one is safe
            except BaseException:
                conn.writer.close()
                raise
            self._idle.append(conn)
            return result
        raise AssertionError("unreachable")

    async def _read(self, conn: _Conn, t0: float) -> Result:
        status_line = await conn.reader.readline()
        if not status_line:
            raise StaleConnection("closed before the status line")
        status = int(status_line.split()[1])
        length, chunked, closing = -1, False, False
        while True:
            line = await conn.reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value.lower():
                chunked = True
            elif name == "connection" and value.lower() == "close":
                closing = True
        ttft: float | None = None
        body = bytearray()
        if chunked:
            # Read whatever has arrived and de-chunk once at the end: one read per burst keeps
            # the client's own CPU (and so its timing error) small at hundreds of requests/s.
            raw = bytearray()
            while not raw.endswith(LAST_CHUNK):
                data = await conn.reader.read(65536)
                if not data:
                    raise ConnectionError("connection closed mid-response")
                raw += data
                if ttft is None and b"event: token" in raw:
                    ttft = (time.perf_counter() - t0) * 1000
            body = _dechunk(raw)
        elif length >= 0:
            body += await conn.reader.readexactly(length)
        total = (time.perf_counter() - t0) * 1000
        if closing:
            conn.writer.close()
        return Result(
            status=status,
            ttft_ms=ttft if ttft is not None else total,
            total_ms=total,
            cache=_cache_of(bytes(body)),
            body=bytes(body),
        )


LAST_CHUNK = b"\r\n0\r\n\r\n"
"""The end of a chunked body (SSE payloads are JSON, so a raw CRLF only ever frames chunks)."""


def _dechunk(raw: bytes | bytearray) -> bytearray:
    body, i = bytearray(), 0
    while True:
        eol = raw.index(b"\r\n", i)
        size = int(raw[i:eol].split(b";")[0], 16)
        if size == 0:
            return body
        body += raw[eol + 2 : eol + 2 + size]
        i = eol + 2 + size + 2


def _cache_of(body: bytes) -> str:
    marker = b'"cache":"'
    i = body.find(marker)
    if i < 0:
        return ""
    j = body.find(b'"', i + len(marker))
    return body[i + len(marker) : j].decode()


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return round(ordered[k], 3)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "p99": percentile(values, 99),
        "max": round(max(values), 3) if values else float("nan"),
    }
