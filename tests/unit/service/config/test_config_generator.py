from __future__ import annotations

import pytest

from service.config import ConfigError, load_settings
from tests.helpers import ROOT

pytestmark = pytest.mark.unit


def test_generator_pool_and_routes_from_environment() -> None:
    s = load_settings(
        environ={
            "RAGLINE_GENERATOR_BACKEND": "openai",
            "RAGLINE_GENERATOR_BASE_URLS": '["http://vllm-0:8000/v1", "http://vllm-1:8000/v1"]',
            "RAGLINE_GENERATOR_TENANT_ROUTES": '{"acme": ["local", "extractive"]}',
            "RAGLINE_GENERATOR_TENANT_MAX_TOKENS": '{"acme": 64}',
        }
    )
    g = s.generator
    assert g.backend == "openai" and g.fallbacks == ["extractive"]
    assert g.base_urls == ["http://vllm-0:8000/v1", "http://vllm-1:8000/v1"]
    assert g.tenant_routes == {"acme": ["local", "extractive"]}
    assert g.tenant_max_tokens == {"acme": 64}


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RAGLINE_GENERATOR_BACKEND": "openai"}, "generator.base_urls"),
        ({"RAGLINE_GENERATOR_CLASS_ROUTES": '{"chat": ["openai"]}'}, "generator.base_urls"),
        ({"RAGLINE_GENERATOR_BASE_URLS": '["vllm:8000"]'}, "generator.base_urls"),
        ({"RAGLINE_GENERATOR_BACKEND": "gpt"}, "generator.backend"),
        ({"RAGLINE_GENERATOR_TENANT_ROUTES": '{"a": []}'}, "generator routes"),
        ({"RAGLINE_GENERATOR_TENANT_MAX_TOKENS": '{"a": 0}'}, "tenant_max_tokens.a"),
        ({"RAGLINE_GENERATOR_LOCAL_SLOTS": "0"}, "generator.local_slots"),
    ],
)
def test_bad_generator_settings_name_the_key(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named.replace(".", r"\.")):
        load_settings(environ=env)


def test_deploy_pool_config_loads() -> None:
    path = ROOT / "deploy/vllm/ragline-pool.toml"
    s = load_settings(path, environ={})
    assert s.generator.backend == "openai" and len(s.generator.base_urls) == 2
    assert s.generator.class_routes["chat"] == ["openai", "extractive"]
