"""JSONL records (`id` or `_id`, `title`, `text`, optional `acl`, `metadata`, `lang`,
`url`): BEIR corpora such as SciFact's `corpus.jsonl` index as they are.
A bad line is reported with its number and skipped; the other records still load.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from indexing.readers.common import acl_value
from service.ingest.documents import LoadError, SourceDoc
from service.text.lang import detect_lang
from service.text.uris import public_uri


class _Record(msgspec.Struct, kw_only=True):
    id: str | int | None = None
    _id: str | int | None = msgspec.field(default=None, name="_id")
    title: str = ""
    text: str
    acl: list[str] | str | None = None
    metadata: dict[str, Any] = msgspec.field(default_factory=dict)
    lang: str = ""
    source_uri: str = ""
    url: str = ""


_decoder = msgspec.json.Decoder(_Record)


def _link(url: str, doc_id: str) -> str:
    """A record's `url` (or `source_uri`) if it is public, else its id: never a server path."""
    return public_uri(url, doc_id) if url else doc_id


def read_jsonl(path: Path) -> Iterator[SourceDoc | LoadError]:
    try:
        fh = path.open("rb")
    except OSError as exc:
        yield LoadError(path=str(path), reason=exc.strerror or str(exc))
        return
    with fh:
        for n, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                rec = _decoder.decode(line)
                rid = rec.id if rec.id is not None else rec._id
                if rid is None or str(rid) == "":
                    raise ValueError("record has no 'id' or '_id'")
                yield SourceDoc(
                    doc_id=str(rid),
                    text=rec.text,
                    title=rec.title,
                    source_uri=_link(rec.url or rec.source_uri, str(rid)),
                    lang=rec.lang or detect_lang(f"{rec.title} {rec.text}"),
                    acl=acl_value(rec.acl, "record"),
                    metadata=rec.metadata,
                    origin=str(path),
                    line=n,
                )
            except (msgspec.DecodeError, ValueError) as exc:
                yield LoadError(path=str(path), line=n, reason=str(exc))


def count_records(path: Path) -> int:
    """Non-empty lines: the progress bar's total for this file."""
    try:
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return 1
