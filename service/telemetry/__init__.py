"""Traces, metrics, logs and usage records (ARCHITECTURE §8). Never the query or document text.

Code on the request path imports this package and calls the helpers below; they find the
current request through a contextvar and cost nothing when telemetry is off.
"""

from __future__ import annotations

from service.telemetry.context import (
    activate,
    annotate,
    current,
    first_token,
    generator_error,
    note_cache,
    note_degraded,
    note_error,
    note_tokens,
    observe_stage,
    root_span,
    set_attrs,
    set_principal,
    span,
    stage,
)

__all__ = [
    "activate",
    "annotate",
    "current",
    "first_token",
    "generator_error",
    "note_cache",
    "note_degraded",
    "note_error",
    "note_tokens",
    "observe_stage",
    "root_span",
    "set_attrs",
    "set_principal",
    "span",
    "stage",
]
