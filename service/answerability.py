"""Answerability: does the retrieved evidence answer the question? Decided before generating.

Signals are cheap and already in hand after retrieval (no model run):
- `dense_top`: the best raw cosine of the question and a hit (the fused score is a per-query
  z-score or a rank and cannot be thresholded; the raw scores are in `Hit.scores`);
- `bm25_per_term`: the best raw BM25 score over the number of distinct query terms (BM25 is
  IDF-weighted: rare matched terms count more);
- `coverage`: the share of the question's content terms found in the top passages;
- `sentence_coverage`: the best single sentence's share of them (an answer is usually one
  sentence that holds most of the question);
- `idf_coverage`, `sentence_idf_coverage`: the same shares with each term weighed by its IDF
  over the principal's chunks, recovered from the hits' raw BM25 scores (`service.index.idf`);
- `bm25_norm`: the best raw BM25 over the most the query can reach, (k1 + 1) · Σ idf (0..1
  whatever the collection's size, unlike raw BM25);
- `dense_margin`: the best raw cosine minus the second best;
- `rerank` when a reranker scored the hits;
- `sentence_sim`: the best cosine of the question and one sentence of the top passages, from
  the sentence vectors pooled at indexing (`Hit.sentence_scores`; an index built before them has
  none, and the `dense` model decides without it);
- `align_mean`, `align_min` (token alignment: `alignment`): each content word piece of the
  question matched to its most similar word piece of the best sentences, by the embedder's
  word-piece vectors (`service.embed.pieces`: its input table, no model run); the mean and the
  weakest match. A passage on the question's topic that lacks what is asked leaves some
  question word unmatched, which the pooled vectors blur. The `aligned` model reads it only
  where the `sentence` model is unsure (`Model.align_band`).

The packaged embedder knows English only, so its cosine is noise for a Hindi or Hinglish
question: those are decided by a lexical model (no dense signal), calibrated separately. Both
logistic models are fitted on the dev halves by `python -m evals.fit_answerability` and shipped
as `service/data/answerability.json`; the threshold is chosen on dev for a bounded false
abstention rate.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt
import regex

from service.embed.pieces import PieceVectors
from service.index.fusion import DENSE_KEY
from service.index.idf import bm25_of_terms, max_bm25, recover_idf
from service.index.protocol import NO_SCORE, Hit
from service.text import glossary, phonetic
from service.text.bm25 import K1, query_terms
from service.text.instructions import QUERY_WORDS, ends_in_request
from service.text.markdown import units, without_code
from service.text.question_words import (
    ALSO_ENGLISH,
    HINGLISH_WORDS,
    asks,
    imperative,
    names_action,
)
from service.text.sentences import split_sentences
from service.text.terms import held_terms, match_terms
from service.text.tokenize import bm25_terms, indic_lang, script_of, words

_CITATION = regex.compile(r"\[\s*S\d+(?:\s*,\s*S\d+)*\s*\]")
MODEL_PATH = Path(__file__).resolve().parent / "data" / "answerability.json"
TOP_PASSAGES = 3


class Signals(msgspec.Struct, kw_only=True):
    dense_top: float = 0.0
    bm25_per_term: float = 0.0
    coverage: float = 0.0
    sentence_coverage: float = 0.0
    rerank: float | None = None
    terms: int = 0
    sentence_sim: float = 0.0
    sentence_sim_first: float = 0.0
    """The best sentence cosine in the first passage (the one the ranking trusts)."""
    has_sentences: bool = False
    idf_coverage: float = 0.0
    """`coverage` with each term weighed by its IDF (recovered from the hits' BM25 scores)."""
    sentence_idf_coverage: float = 0.0
    """`sentence_coverage` weighed the same way."""
    bm25_norm: float = 0.0
    """The best raw BM25 over the most the query can reach, (k1 + 1) · Σ idf: 0..1, whatever the
    collection's size."""
    dense_margin: float = 0.0
    """The best raw cosine minus the second best."""
    align_mean: float = 0.0
    """Token alignment (`alignment`): the mean over the question's content word pieces of each
    one's best cosine to a token of the best sentences."""
    align_min: float = 0.0
    """The weakest of those matches."""
    has_alignment: bool = False
    lang: str = "en"
    """`en`, `hi` (Devanagari) or `hinglish` (romanized Hindi), which decides the model."""

    def features(self, names: Sequence[str]) -> list[float]:
        return [_feature(self, n) for n in names]


def _feature(s: Signals, name: str) -> float:
    if name == "log_bm25_per_term":
        return math.log1p(max(s.bm25_per_term, 0.0))
    if name == "log_bm25":
        return math.log1p(max(s.bm25_per_term, 0.0) * max(s.terms, 1))
    if name == "log_terms":
        return math.log1p(s.terms)
    if name == "rerank":
        return s.rerank if s.rerank is not None else 0.0
    return float(getattr(s, name))


def question_lang(question: str) -> str:
    """`hi` for Devanagari, `hinglish` for romanized Hindi, the script's language for the other
    Indic scripts (`bn`, `ta`, `te`, `kn`, `ml`, `gu`, `pa`, `or`: `indic_lang`), `other` for
    other scripts, else `en` (the embedder's). Judged on the question without its code
    (`without_code`): a Hindi question quoting a line of code is still Hindi."""
    question = without_code(question)
    script = script_of(question)
    if script != "latin":
        if script == "devanagari":
            return "hi"
        return (indic_lang(question) or "other") if script == "indic" else "other"
    ws = words(question)
    if not ws:
        return "en"
    hindi = sum(w in HINGLISH_WORDS and w not in ALSO_ENGLISH for w in ws)
    if hindi == 1 and len(ws) <= QUERY_WORDS and ends_in_request(question):
        return "hinglish"  # "cors enable karna"
    return "hinglish" if hindi >= 2 and hindi / len(ws) >= 0.2 else "en"


def content_terms(text: str) -> set[str]:
    """The question's stemmed content terms, without romanized Hindi function words."""
    kept = (w for w in words(text) if not asks(w))
    return set(bm25_terms(" ".join(kept)))


def action_terms(text: str) -> set[str]:
    """The stemmed Hindi how-to verbs of a question that name its action ("बनाएं": create),
    which `content_terms` leaves out: selection counts them in a how-question's steps."""
    return set(bm25_terms(" ".join(imperative(w) for w in words(text) if names_action(w))))


def content_keys(text: str) -> dict[str, str]:
    """Each Devanagari content term's English term (a Hindi software word: "परीक्षण" →
    "test", service.text.glossary) or else its consonant skeleton term with the class of the
    vowel after its first consonant (stem → `~key/vowel`: "मिडलवेयर" → `~mdlvr/I` is found in a
    sentence that says "middleware", "केरल" → `~krl/E` not in one that says "curly":
    service.text.phonetic)."""
    out: dict[str, str] = {}
    for w in words(text):
        if w.isascii() or asks(w):
            continue
        stems = bm25_terms(w)
        if not stems:
            continue
        if english := glossary.english_terms(stems[0]):
            out[stems[0]] = english[0]
        elif k := phonetic.key(w):
            vowel = phonetic.first_vowel(w)
            out[stems[0]] = phonetic.PREFIX + k + (phonetic.VOWEL_MARK + vowel if vowel else "")
    return out


def compute(question: str, hits: Sequence[Hit]) -> Signals:
    """The signals of one question over its hits (best first)."""
    q_terms = content_terms(question)
    sig = Signals(terms=len(q_terms), lang=question_lang(question))
    if not hits:
        return sig
    cosines = sorted((h.scores.get(DENSE_KEY, 0.0) for h in hits), reverse=True)
    sig.dense_top = cosines[0]
    sig.dense_margin = cosines[0] - cosines[1] if len(cosines) > 1 else cosines[0]
    # The search asked for the words and, for a question not in Latin script, their consonant
    # skeletons (service.text.phonetic); the BM25 signals count the words alone, as fitted.
    idf = recover_idf(query_terms(question), hits)
    word_terms = [t for t in idf if not t.startswith(phonetic.PREFIX)]
    bm25 = bm25_of_terms(hits, idf, word_terms)
    sig.bm25_per_term = bm25 / max(len(q_terms), 1)
    reachable = max_bm25({t: idf[t] for t in word_terms}, K1)  # 0 when nothing was recovered
    if reachable > 0:
        sig.bm25_norm = min(bm25 / reachable, 1.0)
    reranked = [h.scores["rerank"] for h in hits if "rerank" in h.scores]
    sig.rerank = max(reranked) if reranked else None
    sims = [[x for x in h.sentence_scores if x != NO_SCORE] for h in hits[:TOP_PASSAGES]]
    if any(sims):
        sig.has_sentences = True
        sig.sentence_sim = max(max(s) for s in sims if s)
        # the first passage's best (a passage without scores: the best of the others)
        sig.sentence_sim_first = max(sims[0]) if sims[0] else sig.sentence_sim
    if not q_terms:
        return sig
    weight = {t: idf.get(t, 1.0) if idf else 1.0 for t in q_terms}
    total = sum(weight.values()) or 1.0
    keys = content_keys(question)
    seen: set[str] = set()
    best, best_weight = 0, 0.0
    for h in hits[:TOP_PASSAGES]:
        for sent in split_sentences(f"{h.title}\n{h.text}" if h.title else h.text):
            found = q_terms & held_terms(sent, keys)
            seen |= found
            best = max(best, len(found))
            best_weight = max(best_weight, sum(weight[t] for t in found))
    sig.coverage = len(seen) / len(q_terms)
    sig.sentence_coverage = best / len(q_terms)
    sig.idf_coverage = sum(weight[t] for t in seen) / total
    sig.sentence_idf_coverage = best_weight / total
    return sig


ALIGN_SENTENCES = 2
"""The best sentences (by their pooled cosine) the question is aligned with."""
ALIGN_MAX_TOKENS = 96
"""Model tokens of those sentences the alignment reads: two sentences hold ~60 at the median;
offline, 96 and 256 gave the same abstention within noise (README, issue #14)."""
ALIGN_QUESTION_TOKENS = 32


def alignment_window(hits: Sequence[Hit], k: int = ALIGN_SENTENCES) -> str:
    """The `k` units of the top passages most similar to the question (pooled sentence vectors),
    joined in that order; empty without sentence scores."""
    scored: list[tuple[float, str]] = []
    for h in hits[:TOP_PASSAGES]:
        for unit, score in zip(units(h.text), h.sentence_scores, strict=False):
            if score != NO_SCORE:
                scored.append((score, unit))
    scored.sort(key=lambda t: -t[0])
    return " ".join(u for _, u in scored[:k])


def alignment(
    question: str,
    q_states: tuple[npt.NDArray[np.float32], Sequence[tuple[int, int]]],
    w_states: tuple[npt.NDArray[np.float32], Sequence[tuple[int, int]]],
) -> tuple[float, float]:
    """(mean, min) over the question's content word pieces of each one's best cosine to a token
    of the window; all its pieces when it has no content term."""
    qv, offsets = q_states
    wv = w_states[0]
    if not len(qv) or not len(wv):
        return 0.0, 0.0
    content = content_pieces(question, offsets)
    best = (qv @ wv.T).max(axis=1)
    picked = best[content] if any(content) else best
    return float(picked.mean()), float(picked.min())


_QUESTION_WORD = regex.compile(r"[\p{L}\p{M}\p{N}_]+")


def content_pieces(question: str, offsets: Sequence[tuple[int, int]]) -> list[bool]:
    """Whether each word piece (its char offsets in `question`) belongs to a content word: the
    word it lies in is judged whole, so "CORS" ("co" + "##rs"), "Pydantic" or "OAuth2", whose
    pieces alone are no terms, count with all their pieces (judged piece by piece, "How do I
    add CORS?" was aligned on "add" alone, which its best sentences do not say, and its
    answer abstained)."""
    terms = content_terms(question)
    spans = [
        (m.start(), m.end(), bool(terms & set(bm25_terms(m.group()))))
        for m in _QUESTION_WORD.finditer(question)
    ]
    return [any(a < end and start < b and c for start, end, c in spans) for a, b in offsets]


def token_alignment(pieces: PieceVectors, question: str, window: str) -> tuple[float, float]:
    """The question aligned with the window (`alignment_window`) by the embedder's word-piece
    vectors (`service.embed.pieces`): no model run, well under a millisecond."""
    q = pieces.states(question, ALIGN_QUESTION_TOKENS)
    w = pieces.states(window, ALIGN_MAX_TOKENS)
    return alignment(question, q, w)


class Logistic(msgspec.Struct, kw_only=True):
    features: list[str]
    mean: list[float]
    scale: list[float]
    coef: list[float]
    intercept: float
    threshold: float
    """Abstain when p(answerable) < threshold (chosen on dev)."""

    def probability(self, s: Signals) -> float:
        return self.probability_of(s.features(self.features))

    def probability_of(self, xs: Sequence[float]) -> float:
        z = self.intercept
        for x, m, sd, c in zip(xs, self.mean, self.scale, self.coef, strict=True):
            z += c * (x - m) / sd
        return 1.0 / (1.0 + math.exp(-max(min(z, 40.0), -40.0)))


class Model(msgspec.Struct, kw_only=True):
    version: str
    models: dict[str, Logistic]
    """`aligned` (English questions the `sentence` model is unsure of, with token alignment),
    `sentence` (English questions over an index with sentence vectors), `dense` (English
    questions without them) and `lexical` (Hindi, Hinglish, other scripts, or no dense score:
    the embedder was late)."""
    confidence: Logistic | None = None
    """p(the answer is right) for an answer that was given, from `CONFIDENCE_FEATURES`; fitted
    on the dev halves too, "right" meaning token F1 >= 0.5 against the gold answer (CLAPnq,
    XQuAD) or holding half the gold evidence sentences' words (documentation)."""
    fitted_on: dict[str, int] = msgspec.field(default_factory=dict)
    command: str = ""
    align_band: list[float] = msgspec.field(default_factory=lambda: [0.0, 0.0])
    """[lo, hi): where the `sentence` model's p(answerable) is unsure enough for the `aligned`
    model (its features plus token alignment) to decide instead; outside it the `sentence`
    model decides alone and the alignment is never computed."""

    def wants_alignment(self, s: Signals) -> bool:
        """Would token alignment decide this question (English, sentence vectors, unsure)?"""
        if "aligned" not in self.models or not (s.lang == "en" and s.dense_top > 0):
            return False
        if not s.has_sentences or "sentence" not in self.models:
            return False
        lo, hi = self.align_band
        return lo <= self.models["sentence"].probability(s) < hi

    def pick_name(self, s: Signals) -> str:
        if s.lang == "en" and s.dense_top > 0:
            if s.has_sentences and "sentence" in self.models:
                if s.has_alignment and self.wants_alignment(s):
                    return "aligned"
                return "sentence"
            if "dense" in self.models:
                return "dense"
        if s.lang in self.models:  # a language's own model (e.g. `hi`), when fitted
            return s.lang
        return "lexical"

    def pick(self, s: Signals) -> Logistic:
        return self.models[self.pick_name(s)]


class Decision(msgspec.Struct, kw_only=True):
    answerable: bool
    probability: float
    """p(the evidence answers the question), from the calibrated model."""
    model: str
    signals: Signals


@lru_cache(maxsize=4)
def load_model(path: Path = MODEL_PATH) -> Model:
    return msgspec.json.decode(path.read_bytes(), type=Model)


def model_version(path: Path = MODEL_PATH) -> str:
    """Changes whenever the shipped coefficients change (for answer cache keys)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:12]
    except FileNotFoundError:
        return "none"


def decide(
    question: str,
    hits: Sequence[Hit],
    model: Model | None = None,
    aligned: tuple[float, float] | None = None,
) -> Decision:
    """`aligned`: the question's token alignment (`alignment`), when it was computed."""
    model = model or load_model()
    sig = compute(question, hits)
    if not hits:
        return Decision(answerable=False, probability=0.0, model="none", signals=sig)
    return _decision(model, sig, aligned)


def realign(decision: Decision, aligned: tuple[float, float], model: Model) -> Decision:
    """`decision` decided again with the question's token alignment, over the signals it already
    has (nothing is recomputed)."""
    return _decision(model, msgspec.structs.replace(decision.signals), aligned)


def _decision(model: Model, sig: Signals, aligned: tuple[float, float] | None) -> Decision:
    if aligned is not None:
        sig.align_mean, sig.align_min = aligned
        sig.has_alignment = True
    name = model.pick_name(sig)
    logit = model.models[name]
    p = logit.probability(sig)
    return Decision(answerable=p >= logit.threshold, probability=p, model=name, signals=sig)


CONFIDENCE_FEATURES = [
    "p_answerable",
    "answer_coverage",
    "span_answer_terms",
    "span_sentences",
    "factoid",
    "dense_top",
    "sentence_sim",
    "howto",
]
CONFIDENCE_EVIDENCE = frozenset({"p_answerable", "answer_coverage", "dense_top", "sentence_sim"})
"""Answerability evidence: the fit holds their coefficients >= 0, so more evidence never lowers
the confidence. `p_answerable` is bounded; its logit (the first fit's feature) grows without
bound as p nears 1, and its coefficient there was negative: the stronger the evidence, the lower
the confidence."""
_FACTOID = regex.compile(
    r"^\s*(who|whom|whose|when|where|which|how (many|much|long|old|far|tall|big)|what (year|date|"
    r"time|day|month|percentage|number|is the name)|in what|in which)\b",
    regex.IGNORECASE,
)
_HOWTO = regex.compile(
    r"^\s*how (do|does|can|could|should|would|to|will)\b|\bhow to\b|कैसे|\bkaise\b",
    regex.IGNORECASE,
)
"""A how-to question (English, Hindi, Hinglish): its answer is steps, often several sentences,
so answer length says nothing of it being right (it does for a question asking for a span)."""


def answer_features(
    decision: Decision, question: str, answer: str, names: Sequence[str] = CONFIDENCE_FEATURES
) -> list[float]:
    """The inputs of the confidence model for an answer that was given (`names` of them)."""
    every = _answer_features(decision, question, answer)
    return [every[n] for n in names]


def _answer_features(decision: Decision, question: str, answer: str) -> dict[str, float]:
    p = min(max(decision.probability, 1e-6), 1 - 1e-6)
    q_terms = content_terms(question)
    text = _CITATION.sub(" ", answer)
    terms = match_terms(text)
    coverage = len(q_terms & terms) / len(q_terms) if q_terms else 0.0
    sentences = len(split_sentences(text)) if text.strip() else 0
    factoid = float(bool(_FACTOID.match(question)))
    howto = float(bool(_HOWTO.search(question)))
    log_terms = math.log1p(len(bm25_terms(text)))
    return {
        "p_answerable": p,
        "logit_answerable": math.log(p / (1 - p)),
        "answer_coverage": coverage,
        "log_answer_terms": log_terms,
        "sentences": float(sentences),
        # length only for a question asking for a span (gold: a few words), not for a how-to
        "span_answer_terms": log_terms * (1.0 - howto),
        "span_sentences": sentences * (1.0 - howto),
        "howto": howto,
        "factoid": factoid,
        "dense_top": decision.signals.dense_top,
        "sentence_sim": decision.signals.sentence_sim,
    }


def answer_confidence(
    decision: Decision | None,
    question: str,
    answer: str,
    abstained: bool,
    model: Model | None = None,
) -> float | None:
    """How likely the answer (or the abstention) is right, 0..1; None without a decision."""
    if decision is None:
        return None
    if abstained:
        return round(1.0 - decision.probability, 4)
    model = model or load_model()
    if model.confidence is None:
        return round(decision.probability, 4)
    xs = answer_features(decision, question, answer, model.confidence.features)
    return round(model.confidence.probability_of(xs), 4)


# A fixed, translatable message per language (the question's language decides): English,
# Hindi, and the languages of the other Indic scripts (`question_lang`).
ABSTAIN_MESSAGES = {
    "en": "The sources do not answer this question.",
    "hi": "स्रोतों में इस प्रश्न का उत्तर नहीं है।",
    "bn": "উৎসগুলিতে এই প্রশ্নের উত্তর নেই।",
    "pa": "ਸਰੋਤਾਂ ਵਿੱਚ ਇਸ ਸਵਾਲ ਦਾ ਜਵਾਬ ਨਹੀਂ ਹੈ।",
    "gu": "સ્રોતોમાં આ પ્રશ્નનો જવાબ નથી.",
    "or": "ଉତ୍ସଗୁଡ଼ିକରେ ଏହି ପ୍ରଶ୍ନର ଉତ୍ତର ନାହିଁ।",
    "ta": "மூலங்களில் இந்தக் கேள்விக்கான பதில் இல்லை.",
    "te": "మూలాల్లో ఈ ప్రశ్నకు సమాధానం లేదు.",
    "kn": "ಮೂಲಗಳಲ್ಲಿ ಈ ಪ್ರಶ್ನೆಗೆ ಉತ್ತರವಿಲ್ಲ.",
    "ml": "ഉറവിടങ്ങളിൽ ഈ ചോദ്യത്തിന് ഉത്തരമില്ല.",
}


def abstain_message(lang: str) -> str:
    """The abstention message in the question's language (Hinglish readers, and languages
    without a message, get English)."""
    return ABSTAIN_MESSAGES.get(lang, ABSTAIN_MESSAGES["en"])
