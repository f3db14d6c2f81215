"""Tracing for command-line runs (`ragline index …`): one trace per command.

The command's root span becomes the parent of every `telemetry.span` opened while it runs, in
this thread and in the event loops it starts; a `TRACEPARENT` variable joins a caller's trace.
Spans are flushed before the command returns.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from service.config import Settings
from service.telemetry.context import SpanLike, activate, root_span
from service.telemetry.core import Telemetry


@contextmanager
def traced_command(settings: Settings, name: str, **attrs: Any) -> Iterator[SpanLike]:
    tel = Telemetry(settings, metrics=False)
    activate(tel)
    try:
        with root_span(name, **attrs) as span:
            yield span
    finally:
        activate(None)
        if tel.provider is not None:
            tel.provider.shutdown()
