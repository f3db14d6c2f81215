"""A website as a source: its pages by sitemap, or by a crawl that stays on the start URL's
host and under its path.

Polite by default: robots.txt is honoured (for Ragline's user agent, its Crawl-delay too),
requests are spaced by `delay` seconds, and a crawl stops at `max_pages`. The main text of each
page is extracted by trafilatura (navigation, headers and footers dropped), as for local HTML
files. A sitemap run
asks for each page conditionally (`If-None-Match`, `If-Modified-Since`), so unchanged pages are
not downloaded again; a crawl fetches pages to find their links, and unchanged ones are still
not re-embedded (same content hash). A page links to its own URL.
"""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from collections import deque
from html.parser import HTMLParser
from pathlib import PurePosixPath
from urllib.parse import urldefrag, urljoin, urlparse
from urllib.robotparser import RobotFileParser

import httpx

from indexing.readers import SUPPORTED
from indexing.sources.remote_sync import Fetched, RemoteObject, selected
from service.db.sources import ObjectState, SourceRow

USER_AGENT = "ragline-indexer/0.1 (+https://github.com/ragline)"
HTML_TYPES = ("text/html", "application/xhtml+xml")
_SM = "{http://www.sitemaps.org/schemas/sitemap/0.9}"
_SKIP = re.compile(r"\.(png|jpe?g|gif|svg|webp|ico|css|js|zip|gz|mp4|mp3|woff2?)$", re.I)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            href = dict(attrs).get("href")
            if href:
                self.hrefs.append(href)


class WebFetcher:
    def __init__(self, src: SourceRow, client: httpx.Client | None = None) -> None:
        self.src = src
        opts = src.options
        self.mode = str(opts.get("mode") or "crawl")
        self.start = src.root
        u = urlparse(self.start)
        self.scheme, self.host = u.scheme, u.netloc
        base_path = u.path if self.mode == "crawl" else "/"
        self.base_path = base_path if base_path.endswith("/") else base_path.rsplit("/", 1)[0] + "/"
        self.delay = float(opts.get("delay", 0.5))
        self.max_pages = int(opts.get("max_pages", 500))
        self.client = client or httpx.Client(
            headers={"User-Agent": USER_AGENT}, timeout=30.0, follow_redirects=True
        )
        self.origin_prefix = f"{self.scheme}://{self.host}{self.base_path}"
        self._last = 0.0
        self._robots: RobotFileParser | None = None
        self._bodies: dict[str, Fetched] = {}

    # ------------------------------------------------------------------ politeness
    def _get(self, url: str, headers: dict[str, str] | None = None) -> httpx.Response:
        wait = self._last + self.delay - time.monotonic()
        if wait > 0:
            time.sleep(wait)
        try:
            return self.client.get(url, headers=headers or {})
        finally:
            self._last = time.monotonic()

    def allowed(self, url: str) -> bool:
        if self._robots is None:
            robots = RobotFileParser()
            resp = self._get(f"{self.scheme}://{self.host}/robots.txt")
            if resp.status_code == 200:
                robots.parse(resp.text.splitlines())
            elif resp.status_code in (401, 403):  # as urllib.robotparser reads them
                robots.parse(["User-agent: *", "Disallow: /"])
            else:
                robots.parse([])
            self._robots = robots
            asked = robots.crawl_delay(USER_AGENT)
            if asked is not None:  # the site's Crawl-delay, if longer than ours
                self.delay = max(self.delay, float(asked))
        return self._robots.can_fetch(USER_AGENT, url)

    # ------------------------------------------------------------------ identity
    def _mine(self, url: str) -> bool:
        u = urlparse(url)
        return (
            u.scheme in ("http", "https")
            and u.netloc == self.host
            and u.path.startswith(self.base_path)
            and not u.query
            and not _SKIP.search(u.path)
        )

    def _object(self, url: str, last_modified: str = "") -> RemoteObject | None:
        path = urlparse(url).path
        rel = path[len(self.base_path) :].strip("/") or "index"
        if not selected(rel, self.src.options):
            return None
        suffix = PurePosixPath(path).suffix.lower()
        return RemoteObject(
            key=url,
            doc_id=rel,
            suffix=suffix if suffix in SUPPORTED else ".html",
            last_modified=last_modified,
            link=url,
        )

    # ------------------------------------------------------------------ listing
    def listing(self) -> list[RemoteObject]:
        return self._sitemap() if self.mode == "sitemap" else self._crawl()

    def _sitemap(self) -> list[RemoteObject]:
        out: dict[str, RemoteObject] = {}
        queue, seen = deque([self.start]), set[str]()
        while queue:
            sm = queue.popleft()
            if sm in seen or not self.allowed(sm):
                continue
            seen.add(sm)
            resp = self._get(sm)
            resp.raise_for_status()
            root = ET.fromstring(resp.content)
            for child in root.findall(f"{_SM}sitemap/{_SM}loc"):
                loc = (child.text or "").strip()
                if urlparse(loc).netloc == self.host:
                    queue.append(loc)
            for url_el in root.findall(f"{_SM}url"):
                loc = (url_el.findtext(f"{_SM}loc") or "").strip()
                url = urldefrag(loc)[0]
                if not self._mine(url) or url in out or not self.allowed(url):
                    continue
                obj = self._object(url, (url_el.findtext(f"{_SM}lastmod") or "").strip())
                if obj is not None:
                    out[url] = obj
        return list(out.values())

    def _crawl(self) -> list[RemoteObject]:
        out: dict[str, RemoteObject] = {}
        queue, seen = deque([urldefrag(self.start)[0]]), set[str]()
        while queue and len(seen) < self.max_pages:
            url = queue.popleft()
            if url in seen or not self._mine(url) or not self.allowed(url):
                continue
            seen.add(url)
            resp = self._get(url)
            if resp.status_code != 200:
                continue
            url = urldefrag(str(resp.url))[0]
            ctype = resp.headers.get("content-type", "").split(";")[0].strip()
            if not self._mine(url):
                continue
            obj = self._object(url)
            if obj is not None:
                out[url] = obj
                self._bodies[url] = _fetched(resp)
            if ctype in HTML_TYPES:
                parser = _Links()
                parser.feed(resp.text)
                for href in parser.hrefs:
                    nxt = urldefrag(urljoin(url, href))[0]
                    if nxt not in seen and self._mine(nxt):
                        queue.append(nxt)
        return list(out.values())

    # ------------------------------------------------------------------ fetching
    def fetch(self, obj: RemoteObject, known: ObjectState | None) -> Fetched | None:
        body = self._bodies.pop(obj.key, None)
        if body is not None:  # the crawl already downloaded it
            return body
        headers = {}
        if known is not None:
            if known.etag:
                headers["If-None-Match"] = known.etag
            if known.last_modified:
                headers["If-Modified-Since"] = known.last_modified
        if not self.allowed(obj.key):
            raise PermissionError("disallowed by robots.txt")
        resp = self._get(obj.key, headers)
        if resp.status_code == 304:
            return None
        resp.raise_for_status()
        return _fetched(resp)

    def origin(self, obj: RemoteObject) -> str:
        return obj.key


def _fetched(resp: httpx.Response) -> Fetched:
    ctype = resp.headers.get("content-type", "").split(";")[0].strip()
    suffix = {"application/pdf": ".pdf", "text/markdown": ".md", "text/plain": ".txt"}.get(ctype)
    return Fetched(
        data=resp.content,
        etag=resp.headers.get("etag", ""),
        last_modified=resp.headers.get("last-modified", ""),
        suffix=suffix or (".html" if ctype in HTML_TYPES else ""),
    )
