"""`ragline serve` (and every other command of `service`'s own) starts without importing the
plugged-in commands' packages; their commands still parse whenever argv may name one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from service import cli

pytestmark = pytest.mark.unit

PLUGGED = ("index", "eval", "bench")

PROBE = """
import sys
from service import cli
parser = cli.build_parser({argv!r})
args = parser.parse_args({argv!r})
loaded = sorted({{m.split(".")[0] for m in sys.modules}} & {{"evals", "indexing"}})
print(args.command, ",".join(loaded) or "-")
"""


def probe(argv: list[str]) -> str:
    code = PROBE.format(argv=argv)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    return done.stdout.strip()


def test_serve_parses_without_the_plugged_in_packages() -> None:
    assert probe(["serve", "--port", "8000"]) == "serve -"
    assert probe(["--config", "x.toml", "keys", "ls"]) == "keys -"


def test_a_plugged_in_command_still_parses() -> None:
    assert probe(["index", "ls", "--tenant", "t"]).split()[0] == "index"
    assert probe(["index", "ls", "--tenant", "t"]).split()[1] != "-"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["serve"], "serve"),
        (["--config", "a.toml", "serve", "--port", "1"], "serve"),
        (["--config=a.toml", "tenants", "ls"], "tenants"),
        (["index", "add", "x"], "index"),
        (["-h"], None),
        (["--conf", "a.toml", "serve"], None),  # an abbreviation argparse resolves: load all
        ([], None),
    ],
)
def test_the_named_command(argv: list[str], named: str | None) -> None:
    assert cli._named_command(argv) == named


@pytest.mark.parametrize("argv", [[], ["-h"], ["serve", "-h"]])
def test_help_lists_every_command(argv: list[str]) -> None:
    parser = cli.build_parser(argv)
    sub = next(a for a in parser._actions if a.dest == "command")
    names = set(sub.choices or ())
    if argv[:1] == ["serve"]:
        assert "serve" in names  # a command's own help needs only that command
    else:
        assert set(PLUGGED) <= names
