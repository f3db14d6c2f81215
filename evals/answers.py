"""Answer metrics against gold answers (SQuAD-style) and abstention detection.

Normalisation follows the official SQuAD v1.1 script: lowercase, drop punctuation, drop the
articles a/an/the, collapse whitespace. Citation markers like `[S1]` are removed first. For
non-Latin text (Hindi) "punctuation" is the Unicode punctuation classes, so matras survive.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import regex

from service.text.tokenize import bm25_terms

_CITATION = regex.compile(r"\[\s*S\d+(?:\s*,\s*S\d+)*\s*\]")
_PUNCT = regex.compile(r"[\p{P}\p{S}]")
_ARTICLES = regex.compile(r"\b(a|an|the)\b")

DEFAULT_ABSTAIN_PATTERNS = (
    r"\b(sources?|context|passages?|documents?)\b[^.]{0,40}\b(do(es)?\s*n[o']t|never)\b"
    r"[^.]{0,20}\b(answer|say|mention|contain|cover|address|provide|specify|state)",
    r"\b(no|not enough|insufficient)\s+(relevant\s+)?(information|evidence|answer)\b",
    r"\b(can ?n[o']t|unable to|could n[o']t)\s+(be\s+)?(answer|determine|find|tell)",
    r"\bnot (mentioned|stated|specified|covered|available) in the (sources?|context|passages?)",
    r"\bi do ?n[o']t know\b",
    r"स्रोत[^।]{0,40}(नहीं|न)\s",
)


def strip_citations(text: str) -> str:
    return _CITATION.sub(" ", text)


def normalize(text: str) -> str:
    text = strip_citations(text).lower()
    text = _PUNCT.sub(" ", text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, golds: Sequence[str]) -> float:
    pred = normalize(prediction)
    return float(any(pred == normalize(g) for g in golds))


def _f1(pred_tokens: list[str], gold_tokens: list[str]) -> float:
    if not pred_tokens or not gold_tokens:
        return float(pred_tokens == gold_tokens)
    common = Counter(pred_tokens) & Counter(gold_tokens)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, golds: Sequence[str]) -> float:
    """The best token-level F1 against any gold answer."""
    pred = normalize(prediction).split()
    return max((_f1(pred, normalize(g).split()) for g in golds), default=0.0)


def contains(prediction: str, golds: Sequence[str]) -> float:
    """1 if some normalized gold answer appears (as whole tokens) in the normalized answer.

    Long extractive answers rarely match a short gold span exactly; this says whether the
    answer at least carries it."""
    pred = f" {normalize(prediction)} "
    return float(any(f" {g} " in pred for g in (normalize(x) for x in golds) if g))


def content_words(text: str) -> set[str]:
    """Stemmed words without stop words (BM25's terms, English and Hindi), citations removed."""
    return set(bm25_terms(strip_citations(text)))


def evidence_overlap(answer: str, evidence: Mapping[str, Sequence[str]]) -> tuple[float, float]:
    """(recall, precision) of the answer's content words against gold evidence sentences: the
    share of the evidence's words the answer holds, and the share of the answer's words that
    are evidence words. `evidence` maps each gold document to its evidence sentences (a page
    and its translation); the document whose evidence the answer covers best counts."""
    said = content_words(answer)
    best = (0.0, 0.0)
    for sentences in evidence.values():
        gold = content_words(" ".join(sentences))
        if not gold:
            continue
        common = len(said & gold)
        pair = (common / len(gold), common / len(said) if said else 0.0)
        best = max(best, pair)
    return best


class AbstentionDetector:
    """Decides whether an answer says "the sources don't say" (or says nothing)."""

    def __init__(self, extra: Iterable[str] = ()) -> None:
        self._patterns = [
            regex.compile(p, regex.IGNORECASE) for p in (*DEFAULT_ABSTAIN_PATTERNS, *extra)
        ]

    def __call__(self, answer: str) -> bool:
        text = strip_citations(answer).strip()
        if not text:
            return True
        return any(p.search(text) for p in self._patterns)
