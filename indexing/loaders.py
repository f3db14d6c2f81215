"""Loaders: Markdown (front matter), plain text and JSONL records, by file extension.

Document ids are the path relative to the PATH argument (files) or the record id (JSONL).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import yaml

from indexing.chunking import strip_anchor
from indexing.documents import LoadError, SourceDoc
from service.identity import is_identity
from service.text.tokenize import script_of

MARKDOWN = {".md", ".markdown"}
TEXT = {".txt", ".text"}
JSONL = {".jsonl", ".ndjson"}
SUPPORTED = MARKDOWN | TEXT | JSONL


def guess_lang(text: str) -> str:
    return {"latin": "en", "devanagari": "hi"}.get(script_of(text), "und")


def _acl(value: Any, where: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and is_identity(v) for v in value):
        raise ValueError(f"{where}: acl must be a list of 'public', 'user:<id>' or 'group:<name>'")
    return list(value)


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    meta = yaml.safe_load(text[3:end]) or {}
    if not isinstance(meta, dict):
        raise ValueError("front matter is not a mapping")
    rest = text[end + 4 :]
    return meta, rest.split("\n", 1)[1] if "\n" in rest else ""


def _first_heading(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("# "):
            return strip_anchor(line[2:])
    return ""


def load_markdown(path: Path, doc_id: str) -> SourceDoc:
    meta, body = split_front_matter(path.read_text(encoding="utf-8"))
    title = str(meta.pop("title", "") or _first_heading(body) or path.stem)
    acl = _acl(meta.pop("acl", None), "front matter")
    lang = str(meta.pop("lang", "") or guess_lang(body))
    metadata = meta.pop("metadata", None) or meta
    return SourceDoc(
        doc_id=doc_id,
        text=body,
        title=title,
        source_uri=str(path),
        lang=lang,
        acl=acl,
        metadata=dict(metadata),
        markdown=True,
    )


def load_text(path: Path, doc_id: str) -> SourceDoc:
    text = path.read_text(encoding="utf-8")
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), path.stem)
    return SourceDoc(
        doc_id=doc_id, text=text, title=first[:120], source_uri=str(path), lang=guess_lang(text)
    )


class _Record(msgspec.Struct, kw_only=True):
    id: str | int | None = None
    _id: str | int | None = msgspec.field(default=None, name="_id")
    title: str = ""
    text: str
    acl: list[str] | str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    lang: str = ""
    source_uri: str = ""


def load_jsonl(path: Path) -> Iterator[SourceDoc | LoadError]:
    with path.open("rb") as fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = msgspec.json.decode(line, type=_Record)
                rid = rec.id if rec.id is not None else rec._id
                if rid is None or str(rid) == "":
                    raise ValueError("record has no 'id' or '_id'")
                yield SourceDoc(
                    doc_id=str(rid),
                    text=rec.text,
                    title=rec.title,
                    source_uri=rec.source_uri or f"{path}#{rid}",
                    lang=rec.lang or guess_lang(rec.title + " " + rec.text),
                    acl=_acl(rec.acl, "record"),
                    metadata=rec.metadata,
                )
            except (msgspec.DecodeError, ValueError) as exc:
                yield LoadError(path=str(path), line=n, reason=str(exc))


def iter_files(root: Path) -> Iterator[tuple[Path, str]]:
    """(file, doc id) for every supported file under root (or root itself)."""
    if root.is_file():
        yield root, root.name
        return
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.suffix.lower() in SUPPORTED:
            yield path, path.relative_to(root).as_posix()


def load_path(root: Path) -> Iterator[SourceDoc | LoadError]:
    if not root.exists():
        yield LoadError(path=str(root), reason="no such file or directory")
        return
    for path, doc_id in iter_files(root):
        suffix = path.suffix.lower()
        try:
            if suffix in JSONL:
                yield from load_jsonl(path)
            elif suffix in MARKDOWN:
                yield load_markdown(path, doc_id)
            elif suffix in TEXT:
                yield load_text(path, doc_id)
            else:
                yield LoadError(path=str(path), reason=f"unsupported file type {suffix!r}")
        except UnicodeDecodeError:
            yield LoadError(path=str(path), reason="not UTF-8 text")
        except (OSError, ValueError, yaml.YAMLError) as exc:
            yield LoadError(path=str(path), reason=str(exc).splitlines()[0])
