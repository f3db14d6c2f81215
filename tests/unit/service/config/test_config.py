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


# Every range declared on a field, with a value outside it: loading names the setting.
OUT_OF_RANGE = [
    ("server", "port", "0"),
    ("server", "port", "65536"),
    ("database", "pool_max", "0"),
    ("redis", "timeout_ms", "0"),
    ("redis", "failures_to_degrade", "0"),
    ("redis", "probe_interval_s", "-1"),
    ("cache", "l1_max_entries", "0"),
    ("cache", "l1_max_bytes", "0"),
    ("cache", "version_timeout_ms", "0"),
    ("admission", "max_in_flight", "-1"),
    ("admission", "batch_max_in_flight", "-1"),
    ("admission", "queue_target_ms", "-1"),
    ("admission", "batch_queue_target_ms", "-1"),
    ("index", "shards", "1025"),
    ("index", "replicas", "0"),
    ("embedder", "threads", "0"),
    ("embedder", "max_batch", "0"),
    ("indexing", "embed_batch", "0"),
    ("indexing", "queue_docs", "0"),
    ("retrieval", "top_k", "0"),
    ("retrieval", "max_top_k", "0"),
    ("retrieval", "prefetch", "501"),
    ("retrieval", "shortlist", "201"),
    ("retrieval", "bm25_scale", "0"),
    ("retrieval", "rrf_k", "0"),
    ("retrieval", "saturation", "0"),
    ("retrieval", "dense_weight", "1.1"),
    ("retrieval", "non_latin_dense_weight", "-0.1"),
    ("rerank", "max_candidates", "101"),
    ("trim", "context_tokens", "0"),
    ("generator", "max_tokens", "0"),
    ("generator", "max_tokens_limit", "0"),
    ("generator", "max_connections", "0"),
    ("generator", "local_threads", "0"),
    ("generator", "local_slots", "0"),
    ("generator", "breaker_failures", "0"),
    ("budget", "ttft_ms", "0"),
    ("budget", "sse_keepalive_ms", "0"),
    ("grounding", "timeout_ms", "0"),
    ("grounding", "max_backlog", "0"),
    ("telemetry", "sample_ratio", "1.5"),
    ("telemetry", "max_tenant_labels", "0"),
    ("telemetry", "usage_buffer", "0"),
    ("telemetry", "usage_batch", "0"),
    ("telemetry", "usage_flush_ms", "0"),
]


@pytest.mark.parametrize(("section", "field", "value"), OUT_OF_RANGE)
def test_a_value_out_of_range_names_the_variable(section: str, field: str, value: str) -> None:
    var = f"RAGLINE_{section.upper()}_{field.upper()}"
    with pytest.raises(ConfigError) as exc:
        load_settings(environ={var: value})
    assert str(exc.value).startswith(f"setting {section}.{field} ({var}): Expected `")
    assert str(exc.value).endswith(f"got {value!r}")


@pytest.mark.parametrize(("section", "field", "value"), OUT_OF_RANGE)
def test_a_toml_value_out_of_range_names_the_key_and_the_file(
    tmp_path: Path, section: str, field: str, value: str
) -> None:
    cfg = tmp_path / "ragline.toml"
    cfg.write_text(f"[{section}]\n{field} = {value}\n")
    with pytest.raises(ConfigError) as exc:
        load_settings(cfg, environ={})
    assert str(exc.value).startswith(f"setting {section}.{field} (in {cfg}): Expected `")


def test_the_environment_wins_over_the_file_in_the_message(tmp_path: Path) -> None:
    cfg = tmp_path / "ragline.toml"
    cfg.write_text("[retrieval]\nprefetch = 40\n")
    with pytest.raises(ConfigError, match=r"retrieval\.prefetch \(RAGLINE_RETRIEVAL_PREFETCH\)"):
        load_settings(cfg, environ={"RAGLINE_RETRIEVAL_PREFETCH": "0"})


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RAGLINE_SERVER_PORT": "1"}, None),
        ({"RAGLINE_SERVER_PORT": "65535"}, None),
        ({"RAGLINE_RETRIEVAL_PREFETCH": "500"}, None),
        ({"RAGLINE_TELEMETRY_SAMPLE_RATIO": "0"}, None),
        ({"RAGLINE_RETRIEVAL_TOP_K": "21"}, "retrieval.top_k: must be <= retrieval.max_top_k"),
        ({"RAGLINE_DATABASE_POOL_MIN": "9"}, "database.pool_min: must be <= database.pool_max"),
        (
            {"RAGLINE_ADMISSION_MAX_IN_FLIGHT": "2", "RAGLINE_ADMISSION_BATCH_MAX_IN_FLIGHT": "2"},
            "admission.batch_max_in_flight: must be < admission.max_in_flight",
        ),
        ({"RAGLINE_RERANK_BACKEND": "cross_encoder"}, "rerank.model_dir: required"),
    ],
)
def test_bounds_are_inclusive_and_cross_field_rules_hold(
    env: dict[str, str], named: str | None
) -> None:
    if named is None:
        load_settings(environ=env)
        return
    with pytest.raises(ConfigError, match=f"setting {named}"):
        load_settings(environ=env)
