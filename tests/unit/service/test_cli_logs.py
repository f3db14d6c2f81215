"""Every CLI command's log lines go through the same redaction as the service's."""

from __future__ import annotations

import argparse
import logging

import pytest

from service import cli
from service.config import Settings

pytestmark = pytest.mark.unit


def test_cli_commands_log_through_the_redacting_handler(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def noisy(args: argparse.Namespace, settings: Settings) -> int:
        logging.getLogger("some.library").warning(
            "retrying for asha@example.com with key rk_live_0123456789abcdef0123"
        )
        return 0

    parser = cli.build_parser()
    real_parse = parser.parse_args

    def parse(argv: list[str] | None = None) -> argparse.Namespace:
        args = real_parse(argv)
        args.func = noisy
        return args

    monkeypatch.setattr(parser, "parse_args", parse)
    monkeypatch.setattr(cli, "build_parser", lambda argv=None: parser)
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        assert cli.main(["tenants", "ls"]) == 0
        err = capsys.readouterr().err
    finally:
        for h in list(root.handlers):
            if h not in before:
                root.removeHandler(h)
    assert "retrying for" in err
    assert "asha@example.com" not in err and "rk_live_0123456789abcdef0123" not in err
