from __future__ import annotations

from pathlib import Path

import pytest

from service.config import ConfigError, load_settings

pytestmark = pytest.mark.unit


def test_defaults_are_embedded() -> None:
    s = load_settings(environ={})
    assert s.database.url == "" and s.redis.url == "" and s.index.backend == "edge"
    assert s.budget.ttft_ms == 800 and s.storage.state_dir == ".ragline"


def test_toml_then_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "r.toml"
    cfg.write_text(
        '[server]\nport = 9000\n[retrieval]\ntop_k = 7\nmetadata_fields = {team = "keyword"}\n'
    )
    s = load_settings(
        cfg, environ={"RAGLINE_SERVER_PORT": "9100", "RAGLINE_DATABASE_URL": "postgresql://x/y"}
    )
    assert s.server.port == 9100 and s.retrieval.top_k == 7
    assert s.retrieval.metadata_fields == {"team": "keyword"}
    assert s.database.url == "postgresql://x/y"


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RAGLINE_SERVER_PORT": "eighty"}, "server.port (RAGLINE_SERVER_PORT)"),
        ({"RAGLINE_DATABASE_POOL_MAX": "0"}, "database.pool_max"),
        ({"RAGLINE_SERVER_PORTT": "1"}, "RAGLINE_SERVER_PORTT"),
        ({"RAGLINE_NOPE": "1"}, "RAGLINE_NOPE"),
        ({"RAGLINE_INDEX_BACKEND": "faiss"}, "index.backend"),
        ({"RAGLINE_RETRIEVAL_METADATA_FIELDS": '{"acl": "keyword"}'}, "retrieval.metadata_fields"),
    ],
)
def test_bad_value_names_the_key(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace("(", r"\(").replace(")", r"\)")):
        load_settings(environ=env)


def test_bad_toml_names_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.toml"
    cfg.write_text("[server\n")
    with pytest.raises(ConfigError, match=r"bad\.toml"):
        load_settings(cfg, environ={})


def test_tool_variables_are_not_settings() -> None:
    env = {
        "RAGLINE_SHARED_DATA": "/data",
        "RAGLINE_TEST_REDIS_URL": "redis://x",
        "RAGLINE_CONFIG": "",
    }
    assert load_settings(environ=env).server.port == 8000


@pytest.mark.parametrize("field", ["lang", "title", "chunk_ix", "tenant_id", "acl"])
def test_a_metadata_field_may_not_shadow_ragline_s_own_payload(field: str) -> None:
    env = {"RAGLINE_RETRIEVAL_METADATA_FIELDS": f'{{"{field}": "keyword"}}'}
    with pytest.raises(ConfigError, match=f"'{field}' is reserved"):
        load_settings(environ=env)
