"""Term lists: lists of bare terms that no sentence introduces (a glossary, a word list) say
nothing about their terms; a list a sentence introduces, or one of sentences or steps, does."""

from __future__ import annotations

import pytest

from service.text.markdown import units
from service.text.term_lists import is_term_list, mostly_term_lists, term_list_flags

pytestmark = pytest.mark.unit

GLOSSARY = "* टास्क\n* बैकग्राउंड टास्क\n* टास्क फ़ंक्शन"


@pytest.mark.parametrize(
    "unit",
    [GLOSSARY, "* the event\n* the startup event\n* the lifespan event", "- `APIRouter`\n- bug"],
)
def test_bare_terms_are_a_term_list(unit: str) -> None:
    assert is_term_list(unit)
    assert is_term_list(unit, before="* सुरक्षा\n* सुरक्षा स्कीम")  # a list before it


@pytest.mark.parametrize(
    ("unit", "before"),
    [
        ("* `Path()`\n* `Query()`\n* `Header()`", "When using any of:"),  # introduced
        ("* `int`\n* `float`", "आप उदाहरण के लिए उपयोग कर सकते हैं: "),
        ("* Import `CORSMiddleware`.\n* Add it as a middleware.", None),  # sentences
        ("* one term", None),  # a single item
        ("* [CORS](cors.md)\n* [Testing](testing.md)", None),  # links go somewhere
        ("* a list item that has many more words than a term\n* short", None),
        ("Import `BackgroundTasks`.", None),  # prose
    ],
)
def test_what_a_list_says_is_no_term_list(unit: str, before: str | None) -> None:
    assert not is_term_list(unit, before)


def test_a_passage_is_a_word_list_when_it_is_mostly_term_lists_two_or_more() -> None:
    glossary = f"## शब्द\n\n* सुरक्षा\n* सुरक्षा स्कीम\n\n{GLOSSARY}\n"
    assert mostly_term_lists(glossary)
    prose = (
        "सबसे पहले, `BackgroundTasks` import करें और एक parameter define करें। "
        "background task के रूप में चलाने के लिए एक function बनाएँ।\n\n" + GLOSSARY
    )
    assert not mostly_term_lists(prose)
    assert not mostly_term_lists(GLOSSARY)  # one short bare list (under its heading) is an answer
    long_list = "\n".join(f"* term {i}" for i in range(12))
    assert mostly_term_lists(long_list)  # one long list of bare terms is a word list
    introduced = "You can use, for example:\n\n* `int`\n* `float`\n* `bool`\n* `bytes`\n"
    assert not mostly_term_lists(introduced)
    assert term_list_flags(units(introduced)) == [False, False]
