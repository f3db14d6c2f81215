"""Markdown with optional YAML front matter (`title`, `acl`, `lang`, `metadata` or flat keys)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import yaml

from indexing.readers.common import EmptyDocument, acl_value
from service.ingest.chunking import strip_anchor
from service.ingest.documents import SourceDoc
from service.text.lang import detect_lang
from service.text.uris import is_url


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    try:
        meta = yaml.safe_load(text[3:end]) or {}
    except yaml.YAMLError as exc:
        raise ValueError(f"front matter is not valid YAML: {str(exc).splitlines()[0]}") from None
    if not isinstance(meta, dict):
        raise ValueError("front matter is not a mapping")
    rest = text[end + 4 :]
    return meta, rest.split("\n", 1)[1] if "\n" in rest else ""


def _json_safe(value: Any) -> Any:
    """YAML turns `2024-05-01` into a date: keep it as ISO 8601 text (a datetime field)."""
    if isinstance(value, dt.datetime):
        return (value if value.tzinfo else value.replace(tzinfo=dt.UTC)).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_safe(v) for v in value]
    return value


def first_heading(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return strip_anchor(line[2:])
    return ""


def read_markdown(path: Path, doc_id: str) -> SourceDoc:
    meta, body = split_front_matter(path.read_text(encoding="utf-8"))
    title = str(meta.pop("title", "") or first_heading(body) or path.stem)
    acl = acl_value(meta.pop("acl", None), "front matter")
    lang = str(meta.pop("lang", "") or detect_lang(body))
    if not body.strip():
        raise EmptyDocument("empty (no text after the front matter)")
    url = str(meta.pop("url", "") or "")
    if url and not is_url(url):
        raise ValueError(f"front matter: url must start with https:// or http://, got {url!r}")
    metadata = meta.pop("metadata", None) or meta
    if not isinstance(metadata, dict):
        raise ValueError("front matter: metadata must be a mapping")
    return SourceDoc(
        doc_id=doc_id,
        text=body,
        title=title,
        source_uri=url,
        lang=lang,
        acl=acl,
        metadata=_json_safe(dict(metadata)),
        markdown=True,
        origin=str(path),
        anchors=True,
    )
