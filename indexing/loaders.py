"""Find and read source files: folders are walked, `--include`/`--exclude` globs select files,
and each file is read by the reader for its extension (see `indexing.readers`).

Document ids are the path relative to the source root (`indexing.roots`: recorded
once, so indexing one file or its whole tree gives the same id) or the record id (JSONL).
A file's link is its source's base URL mapped onto that path, or the path itself.
Globs match the relative path (`*` also crosses `/`), the file name, or any parent folder, so
`--include '*.md'`, `--exclude drafts` and `--exclude 'hi/*.md'` all do what they say. Hidden
files and folders (`.git`, `.obsidian`, …) are skipped.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path, PurePosixPath

import msgspec
import yaml

from indexing.readers import JSONL, READERS, SUPPORTED
from indexing.readers.common import EmptyDocument
from indexing.readers.jsonl import count_records, read_jsonl
from service.db.documents import DocRow
from service.ingest.documents import LoadError, SourceDoc
from service.ingest.links import doc_link


class Selection(msgspec.Struct, kw_only=True, frozen=True):
    include: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()

    def selects(self, rel: str) -> bool:
        included = not self.include or any(_matches(rel, p) for p in self.include)
        return included and not any(_matches(rel, p) for p in self.exclude)


def _matches(rel: str, pattern: str) -> bool:
    pattern = pattern.rstrip("/")
    path = PurePosixPath(rel)
    candidates = [rel, path.name, *(p.as_posix() for p in path.parents if p.as_posix() != ".")]
    return any(fnmatch.fnmatchcase(c, pattern) for c in candidates)


class Source(msgspec.Struct, kw_only=True, frozen=True):
    """One file to read, with its document id (or, for JSONL, the records' file) and link."""

    path: Path
    doc_id: str
    link: str = ""


class Root(msgspec.Struct, kw_only=True, frozen=True):
    """A folder source: ids are relative to `path`; links map them onto `base_url`."""

    path: Path
    base_url: str = ""
    url_style: str = "dir"


class Skipped(msgspec.Struct, kw_only=True, frozen=True):
    path: str
    reason: str


def list_sources(
    root: Path,
    selection: Selection | None = None,
    source: Root | None = None,
    skipped: list[Skipped] | None = None,
) -> list[Source]:
    """Supported files under `root` (or `root` itself), selected, in a stable order.

    Ids are relative to `source` (default: `root`, or a single file's folder); files of other
    types are appended to `skipped` with the reason.
    """
    selection = selection or Selection()
    root = root.resolve()
    base = source or Root(path=root.parent if root.is_file() else root)

    def make(path: Path) -> Source:
        rel = path.relative_to(base.path).as_posix()
        return Source(path=path, doc_id=rel, link=doc_link(rel, base.base_url, base.url_style))

    if root.is_file():
        if root.suffix.lower() not in SUPPORTED:
            if skipped is not None:
                skipped.append(Skipped(path=str(root), reason=_unsupported(root)))
            return []
        return [make(root)]
    out: list[Source] = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if any(part.startswith(".") for part in PurePosixPath(rel).parts):
            continue
        if not path.is_file() or not selection.selects(rel):
            continue
        if path.suffix.lower() in SUPPORTED:
            out.append(make(path))
        elif skipped is not None:
            skipped.append(Skipped(path=str(path), reason=_unsupported(path)))
    return out


def _unsupported(path: Path) -> str:
    return f"unsupported file type {path.suffix.lower() or '(no extension)'}"


def estimate_documents(sources: Sequence[Source]) -> int:
    """How many documents the sources hold (JSONL lines counted): the progress bar's total."""
    return sum(count_records(s.path) if s.path.suffix.lower() in JSONL else 1 for s in sources)


def read_source(
    source: Source, skipped: list[Skipped] | None = None
) -> Iterator[SourceDoc | LoadError]:
    """The documents of one file; an empty file is appended to `skipped` (else a LoadError)."""
    path, suffix = source.path, source.path.suffix.lower()
    if suffix in JSONL:
        yield from read_jsonl(path)
        return
    reader = READERS.get(suffix)
    if reader is None:
        yield LoadError(path=str(path), reason=f"unsupported file type {suffix!r}", doc_id=None)
        return
    try:
        doc = reader(path, source.doc_id)
        doc.source_uri = doc.source_uri or source.link or source.doc_id
        yield doc
    except EmptyDocument as exc:
        if skipped is not None:
            skipped.append(Skipped(path=str(path), reason=str(exc)))
        else:
            yield LoadError(path=str(path), reason=str(exc), doc_id=source.doc_id)
    except UnicodeDecodeError:
        yield LoadError(path=str(path), reason="not UTF-8 text", doc_id=source.doc_id)
    except OSError as exc:
        yield LoadError(path=str(path), reason=exc.strerror or str(exc), doc_id=source.doc_id)
    except (ValueError, yaml.YAMLError) as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        yield LoadError(path=str(path), reason=reason, doc_id=source.doc_id)
    except Exception as exc:  # a parsing library's own error on a corrupt file
        reason = f"cannot parse: {type(exc).__name__}: {str(exc)[:200]}"
        yield LoadError(path=str(path), reason=reason, doc_id=source.doc_id)


def read_sources(
    sources: Sequence[Source], skipped: list[Skipped] | None = None
) -> Iterator[SourceDoc | LoadError]:
    for source in sources:
        yield from read_source(source, skipped)


def load_path(root: Path, selection: Selection | None = None) -> Iterator[SourceDoc | LoadError]:
    """Every document under `root`; a missing root is one `LoadError`."""
    if not root.exists():
        yield LoadError(path=str(root), reason="no such file or directory")
        return
    yield from read_sources(list_sources(root, selection))


def prune_scope(roots: Sequence[Path], selection: Selection) -> Callable[[DocRow], bool]:
    """Which registered documents `--prune` may remove: like `rsync --delete`, those that came
    from under a PATH argument and that the globs select (excluded files are left alone)."""
    resolved = [r.resolve() for r in roots if r.exists()]

    def in_scope(row: DocRow) -> bool:
        if not row.origin:
            return False
        origin = Path(row.origin)
        for root in resolved:
            if origin == root:
                return True
            if root.is_dir() and origin.is_relative_to(root):
                return selection.selects(origin.relative_to(root).as_posix())
        return False

    return in_scope
