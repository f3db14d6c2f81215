from __future__ import annotations

import pytest

from service.generate import select
from service.generate.extractive import pick_sentences, render
from service.generate.protocol import Passage
from service.ingest.chunking import chunk_document
from service.text.markdown import blocks, said, strip_directives, units

pytestmark = pytest.mark.unit


def test_the_sentence_with_the_distinguishing_term_wins() -> None:
    passages = [
        Passage(
            id="S1",
            title="CORS",
            text=(
                "An origin is the combination of protocol, domain and port. "
                "CORS refers to situations when a frontend calls a backend in another origin. "
                "You can configure it in your application using the CORSMiddleware. "
                "The origin of a request is sent by the browser."
            ),
        )
    ]
    picked = pick_sentences("How do I enable CORS with the middleware?", passages, 3)
    assert picked[0] == ("You can configure it in your application using the CORSMiddleware.", "S1")


def test_no_padding_when_one_sentence_covers_the_question() -> None:
    passages = [
        Passage(id="S1", title="", text="Deploys happen on Tuesday. Parking is free."),
        Passage(id="S2", title="", text="Deploys are fun. Deploys are logged."),
    ]
    assert pick_sentences("When do deploys happen?", passages, 3) == [
        ("Deploys happen on Tuesday.", "S1")
    ]


def test_trusted_passage_wins_a_tie_and_nothing_matches_gives_nothing() -> None:
    passages = [
        Passage(id="S1", title="", text="Keys rotate monthly."),
        Passage(id="S2", title="", text="Keys rotate monthly too."),
    ]
    assert pick_sentences("How often do keys rotate?", passages, 3)[0][1] == "S1"
    assert pick_sentences("quantum chromodynamics", passages, 3) == []


def test_a_second_sentence_must_add_question_terms() -> None:
    passages = [
        Passage(
            id="S1",
            title="",
            text="The office opens at nine. The cafeteria opens at noon. Parking is free.",
        )
    ]
    picked = pick_sentences("When do the office and the cafeteria open?", passages, 3)
    assert [s for s, _ in picked] == ["The office opens at nine.", "The cafeteria opens at noon."]


def test_mkdocs_include_directives_are_removed() -> None:
    md = "Use it:\n\n{* ../../docs_src/cors/tutorial001_py310.py hl[2,6:11] *}\n\nThen run.\n"
    assert strip_directives(md) == "Use it:\n\n\n\nThen run.\n"
    assert strip_directives('--8<-- "snippet.md"\ntext') == "\ntext"


def test_layout_markup_is_removed_and_code_is_not() -> None:
    md = (
        "/// note | Technical Details\n\n"
        'You could use <abbr title="Cross-Origin Resource Sharing">CORS</abbr>, see'
        ' <a href="https://a.b/c" target="_blank">the docs</a>.\n\n'
        "///\n\n"
        '<div class="termy">\n\n'
        '```console\n$ run <font color="#4E9A06">main.py</font>\n```\n\n</div>\n\n'
        '<details markdown="1">\n<summary><code>fastapi dev</code> कमांड</summary>\n\n'
        'Write `<div>` in a template.<br>Keep a < b and List<String>.\n<img src="/i.png">\n'
        "<!-- a comment\nover lines -->\n"
        "<script>track()</script>\n</details>\n"
    )
    assert units(strip_directives(md)) == [
        "You could use CORS, see [the docs](https://a.b/c).",
        '```console\n$ run <font color="#4E9A06">main.py</font>\n```',
        "`fastapi dev` कमांड",
        "Write `<div>` in a template.",
        "Keep a < b and List<String>.",
    ]
    # mkdocstrings' autodoc line and its options are a build-time directive; a `:::` container
    # keeps what it holds
    autodoc = (
        "Import it from `fastapi`.\n\n::: fastapi.APIRouter\n    options:\n        members:\n"
        "            - websocket\n\n:::tip Good to know\nKeep this.\n:::\n\n"
        "Not options:\n    an indented line after prose stays.\n"
    )
    assert units(strip_directives(autodoc)) == [
        "Import it from `fastapi`.",
        "Keep this.",
        "Not options: an indented line after prose stays.",
    ]
    # code blocks keep their lines exactly, markup and all
    code = "```html\n<div>\n///\n::: x\n    y\n</div>\n```"
    assert strip_directives(code) == code


MD = """Install it first.

```console
$ pip install "fastapi[standard]"

$ fastapi dev main.py
```

You can declare:

- a path parameter
- a query parameter

Then run it. It reloads on changes."""


def test_blocks_keep_code_lists_and_prose_apart() -> None:
    kinds = [k for k, _ in blocks(MD)]
    assert kinds == ["para", "code", "para", "list", "para"]
    assert blocks(MD)[1][1].count("\n") == 4  # the blank line inside the fence stays
    assert units(MD)[-2:] == ["Then run it.", "It reloads on changes."]


def test_extractive_answer_keeps_a_code_block_and_a_list() -> None:
    code = '```console\n$ pip install "fastapi[standard]"\n```'
    text = render([("Install it first.", "S1"), (code, "S1"), ("- a\n- b", "S2")])
    assert text == f"Install it first. [S1]\n\n{code}\n[S1]\n\n- a\n- b\n[S2]"


def test_chunks_keep_markdown_blocks_on_their_own_lines() -> None:
    chunks = chunk_document(
        MD, title="T", markdown=True, count_tokens=lambda ts: [len(t.split()) + 2 for t in ts]
    )
    assert len(chunks) == 1
    text = chunks[0].text
    assert (
        '\n\n```console\n$ pip install "fastapi[standard]"\n\n$ fastapi dev main.py\n```\n\n'
        in text
    )
    assert "\n\n- a path parameter\n- a query parameter\n\n" in text


def test_sentence_similarity_picks_the_answer_that_shares_no_words(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = (
        "The tower was finished in 1889 for the world's fair. "
        "The tower is made of wrought iron and was built by the company of Gustave Eiffel."
    )
    question = "Who constructed the tower?"
    lexical = [Passage(id="S1", title="", text=text, sentence_scores=[0.2, 0.7])]
    monkeypatch.setattr(select, "SIM_WEIGHT", 0.0)
    assert pick_sentences(question, lexical, 1)[0][0].startswith("The tower was finished")
    monkeypatch.setattr(select, "SIM_WEIGHT", 1.0)
    assert pick_sentences(question, lexical, 1)[0][0].startswith("The tower is made")
    # scores that do not align with the passage's units are ignored
    wrong = [Passage(id="S1", title="", text=text, sentence_scores=[0.2])]
    assert pick_sentences(question, wrong, 1)[0][0].startswith("The tower was finished")


def test_a_devanagari_question_finds_the_sentence_that_writes_its_word_in_latin() -> None:
    page = Passage(
        id="S1",
        title="मिडलवेयर",
        text=(
            "यह page एक उदाहरण है। "
            "आप app में एक middleware जोड़ सकते हैं, जो हर request पर चलता है। "
            "बाकी सब settings में है।"
        ),
    )
    picked = pick_sentences("मिडलवेयर कैसे काम करता है?", [page], limit=3)
    assert [s for s, _ in picked] == ["आप app में एक middleware जोड़ सकते हैं, जो हर request पर चलता है।"]


def test_a_sentence_that_carries_on_comes_with_the_one_before_it() -> None:
    text = (
        "Cookies are small pieces of data. "
        "You can declare a parameter of type Response in your path operation function. "
        "And then you can set cookies in that temporary response object. "
        "And then you can return any object you need."
    )
    picked = pick_sentences(
        "Where are cookies set in a response?", [Passage(id="S1", title="", text=text)], 3
    )
    assert picked == [
        ("You can declare a parameter of type Response in your path operation function.", "S1"),
        ("And then you can set cookies in that temporary response object.", "S1"),
    ]


COOKIE_STEPS = (
    "Cookies are small pieces of data. "
    "You can declare a parameter of type Response in your path operation function. "
    "And then you can set cookies in that temporary response object. "
    "And then you can return any object you need. "
    "The cookies are sent with the response."
)


def test_a_how_question_carries_on_with_the_steps_that_follow() -> None:
    """The step after the covered answer is part of the procedure; the remark after it is not."""
    picked = pick_sentences(
        "How do I set a cookie?", [Passage(id="S1", title="", text=COOKIE_STEPS)], 4
    )
    assert [s for s, _ in picked] == [
        "You can declare a parameter of type Response in your path operation function.",
        "And then you can set cookies in that temporary response object.",
        "And then you can return any object you need.",
    ]


def test_steps_of_the_procedure_beat_the_sentences_that_only_share_words() -> None:
    """ "How do I enable CORS": the steps name no question word but "CORS" once; the sentences
    about CORS that tell nothing to do lose to the procedure."""
    page = Passage(
        id="S1",
        title="CORS",
        text=(
            "CORS is enabled per origin, and CORS requests carry an Origin header.\n\n"
            "You can configure CORS in your application using the `CORSMiddleware`.\n\n"
            "* Import `CORSMiddleware`.\n"
            "* Create a list of allowed origins.\n"
            "* Add it as a middleware to your application.\n\n"
            "CORS preflight requests are OPTIONS requests with an Origin header."
        ),
    )
    picked = [s for s, _ in pick_sentences("How do I enable CORS?", [page], 3)]
    assert picked[:2] == [
        "You can configure CORS in your application using the `CORSMiddleware`.",
        "* Import `CORSMiddleware`.\n* Create a list of allowed origins.\n"
        "* Add it as a middleware to your application.",
    ]
    assert not any("preflight" in s for s in picked)


def test_a_hindi_how_question_takes_the_hindi_steps() -> None:
    page = Passage(
        id="S1",
        title="Cookie",
        text=(
            "Cookie browser में रखी जाती हैं। "
            "पहले `Cookie` import करें। "
            "फिर cookie parameters को `Path` और `Query` जैसी ही structure से declare करें। "
            "Browsers cookies को विशेष तरीकों से handle करते हैं।"
        ),
    )
    picked = [s for s, _ in pick_sentences("Cookie कैसे इस्तेमाल करें?", [page], 3)]
    assert picked == [
        "पहले `Cookie` import करें।",
        "फिर cookie parameters को `Path` और `Query` जैसी ही structure से declare करें।",
    ]


def test_a_hindi_how_question_takes_the_step_that_names_its_action() -> None:
    """ "JWT token कैसे बनाएं?" (how do I create one): the step that says "बनाएँ" (create) is the
    answer, not the first passage's remark that only shares "JWT token"."""
    passages = [
        Passage(
            id="S1",
            title="JWT",
            text="JWT tokens के साथ प्रयोग करने के लिए jwt.io देखें। JWT token signed होता है।",
        ),
        Passage(id="S2", title="JWT", text="एक नया JWT access token बनाएँ और उसे return करें।"),
    ]
    picked = pick_sentences("JWT token कैसे बनाएं?", passages, 3)
    assert picked[0] == ("एक नया JWT access token बनाएँ और उसे return करें।", "S2")


BACKGROUND = (
    "You can define background tasks to be run *after* returning a response.\n\n"
    "This is useful for operations that need to happen after a request.\n\n"
    "First, import `BackgroundTasks` and define a parameter of type `BackgroundTasks`.\n\n"
    "The weather was fine.\n\n"
    "Inside of your function, pass your task function to the background tasks object with "
    "`.add_task()`.\n\n"
    "Then restart the server."
)


def test_a_how_answer_goes_on_with_the_steps_of_its_passage_once_covered() -> None:
    """Naming the tool covers the question's words ("run", "task", "after", "return",
    "response"), not its procedure: the answer goes on with the passage's steps that hold one
    of them, in order, up to its limit; a step holding none ("Then restart the server.") and a
    remark stay out; a "what" question stops when covered."""
    page = [Passage(id="S1", title="Background Tasks", text=BACKGROUND)]
    how = "How can I run a task after returning a response?"
    picked = [s for s, _ in pick_sentences(how, page, 4)]
    assert picked == [
        "You can define background tasks to be run *after* returning a response.",
        "First, import `BackgroundTasks` and define a parameter of type `BackgroundTasks`.",
        "Inside of your function, pass your task function to the background tasks object with "
        "`.add_task()`.",
    ]
    assert [s for s, _ in pick_sentences(how, page, 2)] == picked[:2]  # the limit holds
    what = "What runs a task after returning a response?"
    assert [s for s, _ in pick_sentences(what, page, 4)] == picked[:1]


def test_a_how_answer_goes_on_with_the_steps_of_the_second_passage() -> None:
    """The second passage is where a how-question's procedure is put
    (`service.pipeline.procedure`): once covered, the answer goes on with its steps that hold
    a question term even when it quoted nothing of it, but not with a third passage's."""
    passages = [
        Passage(
            id="S1",
            title="Header Parameters › Declare",
            text="To read a header parameter, you need to use `Header`. Headers are sent first.",
        ),
        Passage(
            id="S2",
            title="Header Parameters › Import",
            text="First import `Header` from `fastapi`. Then restart the server.",
        ),
        Passage(id="S3", title="Cookies", text="Import `Cookie` to read a cookie header."),
    ]
    picked = pick_sentences("How do I read a header parameter?", passages, 3)
    assert picked == [
        ("To read a header parameter, you need to use `Header`.", "S1"),
        ("First import `Header` from `fastapi`.", "S2"),
    ]


def test_a_how_answer_goes_on_with_the_steps_of_the_passage_marked_as_the_procedure() -> None:
    """Where the pipeline marks the page's procedure (`Passage.procedure`: it may have put it
    first), the answer goes on with that passage's steps, not with the second passage's."""
    covers = Passage(
        id="S1",
        title="Header Parameters › Declare",
        text="To read a header parameter, you need to use `Header`. Headers are sent first.",
    )
    cookie = Passage(id="S2", title="Cookies", text="Import `Cookie` to read a cookie header.")
    steps = "First import `Header` from `fastapi`. Then restart the server."
    marked = Passage(id="S3", title="Header Parameters › Import", text=steps, procedure=True)
    question = "How do I read a header parameter?"
    assert pick_sentences(question, [covers, cookie, marked], 3) == [
        ("To read a header parameter, you need to use `Header`.", "S1"),
        ("First import `Header` from `fastapi`.", "S3"),
    ]
    unmarked = Passage(id="S3", title=marked.title, text=steps)
    assert pick_sentences(question, [covers, cookie, unmarked], 3) == [
        ("To read a header parameter, you need to use `Header`.", "S1"),
        ("Import `Cookie` to read a cookie header.", "S2"),
    ]


def test_a_what_answer_takes_the_sentence_that_says_what_it_does() -> None:
    """ "What does X do?": the sentence naming X is quoted with the one after it that refers
    back to it ("It receives …"); another question does not take it, nor a sentence that does
    not refer back."""
    text = (
        "A database may not accept a Pydantic model. For that, you can use `jsonable_encoder`. "
        "It receives an object and returns a JSON compatible version. Databases differ."
    )
    page = [Passage(id="S1", title="JSON Compatible Encoder", text=text)]
    what = [s for s, _ in pick_sentences("What does jsonable_encoder do?", page, 3)]
    assert what == [
        "A database may not accept a Pydantic model.",  # what "For that" refers to
        "For that, you can use `jsonable_encoder`.",
        "It receives an object and returns a JSON compatible version.",
    ]
    which = [s for s, _ in pick_sentences("Which function is jsonable_encoder?", page, 3)]
    assert which == [
        "A database may not accept a Pydantic model.",
        "For that, you can use `jsonable_encoder`.",
    ]


def test_the_same_passage_without_how_stops_when_covered() -> None:
    """Steps count only for a question that asks how: "what is" is answered by a definition."""
    picked = pick_sentences("What is a cookie?", [Passage(id="S1", title="", text=COOKIE_STEPS)], 3)
    assert [s for s, _ in picked] == ["Cookies are small pieces of data."]


def test_no_antecedent_from_a_block_another_passage_or_twice() -> None:
    code = "```python\nresponse.set_cookie('a', 'b')\n```"
    passages = [
        Passage(
            id="S1", title="", text=f"A cookie is set. It lasts.\n\n{code}\n\nThen it is sent."
        ),
        Passage(id="S2", title="", text="It is sent with the response."),
    ]
    cands = select.candidates(passages)
    assert [c.text for c in cands] == [
        "A cookie is set.",
        "It lasts.",
        code,
        "Then it is sent.",
        "It is sent with the response.",
    ]
    after_block, first_of_s2 = cands[3], cands[4]
    assert select.with_context([after_block, first_of_s2], cands) == [after_block, first_of_s2]
    both = select.with_context([cands[1], cands[0]], cands)  # chosen after: first, once
    assert [c.text for c in both] == ["A cookie is set.", "It lasts."]


def test_an_antecedent_chosen_later_comes_first_with_its_own_context() -> None:
    """ "It is also known as the plastome." leans on the sentence before it and is the
    antecedent of "Its existence …", chosen first: the three read in the page's order, once."""
    text = (
        "Chloroplasts have their own DNA, often abbreviated as cpDNA. It is also known as the "
        "plastome. Its existence was first proved in 1962."
    )
    cands = select.candidates([Passage(id="S1", title="", text=text)])
    quoted = select.with_context([cands[2], cands[1]], cands)
    assert [c.pos for c in quoted] == [0, 1, 2]
    assert [c.pos for c in select.with_context([cands[2]], cands)] == [1, 2]  # one level


def test_a_run_of_steps_keeps_the_sentence_its_first_step_leans_on_before_it() -> None:
    """ "Then import …" opens a run of steps chosen after a later step; the sentence it follows
    comes just before the run, not after it."""
    text = "Create a file `main.py`. Then import `FastAPI` in it. Add a path operation to it."
    cands = select.candidates([Passage(id="S1", title="", text=text)], steps=True)
    assert [c.step for c in cands] == [True, True, True]
    cands[0].step = False  # a sentence that is no step, before a run of two
    quoted = select.in_reading_order(select.with_context([cands[2], cands[1]], cands))
    assert [c.pos for c in quoted] == [0, 1, 2]


def test_a_unit_chosen_after_the_sentence_that_introduces_it_comes_right_after_it() -> None:
    code = "```python\nfrom fastapi import File\n```"
    text = f"Import `File` from `fastapi`:\n\n{code}"
    passages = [
        Passage(id="S1", title="", text=text),
        Passage(id="S2", title="", text="Files are sent as form data."),
    ]
    cands = select.candidates(passages)
    intro, block, other = cands
    quoted = select.with_context([intro, other, block], cands)
    assert [c.text for c in quoted] == [intro.text, code, other.text]


def test_a_sentence_ending_in_a_colon_comes_with_what_it_introduces() -> None:
    steps = "* Import `CORSMiddleware`.\n* Create a list of allowed origins."
    text = (
        "CORS lets a browser call another origin. "
        f"You can enable CORS in your app with the `CORSMiddleware`:\n\n{steps}\n\n"
        "The defaults are restrictive."
    )
    picked = pick_sentences(
        "How do I enable CORS with the CORSMiddleware?", [Passage(id="S1", title="", text=text)], 3
    )
    assert picked == [
        ("You can enable CORS in your app with the `CORSMiddleware`:", "S1"),
        (steps, "S1"),
    ]
    # the unit it introduces is quoted once, also when chosen on its own
    cands = select.candidates([Passage(id="S1", title="", text="Do this:\n\nRun it. Stop.")])
    assert [c.text for c in select.with_context([cands[0], cands[1]], cands)] == [
        "Do this:",
        "Run it.",
    ]
    # nothing follows the last unit of a passage, and a list ending in a colon introduces nothing
    last = select.candidates([Passage(id="S1", title="", text="Then run:")])
    assert select.with_context(last, last) == last
    assert not select.introduces("* a step:\n* another:")
    assert not select.introduces("A ratio of 3:1.")


@pytest.mark.parametrize(
    ("sentence", "carries"),
    [
        ("And then you can set cookies.", True),
        ("It was built in 1889.", True),
        ("This function runs later.", True),
        ("Italy is a country.", False),
        ("Thistles grow here.", False),
        ("फिर सर्वर चलाएँ।", True),
        ("इसके बाद सर्वर चलाएँ।", True),
        ("लेकिन आप इसे `openapi_url` के साथ configure कर सकते हैं।", True),
        ("मगर यह धीमा है।", True),
        ("लेकिनतो", False),
        ("इस्तेमाल करें।", False),
        ("* It is a list item\n* and another", False),
    ],
)
def test_which_sentences_carry_on(sentence: str, carries: bool) -> None:
    assert select.carries_on(sentence) is carries


def test_a_link_says_its_text_not_its_target() -> None:
    """A changelog line's links all point at github.com/fastapi/fastapi/pull/…: their targets
    do not make the line say "FastAPI" (a Hinglish question about testing got two such
    attribution lines quoted after the sentence that answered it)."""
    passages = [
        Passage(
            id="S1",
            title="Release notes",
            text=(
                "[#12731](https://github.com/fastapi/fastapi/pull/12731) by "
                "[@sptcnl](https://github.com/sptcnl). "
                "PR [#12741](https://github.com/fastapi/fastapi/pull/12741) by "
                "[@9zimin9](https://github.com/9zimin9)."
            ),
        ),
        Passage(
            id="S2",
            title="Testing",
            text=(
                "You can use the TestClient class to test applications. "
                "Read more in the [FastAPI testing docs](https://fastapi.tiangolo.com/tutorial/testing/)."
            ),
        ),
    ]
    picked = pick_sentences("Which client tests a FastAPI app?", passages, 3)
    assert picked and all(source == "S2" for _, source in picked)
    assert (
        "Read more in the [FastAPI testing docs](https://fastapi.tiangolo.com/tutorial/testing/).",
        "S2",
    ) in picked  # its text still says "FastAPI"


@pytest.mark.parametrize(
    ("unit", "says"),
    [
        ("see [the docs](https://x.org/fastapi/a_(b)) now", "see the docs now"),
        ('an ![image](img/a.png "title") here', "an image here"),
        ("go to <https://fastapi.tiangolo.com> today", "go to  today"),
        ("a [bracket] and (paren) stay", "a [bracket] and (paren) stay"),
        (
            "```\ncurl [x](http://localhost:8000/items/)\n```",
            "```\ncurl [x](http://localhost:8000/items/)\n```",
        ),
    ],
)
def test_what_a_unit_says(unit: str, says: str) -> None:
    assert said(unit) == says


def test_a_procedure_reads_top_down_even_when_a_later_step_was_chosen_first() -> None:
    """The list of steps names "CORSMiddleware" and wins first; the sentence before it, which
    says what the steps do, is quoted before it, as the page says them."""
    page = Passage(
        id="S1",
        title="CORS",
        text=(
            "CORS का मतलब है कि frontend किसी दूसरे origin से बात करता है।\n\n"
            "आप इसे अपनी application में configure कर सकते हैं।\n\n"
            "* `CORSMiddleware` import करें।\n* allowed origins की एक list बनाएँ।"
        ),
    )
    picked = [s for s, _ in pick_sentences("CORS कैसे चालू करें?", [page], 3)]
    tool = "आप इसे अपनी application में configure कर सकते हैं।"
    steps = "* `CORSMiddleware` import करें।\n* allowed origins की एक list बनाएँ।"
    assert tool in picked and steps in picked
    assert picked.index(tool) + 1 == picked.index(steps)


def test_a_step_that_introduces_a_list_keeps_it_right_after_it_in_a_run_of_steps() -> None:
    """The step "You can also specify whether your backend allows:" joins the run before it;
    the list it introduces comes with it, not after a later step chosen in between (the demo's
    "How do I allow all origins?")."""
    text = (
        "* Import `CORSMiddleware`.\n* Create a list of allowed origins.\n\n"
        "You can also specify whether your backend allows:\n\n"
        "* Credentials.\n* Specific HTTP methods.\n\n"
        "The defaults are restrictive. You can use `['*']` to allow any origin."
    )
    cands = select.candidates([Passage(id="S1", title="", text=text)], steps=True)
    assert [c.step for c in cands] == [True, True, False, False, True]
    steps, intro, listed, _, star = cands
    quoted = select.in_reading_order(select.with_context([steps, star, intro], cands))
    assert [c.pos for c in quoted] == [steps.pos, intro.pos, listed.pos, star.pos]


def test_a_word_list_is_never_quoted_but_an_introduced_list_is() -> None:
    """A glossary's words are the question's words back; a list a sentence introduces is what
    that sentence says."""
    glossary = Passage(
        id="S1", title="", text="* टास्क\n* बैकग्राउंड टास्क\n* टास्क फ़ंक्शन\n\n* सुरक्षा\n* सुरक्षा स्कीम"
    )
    page = Passage(
        id="S2",
        title="",
        text="सबसे पहले, `BackgroundTasks` import करें और एक parameter define करें।",
    )
    picked = pick_sentences("बैकग्राउंड टास्क कैसे चलाएं?", [glossary, page], 3)
    assert all(sid == "S2" for _, sid in picked)
    types = Passage(
        id="S1", title="", text="You can use these types:\n\n* `int`\n* `float`\n* `bool`"
    )
    picked = pick_sentences("Which types can I use?", [types], 3)
    assert ("* `int`\n* `float`\n* `bool`", "S1") in picked
    # one bare list under its heading is that section's answer, not a word list
    section = Passage(
        id="S1", title="Databases › Supported databases", text="* PostgreSQL\n* MySQL\n* SQLite"
    )
    picked = pick_sentences("Which databases are supported: PostgreSQL?", [section], 3)
    assert picked == [("* PostgreSQL\n* MySQL\n* SQLite", "S1")]


def test_a_how_answer_never_quotes_a_changelog_entry() -> None:
    """Release notes say when something changed, not how to do it; a question about a change
    may still be answered from them."""
    notes = Passage(
        id="S1",
        title="Release Notes › 0.6.2",
        text="* Add a SQL database example to the docs. PR [#48](https://github.com/o/r/pull/48).",
    )
    guide = Passage(id="S2", title="SQL", text="Import `SQLModel` and create a SQL database model.")
    how = pick_sentences("How do I add a SQL database?", [notes, guide], 3)
    assert all(sid == "S2" for _, sid in how), how
    when = pick_sentences("When was a SQL database example added to the docs?", [notes], 3)
    assert [sid for _, sid in when] == ["S1"]


def test_how_a_question_is_framed_is_not_what_it_asks_about() -> None:
    """ "make sure", "at least" and an auxiliary's contraction ("don't") are no question terms,
    so a sentence that only shares them (FastAPI's "Make sure you upgrade …" tip) is not
    quoted; without the framing it takes the first place (found on the docs suite's fresh
    questions, README issue #14)."""
    passages = [
        Passage(
            id="S1",
            title="Query Parameters",
            text=(
                "Make sure you upgrade the version at least once before using it. "
                "Don't forget to read the guide. "
                "Set the parameter max_length to 50 to validate the query string length."
            ),
        )
    ]
    q = "How can I make sure my query string is at least validated? Why don't I see it?"
    picked = pick_sentences(q, passages, 3)
    assert [s for s, _ in picked] == [
        "Set the parameter max_length to 50 to validate the query string length."
    ]
    # the same sentence wins on its own terms once the framing is gone
    assert pick_sentences("How can I validate my query string?", passages, 3) == picked


def test_a_version_number_holds_no_small_numbers() -> None:
    """A question's "1" is not the last number of a version ("0.95.1")."""
    passages = [
        Passage(
            id="S1",
            title="Path",
            text=(
                "Upgrade to version 0.95.1 before using path parameters. "
                "With ge=1 the path parameter item_id must be 1 or more."
            ),
        )
    ]
    picked = pick_sentences("Which path parameter value is 1?", passages, 1)
    assert picked == [("With ge=1 the path parameter item_id must be 1 or more.", "S1")]
    cands = select.candidates(passages)
    assert "1" not in cands[0].terms and "1" in cands[1].terms


def test_a_need_is_quoted_with_the_sentence_that_says_how_to_meet_it() -> None:
    """A chosen sentence that states a need is followed by the next one when that one opens
    with "For that" (or "To do that", "इसके लिए", …): the need alone answers nothing; and a
    chosen "For that …" sentence comes after the need it refers to."""
    passages = [
        Passage(
            id="S1",
            title="Request",
            text=(
                "Let's imagine you want to get the client's IP address inside your function. "
                "For that you need to access the request directly. "
                "The request has many attributes."
            ),
        )
    ]
    picked = [s for s, _ in pick_sentences("How do I get the client's IP address?", passages, 1)]
    assert picked == [
        "Let's imagine you want to get the client's IP address inside your function.",
        "For that you need to access the request directly.",
    ]
    assert select.for_that("इसके लिए, आप app.add_middleware() का उपयोग करते हैं।")
    assert select.for_that("To do that, use the standard Python type hint typing.Union:")
    assert not select.for_that("Formatting that text is optional.")
    assert select.carries_on("For that you need to access the request directly.")


def test_a_sentence_is_quoted_once() -> None:
    """Overlapping chunks hold the same sentence, and a sentence run on after a colon holds the
    next one: neither is quoted a second time."""
    first = Passage(
        id="S1",
        title="Responses",
        text="To declare a 404 response model, you can write: Return a JSONResponse directly.",
    )
    second = Passage(id="S2", title="Responses", text="Return a JSONResponse directly.")
    picked = pick_sentences(
        "How do I declare a 404 response model JSONResponse?", [first, second], 3
    )
    texts = [s for s, _ in picked]
    assert texts == [
        "To declare a 404 response model, you can write: Return a JSONResponse directly."
    ]
    again = Passage(id="S3", title="Responses", text=first.text)
    picked = pick_sentences("How do I declare a 404 response model?", [first, again], 3)
    assert [s for s, _ in picked] == [first.text]
    assert select.once([]) == []


def test_a_word_the_question_also_writes_inside_a_name_is_held_only_as_a_word() -> None:
    """ "Why is FastAPI fast?" says "fast" besides "FastAPI": a sentence that names FastAPI
    holds "fast" only where it says the word ("FastAPI will do the right thing with them." was
    the whole answer: the part "fast" of "FastAPI" counted as the question's "fast")."""
    text = (
        "You can mix `def` and `async def` as much as you need. FastAPI will do the right thing "
        "with them. Anyway, in any of the cases above, FastAPI will still work asynchronously "
        "and be extremely fast."
    )
    picked = pick_sentences("Why is FastAPI fast?", [Passage(id="S1", title="", text=text)], 3)
    assert [t for t, _ in picked] == [
        "Anyway, in any of the cases above, FastAPI will still work asynchronously and be "
        "extremely fast."
    ]
    # an identifier the question does not write whole still holds its parts ("middleware")
    cors = "Use the `CORSMiddleware` class."
    assert pick_sentences(
        "Which middleware handles CORS?", [Passage(id="S1", title="", text=cors)], 1
    )
