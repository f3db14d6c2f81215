"""`python -m evals.bench.peers NAME [--root DIR]`: create (or check) a peer's venv, print its
Python. `scripts/peer-setup NAME` runs this."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from evals.bench.peers import PEERS, PeerUnavailable, default_root, peer_python


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="peer-setup", description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(PEERS))
    parser.add_argument("--root", type=Path, help=f"where venvs live (default {default_root()})")
    args = parser.parse_args(argv)
    try:
        print(peer_python(args.name, root=args.root))
    except PeerUnavailable as exc:
        print(f"peer-setup: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
