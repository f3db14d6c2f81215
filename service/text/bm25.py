"""BM25 as Qdrant sparse vectors: the document side carries saturated term frequencies (a
function of the chunk alone: the average length is a constant), and the engine applies IDF
(`Modifier.Idf`) at query time over the corpus each search names — the chunks the principal can
see in its tenant (`service.index.edge.search_params`) — so no score depends on another tenant's
chunks or on chunks the principal cannot see (docs/security.md).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from typing import TypeVar

import msgspec

from service.text import glossary, phonetic
from service.text.memo import memo_text
from service.text.question_words import asks_in_indic
from service.text.terms import identifier_parts
from service.text.tokenize import bm25_terms, content_words, stem

K1 = 1.2
B = 0.75
AVG_LEN = 120.0  # typical chunk length in terms; only scales length normalisation
T = TypeVar("T")


class SparseVec(msgspec.Struct, frozen=True, array_like=True):
    indices: list[int]
    values: list[float]


def term_id(term: str) -> int:
    """A stable 32-bit id for a term (same in every process and release)."""
    return int.from_bytes(hashlib.blake2b(term.encode(), digest_size=4).digest(), "little")


def _merge(counts: Counter[int]) -> SparseVec:
    items = sorted(counts.items())
    return SparseVec([i for i, _ in items], [float(v) for _, v in items])


def _saturated(counts: Counter[T], length: int) -> dict[T, float]:
    """Saturated term frequencies (the weights stored; IDF comes from the engine)."""
    norm = K1 * (1 - B + B * length / AVG_LEN)
    return {k: f * (K1 + 1) / (f + norm) for k, f in counts.items()}


def term_weights(text: str, of: Sequence[str] | None = None) -> dict[str, float]:
    """Each term's stored weight in a chunk's text, by term (what `doc_vector` stores by id);
    with `of`, at least those terms' (the words alone when none of them is a skeleton: the
    skeletons cost more to make than the words, and a Latin-script question asks for none; a
    text with Devanagari words may carry glossary terms, which add to its words' counts)."""
    if (
        of is not None
        and not glossary.may_hold(text)
        and not any(t.startswith(phonetic.PREFIX) for t in of)
    ):
        words = bm25_terms(text)
        return _saturated(Counter(words), len(words))
    terms, length = _doc_terms(text)
    return _saturated(Counter(terms), length)


@memo_text
def _doc_terms(text: str) -> tuple[tuple[str, ...], int]:
    """A chunk's BM25 terms, the English terms of its Hindi software words (`glossary`: a page
    that writes "ऐप" also says "app"), and the consonant skeletons of its words
    (`service.text.phonetic`: a Devanagari question's "मिडलवेयर" meets a page's "middleware");
    its length is in BM25 terms alone, so the words' weights are what they are without the
    added ones."""
    kept = content_words(text)
    terms = [stem(w) for w in kept]  # bm25_terms(text), from the same words
    said = [e for t in terms if not t.isascii() for e in glossary.english_terms(t)]
    return (*terms, *said, *phonetic.doc_terms([*kept, *identifier_parts(text)])), len(terms)


def doc_vector(text: str) -> SparseVec:
    terms, length = _doc_terms(text)
    items = sorted(_saturated(Counter(term_id(t) for t in terms), length).items())
    return SparseVec([i for i, _ in items], [v for _, v in items])


def query_terms(text: str) -> list[str]:
    """A query's distinct BM25 terms, the consonant skeletons of its Devanagari words (an
    English word spelled in Devanagari finds pages that write it in Latin letters) and the
    English words of its Hindi software words ("परीक्षण" asks for "test", `glossary`), which
    are asked by those English words alone: a page indexes them with their English terms too
    (`_doc_terms`), so the term's IDF is the concept's in either script, not a rare spelling's
    (Hindi pages write "app"; "ऐप", rare, ranked the home page and a glossary page first).
    A question without Devanagari words asks for exactly its own.

    The words a Hindi or other Indic question uses to ask ("मैं", "कैसे", "करूं", "सक्षम",
    "எப்படி": `asks_in_indic`) are left out: they say what is asked, not what about, and a
    rare one ("मैं", "I", in a testimonial) ranked pages that say it above the page that
    answers (the docs suite, Hindi nDCG@10 0.693 → 0.817 on dev, 0.736 → 0.782 on test)."""
    asked = [w for w in content_words(text) if not asks_in_indic(w)]
    terms = [stem(w) for w in asked]
    said = glossary.query_terms(terms)
    own = [t for t in terms if t.isascii() or not glossary.english_terms(t)]
    return list(dict.fromkeys([*own, *phonetic.query_terms(asked), *said]))


def query_vector(text: str) -> SparseVec:
    """Each distinct query term once; IDF comes from the engine, over the searcher's corpus."""
    return _merge(Counter({term_id(t): 1 for t in query_terms(text)}))
