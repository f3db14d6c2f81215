"""A Git repository as a source: the files of one ref (a branch, tag or commit), read with `git`
itself, so nothing is checked out. Document ids are paths in the repository; each file's blob id
is its ETag, so a file whose blob did not change is not read again."""

from __future__ import annotations

import subprocess
from pathlib import PurePosixPath

from indexing.sources.remote_sync import Fetched, RemoteObject, selected, suffix_of
from service.db.sources import ObjectState, SourceRow


class GitFetcher:
    def __init__(self, src: SourceRow) -> None:
        self.src = src
        self.repo = src.root
        self.ref = str(src.options.get("ref") or "HEAD")
        self.origin_prefix = f"git:{self.repo}@"

    def _git(self, *args: str) -> bytes:
        done = subprocess.run(
            ["git", "-C", self.repo, *args], capture_output=True, check=False, timeout=300
        )
        if done.returncode != 0:
            raise RuntimeError(f"git {args[0]}: {done.stderr.decode(errors='replace').strip()}")
        return done.stdout

    def listing(self) -> list[RemoteObject]:
        out = []
        for line in self._git("ls-tree", "-r", "-z", self.ref).split(b"\0"):
            if not line:
                continue
            meta, _, path_b = line.partition(b"\t")
            mode, kind, blob = meta.decode().split()
            path = path_b.decode()
            if kind != "blob" or mode == "120000":  # files only, no symlinks
                continue
            if any(p.startswith(".") for p in PurePosixPath(path).parts):
                continue
            if not selected(path, self.src.options):
                continue
            out.append(RemoteObject(key=path, doc_id=path, suffix=suffix_of(path), etag=blob))
        return out

    def fetch(self, obj: RemoteObject, known: ObjectState | None) -> Fetched | None:
        return Fetched(data=self._git("cat-file", "blob", obj.etag), etag=obj.etag)

    def origin(self, obj: RemoteObject) -> str:
        return f"git:{self.repo}@{obj.key}"
