"""Hindi is typed with free spelling variation: a question and a page that spell a word two ways
still share its BM25 term, and the words a page shows are not rewritten."""

from __future__ import annotations

import pytest

from service.answerability import content_terms
from service.text.bm25 import doc_vector, query_vector
from service.text.tokenize import bm25_terms, content_words, hindi_spelling, stem

pytestmark = pytest.mark.unit

# (one spelling, another): each pair is one word as Hindi writers type it
VARIANTS = [
    ("फ़ाइल", "फाइल"),  # nukta, as most keyboards leave it out
    ("पढ़ें", "पढें"),
    ("ज़रूरत", "जरूरत"),
    ("बनाएँ", "बनाएं"),  # chandrabindu / anusvara
    ("लड़कियाँ", "लड़कियां"),
    ("हिन्दी", "हिंदी"),  # a dead न before a consonant / anusvara
    ("सम्बन्ध", "संबंध"),
    ("रिस्पॉन्स", "रिस्पॉंस"),
    ("गये", "गए"),  # a final ये / ए
    ("चाहिये", "चाहिए"),
    ("बनायें", "बनाएं"),
    ("सूची", "सुची"),  # long / short vowel in the stem
]


@pytest.mark.parametrize(("one", "other"), VARIANTS)
def test_two_spellings_of_a_word_are_one_term(one: str, other: str) -> None:
    assert stem(one) == stem(other)


def test_different_words_stay_apart() -> None:
    # a nasal is not dropped, a vowel is not lost, and consonants differing otherwise differ
    assert stem("फ़ाइल") != stem("फ़ील्ड")
    assert stem("संबंध") != stem("सबंध")
    assert stem("पढ़ें") != stem("पड़ें")  # ढ़ and ड़ lose the dot, not their letter
    assert hindi_spelling("पढ़ें") == "पढें"
    assert len({stem(w) for w in ["कोड", "कार्ड", "क्लाउड", "फ़ाइल", "राउटर"]}) == 5


def test_latin_words_are_untouched() -> None:
    assert bm25_terms("Uploading files with UploadFile") == ["upload", "file", "uploadfil"]


def test_stop_words_are_stop_words_in_either_spelling() -> None:
    assert content_words("कहाँ कहां फ़ाइल") == ["फ़ाइल"]  # the word as written


def test_a_question_typed_another_way_scores_a_page_the_same() -> None:
    page = "फ़ाइल अपलोड प्राप्त करने के लिए `UploadFile` इस्तेमाल करें। यह हिन्दी में लिखा गया है।"
    as_written = "फ़ाइल अपलोड कैसे प्राप्त करें? हिन्दी"
    as_typed = "फाइल अपलोड कैसे प्राप्त करें? हिंदी"

    def score(question: str) -> float:
        doc = doc_vector(page)
        weights = dict(zip(doc.indices, doc.values, strict=True))
        q = query_vector(question)
        return sum(weights.get(i, 0.0) * v for i, v in zip(q.indices, q.values, strict=True))

    assert score(as_written) > 0
    assert score(as_typed) == pytest.approx(score(as_written))
    assert set(query_vector(as_typed).indices) == set(query_vector(as_written).indices)


def test_joiners_inside_a_word_do_not_cut_it() -> None:
    assert bm25_terms("क्\u200dष") == bm25_terms("क्ष")


def test_a_question_word_is_one_in_either_spelling() -> None:
    """How-to verbs say what is asked, not what about: typed without the nukta or with a
    chandrabindu they are still not content terms of the question."""
    assert content_terms("Cookie कैसे पढें?") == content_terms("Cookie कैसे पढ़ें?") == {"cooki"}
    assert content_terms("JWT token कैसे बनाएँ?") == content_terms("JWT token कैसे बनाएं?")
    assert content_terms("SQL database कैसे जोडें?") == content_terms("SQL database कैसे जोड़ें?")


def test_pronouns_in_every_form_are_stop_words() -> None:
    """ "इसे" stems to "इस": without its own stop word it matched every chunk that says "इसे"."""
    assert bm25_terms("इसे उसका इनके जिसमें आपको") == []
    assert bm25_terms("मिडलवेयर क्या है और इसे कैसे बनाएं?") == ["मिडलवेयर", "बन"]


def test_stop_words_are_stopped_in_any_spelling() -> None:
    """ "परन्तु" is "परंतु", "जाये" is "जाए", "वग़ैरह" is "वगैरह": the stop list holds one spelling."""
    assert bm25_terms("परन्तु किन्तु अन्दर वग़ैरह जाये बिल्कुल हमे इसमे") == []
