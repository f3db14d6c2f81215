from service.answerability import content_keys
from service.text.bm25 import doc_vector, query_terms, term_id
from service.text.glossary import _ENTRIES, _table, english_terms, may_hold
from service.text.terms import held_terms
from service.text.tokenize import bm25_terms


def test_every_entry_is_one_hindi_term_with_english_terms() -> None:
    hindi = [line.split()[0] for line in _ENTRIES.strip().splitlines()]
    assert all(len(bm25_terms(w)) == 1 for w in hindi)
    assert all(english_terms(bm25_terms(w)[0]) for w in hindi)
    # spelling variants (nukta, chandrabindu) meet the same English words
    assert english_terms(bm25_terms("फ़ाइल")[0]) == english_terms(bm25_terms("फाइल")[0])
    assert all(t.isascii() for said in _table().values() for t in said)


def test_a_hindi_question_also_asks_for_the_english_words() -> None:
    terms = query_terms("FastAPI एप्लिकेशन का परीक्षण कैसे करें?")
    assert {"test", "applic", "app"} <= set(terms)
    # the Hindi word is asked by its English term, which a page writing it carries too
    assert bm25_terms("परीक्षण")[0] not in terms
    assert term_id("test") in doc_vector("ऐप का परीक्षण करें").indices
    # an English question, and a Hindi word outside the list, ask for exactly their own terms
    assert query_terms("How do I test my app?") == bm25_terms("How do I test my app?")
    other = "नदी कितनी लंबी है"  # "कितनी" (how much) asks: not a term (test_bm25)
    assert [t for t in query_terms(other) if not t.startswith("~")] == bm25_terms("नदी लंबी है")


def test_a_sentence_saying_the_english_word_holds_the_hindi_term() -> None:
    question = "सत्यापन त्रुटि कैसे दिखती है?"
    keys = content_keys(question)
    asked = {bm25_terms("सत्यापन")[0]: "valid", bm25_terms("त्रुटि")[0]: "error"}
    assert asked.items() <= keys.items()
    held = held_terms("The error says where the validation failed.", keys)
    assert set(asked) <= held
    assert not set(asked) & held_terms("The page loads fast.", keys)
    # an English word in Devanagari still meets its Latin spelling by its skeleton
    assert bm25_terms("मिडलवेयर")[0] in held_terms("Add a middleware.", content_keys("मिडलवेयर"))


def test_every_glossary_word_is_written_in_devanagari() -> None:
    """`may_hold` looks for Devanagari: a glossary word in another script would be missed."""
    for hindi in _table():
        assert may_hold(hindi), hindi


def test_a_short_loanword_in_devanagari_asks_for_its_english_word() -> None:
    """The loanword "पाथ" (path) has two consonants, too few for a skeleton
    (`service.text.phonetic`): it met nothing, so "पाथ पैरामीटर क्या है?" asked for
    "parameter" alone and the demo abstained."""
    question = "पाथ पैरामीटर क्या है?"
    assert "path" in query_terms(question)
    keys = content_keys(question)
    held = held_terms("Path parameters are declared with Python format strings.", keys)
    assert {bm25_terms("पाथ")[0], bm25_terms("पैरामीटर")[0]} <= held
    for hindi, english in [("हेडर", "header"), ("एपीआई", "api"), ("यूआरएल", "url")]:
        assert english_terms(bm25_terms(hindi)[0])[0] == bm25_terms(english)[0]
    # a page writing the loanword carries the English term, as it does for the list's others
    assert term_id("path") in doc_vector("पाथ पैरामीटर घोषित करें").indices
