"""`server.cors_origins`: origins only (scheme://host[:port]) or `*`; none by default."""

from __future__ import annotations

import pytest

from service.app import cors_config
from service.config import ConfigError, load_settings

pytestmark = pytest.mark.unit


def test_default_is_no_cors() -> None:
    s = load_settings(environ={})
    assert s.server.cors_origins == [] and cors_config(s) is None


def test_origins_from_the_environment_configure_cors() -> None:
    s = load_settings(
        environ={
            "RAGLINE_SERVER_CORS_ORIGINS": '["https://chat.example.com", "http://localhost:3000"]'
        }
    )
    cfg = cors_config(s)
    assert cfg is not None
    assert cfg.allow_origins == ["https://chat.example.com", "http://localhost:3000"]
    assert cfg.allow_credentials is False
    assert cfg.is_origin_allowed("https://chat.example.com")
    assert not cfg.is_origin_allowed("https://evil.example")


@pytest.mark.parametrize(
    "bad", ["chat.example.com", "https://chat.example.com/", "https://x.com/app", "ftp://x.com"]
)
def test_a_value_that_is_not_an_origin_stops_start_up(bad: str) -> None:
    with pytest.raises(ConfigError, match=r"server\.cors_origins"):
        load_settings(environ={"RAGLINE_SERVER_CORS_ORIGINS": f'["{bad}"]'})
