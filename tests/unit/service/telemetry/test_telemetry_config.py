"""The `telemetry` settings section: environment variables, checks, and what they switch."""

from __future__ import annotations

import pytest

from service.config import ConfigError, load_settings
from service.telemetry.core import Telemetry

pytestmark = pytest.mark.unit


def test_defaults_record_metrics_logs_and_usage_but_export_no_traces() -> None:
    tel = Telemetry(load_settings(environ={}))
    assert tel.tracer is None and tel.metrics is not None and tel.enabled


def test_environment_configures_exporter_and_tenant_labels() -> None:
    s = load_settings(
        environ={
            "RAGLINE_TELEMETRY_TRACES_EXPORTER": "otlp_http",
            "RAGLINE_TELEMETRY_OTLP_ENDPOINT": "http://127.0.0.1:4318/v1/traces",
            "RAGLINE_TELEMETRY_TENANT_LABELS": '["acme", "globex"]',
            "RAGLINE_TELEMETRY_SAMPLE_RATIO": "0.25",
        }
    )
    t = s.telemetry
    assert t.traces_exporter == "otlp_http" and t.sample_ratio == 0.25
    assert t.tenant_labels == ["acme", "globex"]
    tel = Telemetry(s)
    assert tel.tracer is not None and tel.metrics is not None
    assert tel.metrics.tenant("acme") == "acme" and tel.metrics.tenant("initech") == "other"
    assert tel.provider is not None
    tel.provider.shutdown()


def test_everything_off_means_no_middleware_work() -> None:
    s = load_settings(
        environ={
            "RAGLINE_TELEMETRY_METRICS": "false",
            "RAGLINE_TELEMETRY_REQUEST_LOG": "false",
            "RAGLINE_TELEMETRY_USAGE_RECORDS": "false",
        }
    )
    assert not Telemetry(s).enabled


@pytest.mark.parametrize(
    ("var", "value", "key"),
    [
        ("RAGLINE_TELEMETRY_TRACES_EXPORTER", "zipkin", "telemetry.traces_exporter"),
        ("RAGLINE_TELEMETRY_SAMPLE_RATIO", "1.5", "telemetry.sample_ratio"),
        ("RAGLINE_TELEMETRY_USAGE_BUFFER", "0", "telemetry.usage_buffer"),
        ("RAGLINE_TELEMETRY_MAX_TENANT_LABELS", "-1", "telemetry.max_tenant_labels"),
    ],
)
def test_bad_values_name_the_key(var: str, value: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(environ={var: value})
