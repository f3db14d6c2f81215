"""A website as a source (issue 17), against a local HTTP server the test starts: by sitemap
(robots.txt honoured, pages asked for conditionally so unchanged ones answer 304, main text
extracted, each page linking to its URL) and by a same-host crawl."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from service.index.edge import EdgeIndex
from tests.helpers import ragline

pytestmark = pytest.mark.integration

PAGE = """<!doctype html><html lang="en"><head><title>{title}</title></head><body>
<nav><ul><li><a href="/docs/">Home</a></li><li><a href="/pricing">Pricing plans</a></li>
<li><a href="/jobs">Careers at Acme</a></li></ul></nav>
<main><article><h1>{title}</h1><p>{body}</p>
<h2>Details</h2><p>{detail}</p>{links}</article></main>
<footer>Copyright 2026 Acme Corp. Privacy policy and cookie settings.</footer></body></html>"""


class Site:
    def __init__(self) -> None:
        self.pages: dict[str, tuple[str, bytes]] = {}
        self.log: list[tuple[str, int, str]] = []  # path, status, If-None-Match

    def page(self, path: str, title: str, body: str, links: str = "") -> None:
        html = PAGE.format(
            title=title,
            body=body,
            detail=f"The harbour office answers questions about {title.lower()} on weekdays between"
            " nine and five, and the notice board by the pier lists every change a week ahead.",
            links=links,
        )
        self.pages[path] = ("text/html; charset=utf-8", html.encode())

    def requested(self, path: str) -> list[tuple[int, str]]:
        return [(status, tag) for p, status, tag in self.log if p == path]


@pytest.fixture
def site() -> Iterator[tuple[str, Site]]:
    state = Site()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            found = state.pages.get(self.path)
            tag = self.headers.get("If-None-Match", "")
            if found is None:
                state.log.append((self.path, 404, tag))
                self.send_response(404)
                self.end_headers()
                return
            ctype, body = found
            etag = '"' + hashlib.sha1(body).hexdigest() + '"'
            if tag == etag:
                state.log.append((self.path, 304, tag))
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            state.log.append((self.path, 200, tag))
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("ETag", etag)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", state
    finally:
        server.shutdown()
        server.server_close()


def robots(state: Site) -> None:
    text = b"User-agent: *\nDisallow: /docs/private/\n"
    state.pages["/robots.txt"] = ("text/plain", text)


async def test_sitemap_site_syncs_conditionally(
    site: tuple[str, Site], cli_env: Path, embedder: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = site
    robots(state)
    state.page("/docs/ferry.html", "Ferry", "The walrus ferry leaves the harbour at seven.")
    state.page("/docs/guide/tides", "Tides", "High tide at the harbour is at noon.")
    state.page("/docs/private/keys.html", "Keys", "The vault combination is secret.")
    sitemap = "".join(
        f"<url><loc>{url}{p}</loc></url>"
        for p in ("/docs/ferry.html", "/docs/guide/tides", "/docs/private/keys.html",
                  "/docs/missing.html")
    )  # fmt: skip
    state.pages["/sitemap.xml"] = (
        "application/xml",
        f'<?xml version="1.0"?><urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">'
        f"{sitemap}</urlset>".encode(),
    )
    assert (await ragline(capsys, "tenants", "create", "web"))[0] == 0
    code, _, err = await ragline(capsys, "sources", "add", "site", "--tenant", "web",
                                 "--sitemap", f"{url}/sitemap.xml", "--public",
                                 "--delay", "0")  # fmt: skip
    assert code == 0, err

    code, runs, _ = await ragline(capsys, "sources", "sync", "--tenant", "web", "--json")
    s = runs[0]["summary"]
    assert (s["added"], s["failed"]) == (2, 1)  # the page in the sitemap that is not there
    assert s["errors"][0]["path"].endswith("/docs/missing.html")
    assert state.requested("/docs/private/keys.html") == []  # robots.txt
    code, ls, _ = await ragline(capsys, "index", "ls", "--tenant", "web", "--json")
    assert sorted(r["doc_id"] for r in ls) == ["docs/ferry.html", "docs/guide/tides"]

    # unchanged pages answer 304 to the conditional request: nothing downloaded or embedded
    state.page("/docs/guide/tides", "Tides", "High tide at the harbour is now at one.")
    code, runs, _ = await ragline(capsys, "sources", "sync", "--tenant", "web", "--json")
    s = runs[0]["summary"]
    assert (s["unchanged"], s["updated"], s["added"]) == (1, 1, 0)
    ferry = state.requested("/docs/ferry.html")
    assert ferry[0][0] == 200 and ferry[-1][0] == 304 and ferry[-1][1]

    index = await asyncio.to_thread(
        EdgeIndex.open, cli_env / "state" / "index" / "ragline_chunks", dim=embedder.dim
    )
    try:
        chunks = await index.document_chunks("web", "docs/ferry.html")
        tides = await index.document_chunks("web", "docs/guide/tides")
    finally:
        await index.close()
    text = " ".join(c.text for c in chunks)
    assert "walrus ferry" in text and "Careers at Acme" not in text and "Copyright" not in text
    assert {c.source_uri.split("#")[0] for c in chunks} == {f"{url}/docs/ferry.html"}
    assert "now at one" in " ".join(c.text for c in tides)


async def test_crawl_stays_on_the_site(
    site: tuple[str, Site], cli_env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, state = site
    robots(state)
    state.page(
        "/docs/",
        "Docs",
        "Start here for the harbour handbook.",
        '<a href="a.html">A</a> <a href="/docs/b.html#part">B</a> <a href="/pricing">P</a>'
        ' <a href="https://elsewhere.example.com/x">X</a> <a href="private/k.html">K</a>',
    )
    state.page("/docs/a.html", "Anchors", "Anchors are stored in the east shed.")
    state.page("/docs/b.html", "Buoys", "Buoys are painted every spring.", '<a href="a.html">A</a>')
    state.page("/docs/private/k.html", "Keys", "Secret.")
    state.page("/pricing", "Pricing", "Outside the start path.")
    assert (await ragline(capsys, "tenants", "create", "crawl"))[0] == 0
    code, _, _ = await ragline(capsys, "sources", "add", "hb", "--tenant", "crawl",
                               "--crawl", f"{url}/docs/", "--public", "--delay", "0")  # fmt: skip
    assert code == 0
    code, runs, _ = await ragline(capsys, "sources", "sync", "--tenant", "crawl", "--json")
    assert code == 0 and runs[0]["summary"]["added"] == 3
    code, ls, _ = await ragline(capsys, "index", "ls", "--tenant", "crawl", "--json")
    assert sorted(r["doc_id"] for r in ls) == ["a.html", "b.html", "index"]
    assert state.requested("/pricing") == [] and state.requested("/docs/private/k.html") == []
    assert len(state.requested("/docs/a.html")) == 1  # linked twice, fetched once

    # a page gone from the site is removed with --prune
    del state.pages["/docs/b.html"]
    code, runs, _ = await ragline(capsys, "sources", "sync", "--tenant", "crawl", "--prune",
                                  "--json")  # fmt: skip
    s = runs[0]["summary"]
    assert code == 0 and (s["removed"], s["unchanged"]) == (1, 2)
