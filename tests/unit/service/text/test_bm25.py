"""A question's BM25 terms leave out the words a Hindi or other Indic question asks with; an
English or Hinglish question keeps all of its own."""

from __future__ import annotations

from service.text.bm25 import doc_vector, query_terms, query_vector, term_id
from service.text.question_words import asks_in_indic
from service.text.tokenize import bm25_terms


def test_a_hindi_question_asks_for_what_it_is_about() -> None:
    # "मैं" (I) is rare in documentation: as a term it ranked testimonials first
    terms = query_terms("मैं अपने FastAPI ऐप में CORS कैसे सक्षम करूं?")
    assert "cor" in terms and "fastapi" in terms and "app" in terms  # "ऐप" is asked as "app"
    for asking in ("मैं", "सक्षम", "करूं"):
        assert not set(bm25_terms(asking)) & set(terms), asking
    assert not any(t.startswith("~sksm") for t in terms)  # nor their Latin-spelling keys
    assert query_terms("CORS कैसे चालू करें?") == ["cor"]


def test_other_indic_scripts_and_spellings() -> None:
    assert asks_in_indic("எப்படி") and asks_in_indic("করূঁ") is False
    assert asks_in_indic("करूँ") and asks_in_indic("करूं")  # either nasal sign
    assert query_terms("பிரான்சின் தலைநகரம் எது?") == ["பிரான்சின்", "தலைநகரம்"]


def test_english_and_hinglish_questions_keep_their_terms() -> None:
    for q in ("How do I enable CORS in my app?", "FastAPI app mein CORS kaise enable karein?"):
        assert [t for t in query_terms(q) if t in bm25_terms(q)] == bm25_terms(q)
    assert not asks_in_indic("how") and not asks_in_indic("kaise")


def test_a_hindi_software_word_is_asked_by_its_english_term_and_pages_say_it() -> None:
    """ "ऐप" (app) is rare in Hindi pages, which write "app": its own IDF made the one page that
    spells it so (a glossary, a home page) outrank the page that answers. It is asked as "app",
    and a page that writes "ऐप" carries "app" too, so the concept has one IDF in both scripts."""
    assert "ऐप" not in query_terms("FastAPI ऐप") and "app" in query_terms("FastAPI ऐप")
    assert term_id("app") in doc_vector("यह ऐप तेज़ है").indices
    assert term_id("app") in doc_vector("This app is fast").indices
    assert set(query_vector("परीक्षण कैसे करें").indices) >= {term_id("test")}
    # a Hindi word the glossary does not know keeps its own term
    assert bm25_terms("मौसम")[0] in query_terms("मौसम कैसा है")
