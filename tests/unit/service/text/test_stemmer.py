"""BM25 stems come from Snowball's C stemmers (PyStemmer, which snowballstemmer uses when it is
installed): ~10x faster than its pure-Python ones on a word the process has not stemmed yet, and
the same stems, so indexes made with either match queries stemmed with the other."""

from __future__ import annotations

from pathlib import Path

import pytest
import Stemmer
from snowballstemmer.english_stemmer import EnglishStemmer
from snowballstemmer.hindi_stemmer import HindiStemmer

from service.text import tokenize
from service.text.tokenize import words

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[4]


def test_the_c_stemmers_are_the_ones_used() -> None:
    assert isinstance(tokenize._english, Stemmer.Stemmer)
    assert isinstance(tokenize._hindi, Stemmer.Stemmer)


def test_they_stem_every_word_of_the_shipped_documents_as_the_python_ones_do() -> None:
    vocab: set[str] = set()
    for path in [*(ROOT / "data").rglob("*.md"), *(ROOT / "data").rglob("*.jsonl")]:
        vocab.update(words(path.read_text(encoding="utf-8", errors="replace")))
    english = sorted(w for w in vocab if w.isascii())
    hindi = sorted(w for w in vocab if tokenize._DEVANAGARI.match(w))
    assert len(english) > 5_000 and len(hindi) > 300  # English abstracts, Hindi docs pages
    slow_en, slow_hi = EnglishStemmer(), HindiStemmer()
    assert [tokenize._english.stemWord(w) for w in english] == [
        slow_en.stemWord(w) for w in english
    ]
    assert [tokenize._hindi.stemWord(w) for w in hindi] == [slow_hi.stemWord(w) for w in hindi]
