"""The web source's politeness and identity rules, over httpx's in-memory transport."""

from __future__ import annotations

import httpx
import pytest

from indexing.sources.web import WebFetcher
from service.db.sources import SourceRow

pytestmark = pytest.mark.unit


def _fetcher(robots: str, mode: str = "crawl") -> WebFetcher:
    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/robots.txt":
            return httpx.Response(200, text=robots)
        return httpx.Response(404)

    src = SourceRow(tenant_id="t", name="s", kind="web", root="https://h.example/docs/",
                    options={"mode": mode, "delay": 0})  # fmt: skip
    return WebFetcher(src, client=httpx.Client(transport=httpx.MockTransport(handler)))


def test_robots_rules_and_crawl_delay() -> None:
    f = _fetcher("User-agent: *\nCrawl-delay: 2\nDisallow: /docs/private/\n")
    assert f.allowed("https://h.example/docs/a.html")
    assert not f.allowed("https://h.example/docs/private/b.html")
    assert f.delay == 2.0


def test_a_crawl_stays_on_its_host_and_path() -> None:
    f = _fetcher("")
    assert f._mine("https://h.example/docs/a/b")
    assert not f._mine("https://h.example/pricing")
    assert not f._mine("https://other.example/docs/a")
    assert not f._mine("https://h.example/docs/logo.png")
    assert not f._mine("https://h.example/docs/search?q=x")
    obj = f._object("https://h.example/docs/")
    assert obj is not None and (obj.doc_id, obj.suffix, obj.link) == (
        "index",
        ".html",
        "https://h.example/docs/",
    )
