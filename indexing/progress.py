"""What an indexing run shows: a live progress bar on a terminal, then a summary table."""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table

from service.ingest.summary import Failure, Summary

COLUMNS = ("added", "updated", "unchanged", "removed", "failed", "chunks", "seconds")


class BarProgress:
    """Documents done of the total, chunks written, documents per second and the ETA."""

    def __init__(self, total: int, label: str, *, enabled: bool | None = None) -> None:
        console = Console(stderr=True)
        self.enabled = console.is_terminal if enabled is None else enabled
        self.chunks = 0
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("docs · {task.fields[chunks]} chunks · {task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA {task.fields[eta]}"),
            console=console,
            disable=not self.enabled,
            transient=False,
        )
        self._task = self._bar.add_task(label, total=total or None, chunks=0, rate="", eta="-")
        self._start = time.monotonic()
        self._done = 0

    def __enter__(self) -> BarProgress:
        self._bar.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._bar.stop()

    def doc_done(self, action: str, chunks: int) -> None:
        """Rates are averages since the start: documents settle in bursts (one per write)."""
        self.chunks += chunks
        self._done += 1
        elapsed = max(time.monotonic() - self._start, 1e-6)
        docs_s, chunks_s = self._done / elapsed, self.chunks / elapsed
        task = self._bar.tasks[0]
        total = max(task.total or 0, self._done)
        eta = "-"
        if self._done >= 3 and task.total:
            eta = _clock((total - self._done) / docs_s)
        self._bar.update(
            self._task,
            completed=self._done,
            total=total or None,
            chunks=self.chunks,
            rate=f"{docs_s:.1f} docs/s · {chunks_s:.1f} chunks/s",
            eta=eta,
        )


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02}:{s:02}"


def show_summary(s: Summary, console: Console | None = None) -> None:
    console = console or Console()
    title = f"index · tenant {s.tenant}" + (" · dry run (nothing written)" if s.dry_run else "")
    table = Table(title=title)
    for col in COLUMNS:
        table.add_column(col, justify="right")
    table.add_row(*(str(getattr(s, c)) for c in COLUMNS))
    if s.dry_run and s.changes:
        plan = Table(title="would change", show_edge=False)
        plan.add_column("action")
        plan.add_column("document")
        plan.add_column("chunks", justify="right")
        for ch in s.changes[:200]:
            plan.add_row(ch.action, ch.doc_id, str(ch.chunks) if ch.action != "remove" else "")
        console.print(plan)
        if len(s.changes) > 200:
            console.print(f"… and {len(s.changes) - 200} more (see --json)")
    console.print(table)
    moved = [f"{n} {what}" for n, what in ((s.renamed, "renamed"), (s.relinked, "relinked")) if n]
    if moved:
        console.print(f"{', '.join(moved)} (links and ids only: nothing re-embedded)")
    for line in grouped(s.errors):
        console.print(f"[red]failed[/red] {escape(line)}", highlight=False, soft_wrap=True)
    for line in grouped(s.skipped):
        console.print(f"[yellow]skipped[/yellow] {escape(line)}", highlight=False, soft_wrap=True)


def grouped(items: list[Failure], show: int = 3) -> list[str]:
    """One line per reason: a reason shared by several files is one line with a count and
    the first few paths (55 files without an ACL are one line, not 55)."""
    by_reason: dict[str, list[Failure]] = {}
    for f in items:
        by_reason.setdefault(f.reason, []).append(f)
    lines = []
    for reason, fs in by_reason.items():
        if len(fs) == 1:
            lines.append(str(fs[0]))
            continue
        where = [f"{f.path}:{f.line}" if f.line is not None else f.path for f in fs[:show]]
        more = f", … {len(fs) - show} more" if len(fs) > show else ""
        lines.append(f"{len(fs)} files ({reason}): {', '.join(where)}{more}")
    return lines


def print_rows(rows: list[dict[str, Any]], columns: list[str], title: str = "") -> None:
    """A table on a terminal; tab-separated lines with a header row otherwise (pipes and files
    get every value whole: nothing truncated to a terminal's width)."""
    if not sys.stdout.isatty():
        print("\t".join(columns))
        for r in rows:
            print("\t".join(_cell(r.get(c)) for c in columns))
        return
    table = Table(title=title or None)
    for col in columns:
        table.add_column(col)
    for r in rows:
        table.add_row(*(_cell(r.get(c)) for c in columns))
    Console(file=sys.stdout).print(table)


def _cell(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    return "" if value is None else str(value)
