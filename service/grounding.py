"""Offline groundedness: how much of an answer its cited sources support.

The service scores every answer with it after the last token (`service.pipeline.ground`), and
the evals use it through `evals.groundedness`, which re-exports it.

Each answer sentence is checked against the passages it cites (all of them when it cites none)
with lexical evidence (content-word recall, capitalized names and numbers the passages never
mention) and, given an embedder, its best cosine similarity to a passage sentence. A small
logistic model turns that evidence into P(supported); its weights come from
`python -m evals.calibrate_groundedness` (fit on the dev half of mtrag-faithfulness).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt
import regex
import snowballstemmer

from service.text.memo import MAX_CHARS
from service.text.tokenize import has_devanagari

Embed = Callable[[list[str]], npt.NDArray[Any]]
"""Texts to L2-normalized embeddings, one row per text."""

_WORD = regex.compile(r"[\p{L}\p{M}\p{N}]+")
_NUMBER = regex.compile(r"\p{N}+(?:[.,]\p{N}+)*")
_CITATION = regex.compile(r"\[\s*([A-Za-z]{0,3}\d+(?:\s*[,;]\s*[A-Za-z]{0,3}\d+)*)\s*\]")
_LEADING_CITATIONS = regex.compile(r"^((?:\s*\[[^\[\]]*\])+)\s*(.*)$", regex.DOTALL)
_BOUNDARY = regex.compile(r"(?<=[.!?…])[\"'”’)\]]*\s+|(?<=[।॥])\s*")
_SHORT_LABEL = regex.compile(r"\(?[\p{Lu}\d]{1,3}[.)]?")
_INITIAL = regex.compile(r"(?:^|\s)\p{Lu}\.$")
_CITATION_SEP = regex.compile(r"\s*[,;]\s*")
_LIST_MARKER = regex.compile(r"^\s*(?:[-*•▪◦]|\(?\d{1,3}[.)]|\(?[a-z][.)])\s+")
_ABBREVIATIONS = frozenset(
    "e.g i.e etc vs cf al approx dr mr mrs ms prof st jr sr no fig inc ltd co corp dept est "
    "jan feb mar apr jun jul aug sep sept oct nov dec u.s u.k u.n p.m a.m".split()
)
_STOPWORDS = frozenset(
    """a about above after again against all also am an and any are as at be because been
    before being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers herself him himself his how i if in into
    is it its itself just may me might more most must my myself no nor not now of off on once
    only or other our ours ourselves out over own same shall she should so some such than that
    the their theirs them themselves then there these they this those through to too under until
    up upon very was we were what when where which while who whom why will with would you your
    yours yourself yourselves however therefore thus although though whether within without
    many much one ones well like including include includes s t
    का की के को में से पर और है हैं था थे थी हो होता होती होते यह वह ये वे इस उस इन उन
    एक भी तो ही कि जो तक लिए या किया कर करने करते गया गई ने रहा रही रहे""".split()
)
_STEMMERS = {"en": snowballstemmer.stemmer("english"), "hi": snowballstemmer.stemmer("hindi")}
_STEM_LOCK = threading.Lock()  # snowball stemmers keep state while stemming a word


class SentenceSupport(msgspec.Struct):
    """One answer sentence: the ids it cites, P(supported) and the verdict at the threshold."""

    text: str
    cited: list[str]
    score: float
    supported: bool


class GroundednessResult(msgspec.Struct):
    """How grounded an answer is, per sentence and overall, and how good its citations are."""

    score: float
    """Share of the answer supported (0..1): P(supported) of each sentence, averaged with
    weights by its content words. Sentences without content words make no claim and carry none."""
    sentences: list[SentenceSupport]
    citation_precision: float | None
    """Share of citations whose passage supports their sentence; None without citations."""
    citation_recall: float | None
    """Share of supportable sentences that cite something; None if none is supportable."""
    supported_share: float
    """Share of claim-making sentences whose verdict is `supported` (the hard count)."""


class Evidence(msgspec.Struct, frozen=True):
    """What the passages in scope say about one sentence; every field is in 0..1."""

    window_recall: float
    """Share of the sentence's content words found in the best window of passage sentences."""
    source_recall: float
    """Share of its content words found anywhere in the passages."""
    similarity: float
    """Best cosine similarity to a passage sentence (0 without an embedder)."""
    missing_numbers: float
    """Share of its numbers that no passage contains."""
    missing_names: float
    """Share of its mid-sentence capitalized words that no passage contains."""


class SupportModel(msgspec.Struct, frozen=True):
    """P(sentence supported) = sigmoid(bias + weights . evidence); supported at `threshold`."""

    bias: float
    window_recall: float = 0.0
    source_recall: float = 0.0
    similarity: float = 0.0
    missing_numbers: float = 0.0
    missing_names: float = 0.0
    threshold: float = 0.5

    def probability(self, ev: Evidence) -> float:
        z = (
            self.bias
            + self.window_recall * ev.window_recall
            + self.source_recall * ev.source_recall
            + self.similarity * ev.similarity
            + self.missing_numbers * ev.missing_numbers
            + self.missing_names * ev.missing_names
        )
        return 1.0 / (1.0 + math.exp(-z))


# Fit by `python -m evals.calibrate_groundedness` on the dev half of mtrag-faithfulness (the
# feature set of each was picked by cross-validation inside that half).
LEXICAL_MODEL = SupportModel(
    bias=-0.879, window_recall=1.882, source_recall=1.978, missing_names=-1.953, threshold=0.8
)
"""Default without an embedder."""
EMBEDDING_MODEL = SupportModel(
    bias=-1.091, source_recall=2.143, similarity=1.747, missing_names=-2.007, threshold=0.75
)
"""Default with an embedder."""


class SentenceEvidence(msgspec.Struct, frozen=True):
    """Evidence for one answer sentence: in its scope, against all sources, and per source."""

    text: str
    cited: list[str]
    weight: int
    """Number of content words; 0 means the sentence makes no claim."""
    scoped: Evidence
    anywhere: Evidence
    per_source: dict[str, Evidence]


def split_sentences(text: str) -> list[str]:
    """Sentences of English or Indic text; keeps "e.g.", initials, decimals and list items whole."""
    sentences: list[str] = []
    for line in text.splitlines():
        merged: list[str] = []
        for piece in (p.strip() for p in _BOUNDARY.split(line)):
            if not piece:
                continue
            if merged and _continues(merged[-1], piece):
                merged[-1] = f"{merged[-1]} {piece}"
            else:
                merged.append(piece)
        for raw in merged:
            sentence = _LIST_MARKER.sub("", raw).strip()
            lead = _LEADING_CITATIONS.match(sentence)
            if lead and sentences and extract_citations(lead.group(1)):
                sentences[-1] = f"{sentences[-1]} {lead.group(1).strip()}"
                sentence = lead.group(2).strip()
            if sentence:
                sentences.append(sentence)
    return sentences


def _continues(previous: str, piece: str) -> bool:
    """Whether the split after `previous` was false: abbreviation, initial, list number."""
    last = previous.rsplit(maxsplit=1)[-1].rstrip(".").lower()
    if last in _ABBREVIATIONS or _SHORT_LABEL.fullmatch(previous):
        return True
    if _INITIAL.search(previous):  # an initial, as in "J. K. Rowling"
        return True
    return piece[:1].islower()


def extract_citations(sentence: str) -> list[str]:
    """Citation ids in order of first use: "[S1, S3] ... [S2][S4]" -> ["S1", "S3", "S2", "S4"]."""
    ids: list[str] = []
    for group in _CITATION.finditer(sentence):
        for cid in _CITATION_SEP.split(group.group(1)):
            if cid not in ids:
                ids.append(cid)
    return ids


def strip_citations(sentence: str) -> str:
    """The sentence without its citation markers."""
    return _CITATION.sub("", sentence).strip()


SENTENCE_ENDS = frozenset(".!?।:;")
_BULLET = regex.compile(r"\s*(?:[*+-]|\d+[.)])\s+")  # a list item's marker
_BEFORE_END = regex.compile(r" ([.!?।:;,])")  # "… morning [S1]." → "… morning ."


def quoted(answer: str, sources: Mapping[str, str]) -> bool:
    """Whether every sentence of `answer` (citation markers and spacing aside) is a whole
    sentence of a passage it cites, or of any passage when it cites none: such an answer (the
    extractive generator's, as a rule) is supported throughout, with no model to ask. Whole:
    the quote starts a line (or a list item) or follows a sentence's end, and ends a line or
    one itself, so a fragment ("the drug is safe" of "the drug is safe in mice.") is not one.
    A sentence without a letter or digit (a code fence, a bullet) makes no claim."""
    passages = {sid: _spaced(text) for sid, text in sources.items()}
    for sentence in split_sentences(answer):
        claim = _BEFORE_END.sub(r"\1", " ".join(strip_citations(sentence).split()))
        if not any(ch.isalnum() for ch in claim):
            continue
        cited = extract_citations(sentence)
        scope = (p for sid, p in passages.items() if not cited or sid in cited)
        if not any(_whole_in(claim, p) for p in scope):
            return False
    return True


def _spaced(text: str) -> str:
    """`text` with each line's spacing made single spaces (its line breaks kept)."""
    return "\n".join(" ".join(line.split()) for line in text.splitlines())


def _whole_in(claim: str, text: str) -> bool:
    at = text.find(claim)
    while at >= 0:
        end = at + len(claim)
        line = text[text.rfind("\n", 0, at) + 1 : at]  # what precedes it on its line
        after = text[end : end + 1]
        starts = (
            not line
            or _BULLET.fullmatch(line) is not None
            or (line[-1] == " " and line.rstrip()[-1:] in SENTENCE_ENDS)
        )
        ends = after in ("", "\n") or (after == " " and claim[-1] in SENTENCE_ENDS)
        if starts and ends:
            return True
        at = text.find(claim, at + 1)
    return False


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    if word.isascii() and word.isalpha():
        language = "en"
    elif has_devanagari(word):
        language = "hi"
    else:
        return word
    with _STEM_LOCK:
        return str(_STEMMERS[language].stemWord(word))


def content_tokens(text: str) -> list[str]:
    """Stemmed, lowercased words of `text` without stopwords (matras stay inside words)."""
    words = (w.lower() for w in _WORD.findall(text))
    return [_stem(w) for w in words if w not in _STOPWORDS]


def _numbers(text: str) -> set[str]:
    return {n.replace(",", "") for n in _NUMBER.findall(text)}


def _names(text: str) -> set[str]:
    """Stems of capitalized words past the first word (names, titles, products)."""
    words = _WORD.findall(text)[1:]
    return {_stem(w.lower()) for w in words if w[:1].isupper() and w.lower() not in _STOPWORDS}


def lexical_overlap_score(answer: str, sources: Sequence[str]) -> float:
    """Baseline: share of the answer's distinct words (lowercased) found anywhere in the sources."""
    answer_words = {w.lower() for w in _WORD.findall(strip_citations(answer))}
    if not answer_words:
        return 1.0
    source_words = {w.lower() for s in sources for w in _WORD.findall(s)}
    return len(answer_words & source_words) / len(answer_words)


class _Passage:
    """A source passage as sentences, windows of content words, all its words and numbers."""

    def __init__(self, text: str, window: int) -> None:
        self.sentences = split_sentences(text) or [text]
        self.sentence_tokens = tokens = [set(content_tokens(s)) for s in self.sentences]
        spans = max(1, len(tokens) - window + 1)
        self.windows: list[set[str]] = [set().union(*tokens[i : i + window]) for i in range(spans)]
        self.tokens: set[str] = set().union(*tokens)
        self.numbers = _numbers(text)


@lru_cache(maxsize=1024)
def _cached_passage(text: str, window: int) -> _Passage:
    return _Passage(text, window)


def _passage(text: str, window: int) -> _Passage:
    """A source's `_Passage` (read-only once built): memoized for a chunk-sized text, as the
    same sources come back across answers."""
    return _cached_passage(text, window) if len(text) <= MAX_CHARS else _Passage(text, window)


class _Claim:
    """An answer sentence's content words, numbers and names."""

    def __init__(self, text: str) -> None:
        self.tokens = set(content_tokens(text))
        self.numbers = _numbers(text)
        self.names = _names(text)


def _missing(wanted: set[str], known: set[str]) -> float:
    return len(wanted - known) / len(wanted) if wanted else 0.0


def _evidence(claim: _Claim, scope: Sequence[_Passage], similarity: float) -> Evidence:
    """Evidence of one claim against a set of passages (empty set: nothing supports it)."""
    if not claim.tokens or not scope:
        return Evidence(0.0, 0.0, 0.0, float(bool(claim.numbers)), float(bool(claim.names)))
    n = len(claim.tokens)
    words: set[str] = set().union(*(p.tokens for p in scope))
    return Evidence(
        window_recall=max(len(claim.tokens & w) / n for p in scope for w in p.windows),
        source_recall=len(claim.tokens & words) / n,
        similarity=similarity,
        missing_numbers=_missing(claim.numbers, set().union(*(p.numbers for p in scope))),
        missing_names=_missing(claim.names, words),
    )


class GroundednessScorer:
    """Scores answers against `{citation id: passage text}`; `embed=None` uses lexical evidence."""

    def __init__(
        self,
        embed: Embed | None,
        threshold: float | None = None,
        *,
        model: SupportModel | None = None,
        window: int = 2,
        max_units: int | None = 16,
    ) -> None:
        chosen = model or (EMBEDDING_MODEL if embed is not None else LEXICAL_MODEL)
        if embed is None and chosen.similarity:
            raise ValueError("the model weighs embedding similarity but embed is None")
        if threshold is not None:
            chosen = msgspec.structs.replace(chosen, threshold=threshold)
        self.model = chosen
        self._embed = embed
        self._window = window
        self._max_units = max_units

    def score(
        self, answer: str, sources: Mapping[str, str], *, cited_only: bool = True
    ) -> GroundednessResult:
        """Support of each answer sentence, the supported share, citation precision and recall."""
        return self.judge(self.evidence(answer, sources, cited_only=cited_only))

    def support(self, answer: str, sources: Mapping[str, str]) -> float:
        """`score(answer, sources).score` alone, as the service needs it: without an embedder
        it reads only the passages a sentence cites (all of them for a sentence citing none),
        where `score` builds every passage for per-source citation checks too."""
        if self._embed is not None:
            return self.score(answer, sources).score
        built: dict[str, _Passage] = {}

        def passage(sid: str) -> _Passage:
            if sid not in built:
                built[sid] = _passage(sources[sid], self._window)
            return built[sid]

        mass = weight = 0.0
        for text in split_sentences(answer):
            claim = _Claim(strip_citations(text))
            if not claim.tokens:  # no content words: makes no claim
                continue
            cited = extract_citations(text)
            scope = [passage(sid) for sid in sources if not cited or sid in cited]
            p = self.model.probability(_evidence(claim, scope, 0.0))
            mass, weight = mass + p * len(claim.tokens), weight + len(claim.tokens)
        return mass / weight if weight else 1.0

    def evidence(
        self, answer: str, sources: Mapping[str, str], *, cited_only: bool = True
    ) -> list[SentenceEvidence]:
        """Model-free evidence per sentence (calibration reuses it to fit the model)."""
        texts = split_sentences(answer)
        claims = [_Claim(strip_citations(t)) for t in texts]
        passages = {sid: _passage(text, self._window) for sid, text in sources.items()}
        sims = self._similarities([strip_citations(t) for t in texts], claims, passages)
        rows: list[SentenceEvidence] = []
        for i, (text, claim) in enumerate(zip(texts, claims, strict=True)):
            cited = extract_citations(text)
            per_source = {
                sid: _evidence(claim, [p], float(sims[i, j]))
                for j, (sid, p) in enumerate(passages.items())
            }
            every = _evidence(claim, list(passages.values()), float(sims[i].max(initial=0.0)))
            scoped = every
            if cited_only and cited:
                known = [j for j, sid in enumerate(passages) if sid in cited]
                scope = [passages[sid] for sid in passages if sid in cited]
                scoped = _evidence(claim, scope, float(sims[i, known].max(initial=0.0)))
            rows.append(SentenceEvidence(text, cited, len(claim.tokens), scoped, every, per_source))
        return rows

    def judge(self, evidence: Sequence[SentenceEvidence]) -> GroundednessResult:
        """Apply the support model to precomputed evidence."""
        model = self.model
        sentences: list[SentenceSupport] = []
        mass = weight = supported = claims = 0.0
        citations = cited_ok = supportable = supportable_cited = 0
        for row in evidence:
            if not row.weight:  # no content words: makes no claim
                sentences.append(SentenceSupport(row.text, row.cited, 1.0, True))
                continue
            p = model.probability(row.scoped)
            sentences.append(SentenceSupport(row.text, row.cited, p, p >= model.threshold))
            mass, weight = mass + p * row.weight, weight + row.weight
            claims, supported = claims + 1, supported + (p >= model.threshold)
            for cid in row.cited:
                ev = row.per_source.get(cid)
                citations += 1
                cited_ok += ev is not None and model.probability(ev) >= model.threshold
            if model.probability(row.anywhere) >= model.threshold:
                supportable += 1
                supportable_cited += bool(row.cited)
        return GroundednessResult(
            score=mass / weight if weight else 1.0,
            sentences=sentences,
            citation_precision=cited_ok / citations if citations else None,
            citation_recall=supportable_cited / supportable if supportable else None,
            supported_share=supported / claims if claims else 1.0,
        )

    def _similarities(
        self, texts: list[str], claims: list[_Claim], passages: Mapping[str, _Passage]
    ) -> npt.NDArray[np.float32]:
        """Best cosine of each claim to each passage's sentences, from one embedding call."""
        sims = np.zeros((len(texts), len(passages)), dtype=np.float32)
        rows = [i for i, c in enumerate(claims) if c.tokens]
        if self._embed is None or not rows or not passages:
            return sims
        units = self._candidate_units([claims[i] for i in rows], passages)
        vectors = np.asarray(self._embed([texts[i] for i in rows] + units), dtype=np.float32)
        cosine = vectors[: len(rows)] @ vectors[len(rows) :].T
        column = {s: j for j, s in enumerate(units)}
        for j, p in enumerate(passages.values()):
            cols = [column[s] for s in p.sentences if s in column]
            if cols:
                sims[rows, j] = np.clip(cosine[:, cols].max(axis=1), 0.0, 1.0)
        return sims

    def _candidate_units(self, claims: list[_Claim], passages: Mapping[str, _Passage]) -> list[str]:
        """Passage sentences worth embedding: all of them, or (above `max_units`) the ones
        sharing the most content words with some claim, keeping each passage's best one."""
        overlap: dict[str, float] = {}
        best_of_passage: list[str] = []
        for p in passages.values():
            for sentence, tokens in zip(p.sentences, p.sentence_tokens, strict=True):
                share = max(len(c.tokens & tokens) / len(c.tokens) for c in claims)
                overlap[sentence] = max(share, overlap.get(sentence, 0.0))
            best_of_passage.append(max(p.sentences, key=lambda s: overlap[s]))
        if self._max_units is None or len(overlap) <= self._max_units:
            return list(overlap)
        ranked = sorted(overlap, key=lambda s: overlap[s], reverse=True)
        return list(dict.fromkeys(best_of_passage + ranked))[: max(self._max_units, len(passages))]
