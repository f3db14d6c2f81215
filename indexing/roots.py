"""Folder sources: a document's id is its path relative to a recorded root.

The root is recorded once per tenant (`ragline sources add`, or the folder of the first
`index add` — a single file's parent when that is all it was given), so indexing one file or the
whole tree gives the same ids. A PATH inside a recorded root uses that root; a PATH that would
swallow a recorded root is refused (moving a root is an explicit `ragline sources set --root`).
Documents an older version indexed under other ids (ids were relative to the PATH argument)
move to their new ids without re-embedding: they are recognised by the file they came from.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from indexing.args import UsageError
from indexing.loaders import Root, Selection, Skipped, Source, list_sources
from indexing.readers import JSONL
from service.db.documents import DocRow
from service.db.sources import SourceRow
from service.ingest.documents import LoadError

FOLDER = "folder"


class RootPlan(msgspec.Struct, kw_only=True):
    roots: list[Root | None]
    """Per PATH argument (None: the path does not exist)."""
    new: list[SourceRow]
    """Sources this run records (the first `index add` of a folder)."""


def _root(row: SourceRow) -> Root:
    return Root(path=Path(row.root), base_url=row.base_url, url_style=row.url_style)


def _name_for(folder: Path, taken: set[str]) -> str:
    base = "".join(c if c.isalnum() or c in "-_." else "-" for c in folder.name) or "root"
    name, n = base, 1
    while name in taken:
        n += 1
        name = f"{base}-{n}"
    return name


def inferred_roots(known: Iterable[DocRow]) -> list[Path]:
    """The folders older versions indexed (their ids were relative to the PATH argument): a
    document from `/a/src/en/x.md` with id `en/x.md` was indexed from `/a/src`."""
    roots = set()
    for row in known:
        origin = row.origin
        whole_file = origin.startswith("/") and Path(origin).suffix.lower() not in JSONL
        if whole_file and origin.endswith("/" + row.doc_id):
            roots.add(Path(origin[: -len(row.doc_id) - 1]))
    return sorted(roots, key=lambda p: len(p.parts))


def plan_roots(
    tenant: str,
    paths: Sequence[Path],
    recorded: Sequence[SourceRow],
    known: Iterable[DocRow] = (),
) -> RootPlan:
    """The source root of each PATH, recording a new one where none contains it: the widest
    folder an older version indexed that contains PATH, else PATH's folder."""
    folders = [r for r in recorded if r.kind == FOLDER]
    earlier = inferred_roots(known) if not folders else []
    taken = {r.name for r in recorded}
    out: list[Root | None] = []
    new: list[SourceRow] = []
    for raw in paths:
        if not raw.exists():
            out.append(None)
            continue
        path = raw.resolve()
        candidates = [*folders, *new]
        holders = [r for r in candidates if path == Path(r.root) or path.is_relative_to(r.root)]
        if holders:
            out.append(_root(max(holders, key=lambda r: len(Path(r.root).parts))))
            continue
        folder = path if path.is_dir() else path.parent
        folder = next((r for r in earlier if folder.is_relative_to(r)), folder)
        inside = [r for r in candidates if Path(r.root).is_relative_to(folder)]
        if inside:
            r = inside[0]
            raise UsageError(
                f"{raw} contains the recorded source {r.name!r} (root {r.root}): document ids"
                f" are relative to that root. To widen it (ids get the folder prefix, nothing is"
                f" re-embedded): ragline sources set {r.name} --tenant {tenant} --root {folder}"
            )
        row = SourceRow(
            tenant_id=tenant, name=_name_for(folder, taken), kind=FOLDER, root=str(folder)
        )
        taken.add(row.name)
        new.append(row)
        out.append(_root(row))
    return RootPlan(roots=out, new=new)


class IdMoves(msgspec.Struct, kw_only=True):
    renames: list[tuple[str, str]]
    """(old id, new id): documents indexed under another id from the same file."""
    duplicates: list[str]
    """Stale second copies of a file that is also indexed under its new id."""
    collisions: list[tuple[Source, str]]
    """Files whose id another existing file already has (the other file's path)."""


def id_moves(listing: Iterable[Source], known: Iterable[DocRow]) -> IdMoves:
    rows = list(known)
    by_origin: dict[str, list[str]] = {}
    for r in rows:
        if r.origin:
            by_origin.setdefault(r.origin, []).append(r.doc_id)
    by_id = {r.doc_id: r for r in rows}
    files = [s for s in listing if s.path.suffix.lower() not in JSONL]
    ids = {s.doc_id for s in files}
    moves = IdMoves(renames=[], duplicates=[], collisions=[])
    for s in files:
        origin = str(s.path)
        holder = by_id.get(s.doc_id)
        other = holder.origin if holder is not None else ""
        if other and other != origin and Path(other).exists() and Path(other).suffix not in JSONL:
            moves.collisions.append((s, other))
            continue
        for old in by_origin.get(origin, []):
            if old == s.doc_id or old in ids:
                continue
            if s.doc_id in by_id or any(new == s.doc_id for _, new in moves.renames):
                moves.duplicates.append(old)
            else:
                moves.renames.append((old, s.doc_id))
    return moves


class Found(msgspec.Struct, kw_only=True):
    """The files of one run: what to read, what was skipped (and why), what failed already."""

    sources: list[Source]
    skipped: list[Skipped]
    errors: list[LoadError]

    def refuse(self, moves: IdMoves) -> None:
        """A file whose id another existing file has is refused, never overwrites it."""
        if not moves.collisions:
            return
        clash = {id(s): other for s, other in moves.collisions}
        for s in self.sources:
            if id(s) in clash:
                reason = (
                    f"document id {s.doc_id!r} is already indexed from {clash[id(s)]}"
                    " (another source root): remove that one or index this folder for another"
                    " tenant"
                )
                self.errors.append(LoadError(path=str(s.path), reason=reason))
        self.sources = [s for s in self.sources if id(s) not in clash]


def scan(paths: Sequence[Path], plan: RootPlan, selection: Selection) -> Found:
    found = Found(sources=[], skipped=[], errors=[])
    for path, root in zip(paths, plan.roots, strict=True):
        if root is None:
            found.errors.append(LoadError(path=str(path), reason="no such file or directory"))
            continue
        found.sources.extend(list_sources(path, selection, root, found.skipped))
    return found


def announce_sources(new: Sequence[SourceRow], dry_run: bool) -> None:
    """Say once which root ids are relative to (stderr: --json output stays clean)."""
    for row in new:
        verb = "would record" if dry_run else "recorded"
        print(
            f"ragline: {verb} source {row.name!r} for tenant {row.tenant_id!r} at {row.root}"
            " (document ids are paths relative to it; see `ragline sources ls`)",
            file=sys.stderr,
        )
