"""English words spelled in Devanagari meet their Latin spelling; English queries never move."""

from __future__ import annotations

import pytest

from service.answerability import content_keys
from service.text import glossary, phonetic
from service.text.bm25 import doc_vector, query_terms, query_vector, term_weights
from service.text.terms import held_terms
from service.text.tokenize import bm25_terms, words

pytestmark = pytest.mark.unit

SAME = [
    ("background", "बैकग्राउंड"),
    ("middleware", "मिडलवेयर"),
    ("response", "रिस्पॉन्स"),
    ("task", "टास्क"),
    ("environment", "एनवायरनमेंट"),
    ("virtual", "वर्चुअल"),
    ("applications", "एप्लिकेशन"),
    ("deploy", "डिप्लॉय"),
    ("parameter", "पैरामीटर"),
    ("dependency", "डिपेंडेंसी"),
    ("websocket", "वेबसॉकेट"),
    ("database", "डेटाबेस"),
    ("request", "रिक्वेस्ट"),
    ("template", "टेम्पलेट"),
]


@pytest.mark.parametrize(("latin", "devanagari"), SAME)
def test_both_spellings_share_one_skeleton(latin: str, devanagari: str) -> None:
    (a,), (b,) = words(latin), words(devanagari)
    assert phonetic.key(a) == phonetic.key(b) != ""


def test_short_or_unrelated_words_have_no_shared_skeleton() -> None:
    assert phonetic.key("api") == "" and phonetic.key("करें") == ""  # too few consonants
    assert phonetic.key("middleware") != phonetic.key("मॉडल")
    assert phonetic.key("naïve") == "" and phonetic.key("தமிழ்") == ""  # other scripts


def test_a_devanagari_question_finds_a_page_that_writes_the_word_in_latin() -> None:
    page = "You can add a middleware to FastAPI applications."
    question = "मिडलवेयर क्या है?"
    shared = set(query_vector(question).indices) & set(doc_vector(page).indices)
    assert shared  # before: no term in common at all
    assert not set(bm25_terms(question)) & set(bm25_terms(page))


def test_english_questions_and_word_weights_are_unchanged() -> None:
    question = "How do I add a middleware to my application?"
    assert query_terms(question) == list(dict.fromkeys(bm25_terms(question)))
    # a Hindi question's Latin words match as they are; only its Devanagari ones add skeletons
    # ("बनाएं", "make", asks: not a term; service.text.question_words.asks_in_indic)
    assert query_terms("Middleware कैसे बनाएं?") == bm25_terms("Middleware")
    assert query_terms("मिडलवेयर क्या है?")[-1] == "~mdlvr"
    page = "You can add a middleware to FastAPI applications, मिडलवेयर. " * 3
    weights = term_weights(page)
    skeletons = {t for t in weights if t.startswith(phonetic.PREFIX)}
    # a plural with and without its "s", identifier parts; none for the Devanagari word
    assert skeletons == {"~mdlvr", "~fstp", "~fst", "~plksn", "~plksns"}  # FastAPI: Fast, API
    # the words' saturated weights are as long as the words alone make the chunk
    words_only = {t: w for t, w in weights.items() if t not in skeletons}
    n = len(bm25_terms(page))
    assert words_only["middlewar"] == pytest.approx(3 * 2.2 / (3 + 1.2 * (0.25 + 0.75 * n / 120)))


def test_identifier_parts_and_acronyms_have_skeletons() -> None:
    said = {t for t in term_weights("Add the CORSMiddleware.") if t.startswith(phonetic.PREFIX)}
    (cors,), (middleware,) = words("कॉर्स"), words("मिडलवेयर")
    assert {
        phonetic.PREFIX + phonetic.key(cors),
        phonetic.PREFIX + phonetic.key(middleware),
    } <= said


def test_the_weights_of_word_terms_alone_are_the_full_weights() -> None:
    page = "Add the CORSMiddleware to your applications; the middleware runs on every request."
    full = term_weights(page)
    words_asked = ["middlewar", "request", "absent"]
    some = term_weights(page, words_asked)
    assert all(some.get(t) == full.get(t) for t in words_asked)
    assert term_weights(page, [*words_asked, "~mdlvr"])["~mdlvr"] == full["~mdlvr"]


def test_a_text_in_other_scripts_takes_the_words_alone_path_with_the_same_weights() -> None:
    """SciFact's abstracts hold "β", "–" or "naïve": no glossary word (all Devanagari), so the
    words' weights come without making the page's skeletons, and equal the full ones."""
    page = "β-cells secrete insulin – a naïve model of the café; insulin is secreted twice."
    assert not glossary.may_hold(page) and glossary.may_hold("यह ऐप app है")
    full = term_weights(page)
    asked = ["insulin", "secret", "cell", "absent"]
    some = term_weights(page, asked)
    assert all(some.get(t) == full.get(t) for t in asked)
    assert not any(t.startswith(phonetic.PREFIX) for t in some)  # no skeletons were made
    hindi = "यह ऐप app है और ऐप चलता है"  # "ऐप" adds "app" to the count: the full path
    assert term_weights(hindi, ["app"])["app"] == term_weights(hindi)["app"]


SAME_VOWEL = [
    *SAME,
    ("token", "टोकन"),
    ("model", "मॉडल"),
    ("upload", "अपलोड"),
    ("mount", "माउंट"),
    ("router", "राउटर"),
    ("type", "टाइप"),
    ("file", "फ़ाइल"),
    ("cookie", "कुकी"),
    ("table", "टेबल"),
    ("cache", "कैश"),
    ("button", "बटन"),
    ("connect", "कनेक्ट"),
    ("server", "सर्वर"),
    ("docker", "डॉकर"),
    ("browser", "ब्राउज़र"),
    ("client", "क्लाइंट"),
]


@pytest.mark.parametrize(("latin", "devanagari"), SAME_VOWEL)
def test_a_loanword_s_first_vowel_agrees_in_both_spellings(latin: str, devanagari: str) -> None:
    (a,), (b,) = words(latin), words(devanagari)
    assert phonetic.vowels_agree(phonetic.first_vowel(b), a)


@pytest.mark.parametrize(
    ("latin", "devanagari"),
    [
        ("curly", "केरल"),  # Kerala
        ("brain", "बिरयानी"),  # biryani
        ("color", "खिलाड़ी"),  # player
        ("clear", "खिलाड़ी"),
        ("gemini", "घूमने"),  # to roam
        ("button", "बैठना"),  # to sit
        ("remain", "रामायण"),
        ("react", "रखते"),  # keep
        ("light", "लगता"),  # seems
        ("secure", "सक्रिय"),  # active
        ("ubuntu", "बांटें"),  # share
    ],
)
def test_a_native_word_that_shares_a_skeleton_by_chance_disagrees_in_its_vowel(
    latin: str, devanagari: str
) -> None:
    (a,), (b,) = words(latin), words(devanagari)
    assert phonetic.key(a) == phonetic.key(b) != ""  # the collision
    assert not phonetic.vowels_agree(phonetic.first_vowel(b), a)


def test_a_question_word_is_held_by_a_sentence_only_where_the_vowel_agrees() -> None:
    kerala = content_keys("केरल घूमने का सबसे अच्छा समय कब है?")
    assert not set(kerala) & held_terms("Use curly braces for the path.", kerala)
    token = content_keys("टोकन कैसे बनाएं?")
    assert set(token) <= held_terms("Create a token with the secret key.", token)
    # a word with no plain first vowel is matched on its skeleton alone, as before
    assert phonetic.first_vowel("त्रुटि") is None and phonetic.first_vowel("अंदर") is None
