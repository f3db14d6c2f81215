from __future__ import annotations

import pytest

from service.index.protocol import Hit
from service.pipeline.language import answer_sources, prefer_language, translation_key_of

pytestmark = pytest.mark.unit


def _hit(doc_id: str, lang: str, **meta: str) -> Hit:
    return Hit(id=doc_id, doc_id=doc_id, chunk_ix=0, score=1.0, text="t", lang=lang, metadata=meta)


def test_translation_key_ignores_the_language_folder() -> None:
    langs = {"en", "hi"}
    assert translation_key_of("docs/en/tutorial/cors.md", langs) == "docs/*/tutorial/cors.md"
    assert translation_key_of("hi/docs/cors.md", langs) == "*/docs/cors.md"
    assert translation_key_of("docs/api/cors.md", langs) == "docs/api/cors.md"


def test_one_source_per_translation_in_the_question_language() -> None:
    hits = [
        _hit("hi/docs/cors.md", "hi"),
        _hit("en/docs/cors.md", "en"),
        _hit("en/docs/tasks.md", "en"),
        _hit("hi/docs/other.md", "hi"),
    ]
    english = [h.doc_id for h in prefer_language("How do I enable CORS?", hits)]
    assert english == ["en/docs/cors.md", "en/docs/tasks.md", "hi/docs/other.md"]
    hindi = [h.doc_id for h in prefer_language("CORS कैसे सक्षम करें?", hits)]
    assert hindi == ["hi/docs/cors.md", "hi/docs/other.md", "en/docs/tasks.md"]


def test_a_question_in_another_indic_script_gets_its_language_s_copy() -> None:
    hits = [
        _hit("docs/en/cors.md", "en"),
        _hit("docs/hi/cors.md", "hi"),
        _hit("docs/ta/cors.md", "ta"),
        _hit("docs/bn/cors.md", "bn"),
        _hit("docs/en/tasks.md", "en"),
        _hit("docs/ta/other.md", "ta"),
    ]
    tamil = [h.doc_id for h in prefer_language("CORSMiddleware ஐ எப்படி பயன்படுத்துவது?", hits)]
    assert tamil == ["docs/ta/cors.md", "docs/ta/other.md", "docs/en/tasks.md"]
    bengali = [h.doc_id for h in prefer_language("CORSMiddleware কীভাবে ব্যবহার করব?", hits)]
    assert bengali == ["docs/bn/cors.md", "docs/en/tasks.md", "docs/ta/other.md"]
    # no copy in the question's language (Telugu): the best-ranked copy, order kept
    telugu = [h.doc_id for h in prefer_language("CORSMiddleware ను ఎలా వాడాలి?", hits)]
    assert telugu == ["docs/en/cors.md", "docs/en/tasks.md", "docs/ta/other.md"]
    # Hinglish readers take the best-ranked page's language (here English)
    hinglish = [h.doc_id for h in prefer_language("CORS kaise enable karein, batao na?", hits)]
    assert hinglish[0] == "docs/en/cors.md"


def test_a_hinglish_question_is_answered_in_one_language() -> None:
    """Its reader reads either script, but not an answer that switches between them: the
    best-ranked page's language, for every page that has a copy in it."""
    hits = [
        _hit("hi/docs/cors.md", "hi"),
        _hit("en/docs/cors.md", "en"),
        _hit("en/docs/tasks.md", "en"),
        _hit("hi/docs/tasks.md", "hi"),
        _hit("en/docs/only-english.md", "en"),
    ]
    question = "CORS aur background tasks kaise use karein?"
    assert [h.doc_id for h in prefer_language(question, hits)] == [
        "hi/docs/cors.md",
        "hi/docs/tasks.md",
        "en/docs/only-english.md",
    ]
    english_first = [hits[1], hits[0], hits[3], hits[2], hits[4]]
    assert [h.doc_id for h in prefer_language(question, english_first)] == [
        "en/docs/cors.md",
        "en/docs/tasks.md",
        "en/docs/only-english.md",
    ]


def test_front_matter_translation_of_groups_documents() -> None:
    hits = [
        _hit("guia.md", "hi", translation_of="guide.md"),
        _hit("guide.md", "en"),
    ]
    assert [h.doc_id for h in prefer_language("Where is the guide?", hits)] == ["guide.md"]
    assert [h.doc_id for h in prefer_language("गाइड कहाँ है?", hits)] == ["guia.md"]


def test_dropped_copies_leave_their_places_to_the_next_hits() -> None:
    """A Hindi question whose top five hold two English copies of its Hindi hits still gets five
    sources: the next hits down take the copies' places, in ranking order."""
    hits = [
        _hit("hi/docs/cors.md", "hi"),
        _hit("en/docs/cors.md", "en"),
        _hit("hi/docs/middleware.md", "hi"),
        _hit("en/docs/middleware.md", "en"),
        _hit("hi/docs/a.md", "hi"),
        _hit("hi/docs/b.md", "hi"),
        _hit("hi/docs/c.md", "hi"),
        _hit("hi/docs/d.md", "hi"),
    ]
    got = [h.doc_id for h in answer_sources("CORS कैसे सक्षम करें?", hits, 5)]
    assert got == [
        "hi/docs/cors.md",
        "hi/docs/middleware.md",
        "hi/docs/a.md",
        "hi/docs/b.md",
        "hi/docs/c.md",
    ]
    # no copies: exactly the top of the ranking, nothing reordered
    plain = hits[4:]
    assert answer_sources("CORS कैसे सक्षम करें?", plain, 3) == plain[:3]
