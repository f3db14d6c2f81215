from __future__ import annotations

import pytest

from service.text.bm25 import doc_vector, query_vector, term_id
from service.text.sentences import split_sentences
from service.text.tokenize import bm25_terms, script_of, words

pytestmark = pytest.mark.unit


def test_devanagari_words_keep_their_vowel_signs() -> None:
    assert words("हिन्दी भाषा") == ["हिन्दी", "भाषा"]
    assert "हिंद" in bm25_terms("हिन्दी में लिखा है")  # stemmed, one spelling, stop words gone
    assert "में" not in bm25_terms("हिन्दी में लिखा है")


def test_english_is_stemmed_and_stopped() -> None:
    assert bm25_terms("The servers are running") == ["server", "run"]


def test_hinglish_mixed_script() -> None:
    terms = bm25_terms("FastAPI ka deployment कैसे करें")
    assert "fastapi" in terms and "deploy" in terms and "कैस" not in terms


def test_script_detection_tolerates_latin_in_hindi_pages() -> None:
    assert script_of("FastAPI की विशेषताएँ OpenAPI JSON Schema के साथ") == "devanagari"
    assert script_of("plain English") == "latin"


def test_bm25_vectors_share_term_ids() -> None:
    d, q = doc_vector("rotate keys rotate"), query_vector("rotating key")
    assert set(q.indices) <= set(d.indices)
    assert d.values[d.indices.index(term_id("rotat"))] > d.values[d.indices.index(term_id("key"))]
    assert query_vector("the and of").indices == []


def test_sentences_english_and_hindi() -> None:
    text = "Use e.g. FastAPI. It costs 3.14 dollars! यह पहला वाक्य है। यह दूसरा है॥ Last one"
    assert split_sentences(text) == [
        "Use e.g. FastAPI.",
        "It costs 3.14 dollars!",
        "यह पहला वाक्य है।",
        "यह दूसरा है॥",
        "Last one",
    ]


def test_abbreviations_only_as_whole_words_at_a_sentence_end() -> None:
    # the abbreviation check looks only at the tail of the sentence so far: a word that merely
    # ends like one ("Taxi No." is one, "Casino." is not) and one at the very start still count
    text = "Approx. five. Ask Dr. Rao vs. Mr. Li. We won at the casino. Next. Wait, see No. 5 here."
    assert split_sentences(text) == [
        "Approx. five.",
        "Ask Dr. Rao vs. Mr. Li.",
        "We won at the casino.",
        "Next.",
        "Wait, see No. 5 here.",
    ]


def test_memoized_text_functions_hand_out_copies_and_skip_long_texts() -> None:
    from service.text.memo import MAX_CHARS  # noqa: PLC0415
    from service.text.terms import match_terms  # noqa: PLC0415

    first = split_sentences("One. Two.")
    first.append("changed")
    assert split_sentences("One. Two.") == ["One.", "Two."]
    terms = bm25_terms("Enable CORS middleware")
    kept = list(terms)
    terms.clear()
    assert bm25_terms("Enable CORS middleware") == kept == ["enabl", "cor", "middlewar"]
    assert isinstance(match_terms("CORSMiddleware"), frozenset)
    long = "Sentence one is here. " * (MAX_CHARS // 10)
    assert len(long) > MAX_CHARS
    assert len(split_sentences(long)) == MAX_CHARS // 10


def test_initials_stay_inside_their_sentence() -> None:
    text = (
        "Nixon named William E. Simon as the first Administrator. The U.S. Army left. "
        "J. R. R. Tolkien wrote it. E. coli grows."
    )
    assert split_sentences(text) == [
        "Nixon named William E. Simon as the first Administrator.",
        "The U.S. Army left.",
        "J. R. R. Tolkien wrote it.",
        "E. coli grows.",
    ]
    assert split_sentences(
        "Strains Y. p. orientalis were found in 1795 (Vol. 1). Jr. Gen. Lee left."
    ) == [
        "Strains Y. p. orientalis were found in 1795 (Vol. 1).",
        "Jr. Gen. Lee left.",
    ]


def test_a_closing_quote_or_bracket_stays_with_its_sentence() -> None:
    assert split_sentences('He said "Stop." Then he left (quietly.) The end.') == [
        'He said "Stop."',
        "Then he left (quietly.)",
        "The end.",
    ]
