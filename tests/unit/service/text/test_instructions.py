from __future__ import annotations

import pytest

from service.answerability import action_terms, content_terms
from service.text.instructions import (
    asked_subject,
    asks_how,
    asks_to_do,
    asks_topic,
    asks_what,
    is_step,
    points_to_link,
)

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "question",
    [
        "How do I enable CORS in my FastAPI app?",
        "how can I run a task after returning a response",
        "What are the steps to deploy with Docker?",
        "मैं अपने FastAPI ऐप में CORS कैसे सक्षम करूं?",
        "Static files किस तरह serve करें?",
        "FastAPI app mein CORS kaise enable karein?",
        "FastAPI-তে CORS কীভাবে চালু করব?",
        "CORS ਕਿਵੇਂ ਚਾਲੂ ਕਰੀਏ?",
        "CORS எப்படி இயக்குவது?",
    ],
)
def test_how_questions(question: str) -> None:
    assert asks_how(question)


@pytest.mark.parametrize(
    "question",
    [
        "How many items does a page return?",
        "How much memory does it need?",
        "What is a dependency with yield?",
        "jsonable_encoder क्या करता है?",
        "Proxy ke peeche root_path kyun chahiye?",
        "Who wrote Hamlet?",
        "Showhow is a word",
    ],
)
def test_not_how_questions(question: str) -> None:
    assert not asks_how(question)


@pytest.mark.parametrize(
    "unit",
    [
        "Import `CORSMiddleware`.",
        "First, import `BackgroundTasks` and define a parameter in your path operation function.",
        "Inside of your *path operation function*, pass your task function to the object.",
        "To use `TestClient`, first install `httpx`.",
        "You can configure it in your **FastAPI** application using the `CORSMiddleware`.",
        "* Import `CORSMiddleware`.\n* Create a list of allowed origins.\n* Add a middleware.",
        "1. Go to the project directory.\n2. Build your image:",
        "`CORSMiddleware` import करें।",
        "पहले `Cookie` import करें:",
        "अपनी **FastAPI** application को इसमें pass करके एक `TestClient` बनाएँ।",
        "`TestClient` object का उपयोग उसी तरह करें जैसे आप `httpx` के साथ करते हैं।",
        "आप `CORSMiddleware` का उपयोग करके इसे अपनी application में configure कर सकते हैं।",
        "अगर आपको files चाहिए, तो `File` import करें।",
        "* `CORSMiddleware` import करें।\n* allowed origins की एक list बनाएँ।",
        "To work around it, pass `--no-cache` (see issue #123).",  # mentions an issue: prose
        # to do it, you use: a procedure stated without an imperative
        'middleware बनाने के लिए आप किसी function के ऊपर decorator `@app.middleware("http")` का '
        "उपयोग करते हैं।",
        "ऐसा करने के लिए हम `exclude_unset=True` इस्तेमाल करते हैं।",
        "To declare a request body, you use Pydantic models.",
        # opened by "But", with an adverb or a "not" after the modal
        "But when you want to make a query parameter required, you can just not declare any "
        "default value:",
        "But set the default to `None`.",
        "You can simply use a `list`.",
        "You can instead declare it with `Body`.",
    ],
)
def test_steps(unit: str) -> None:
    assert is_step(unit)


@pytest.mark.parametrize(
    "unit",
    [
        "## Use `CORSMiddleware` { #use-corsmiddleware }",
        "```python\nimport fastapi\n```",
        "| Import | Create |\n|---|---|",
        "An origin is the combination of protocol, domain and port.",
        "Let's say you have a frontend running in your browser.",
        "It is imported directly into FastAPI so that you can import it from `fastapi`.",
        "The tower was built in 1889.",
        "* Credentials (Authorization headers, Cookies, etc).\n* Specific HTTP methods.",
        "भले ही वे सभी `localhost` में हों, वे अलग-अलग protocols का उपयोग करते हैं।",
        "कई applications middleware का उपयोग करते हैं।",  # "use" with no purpose clause
        # changelog entries: imperative by their form, records of a change
        "* Update [SQL tutorial with SQLAlchemy](https://fastapi.tiangolo.com/tutorial/sql/). "
        "PR [#52](https://github.com/tiangolo/fastapi/pull/52).",
        "* ✨ Add support for `Form` models. PR [#1](https://github.com/org/repo/pull/1).",
        "- Fix the parser for nested lists (#1234).",
        "The tower, to be sure, was built in 1889.",
        "But the tower was built in 1889.",
        "But when it runs, the app stops.",
        "ये `OPTIONS` request होते हैं जिनमें `Origin` header होता है।",
        "यह code application के शुरू होने से पहले execute होगा।",
        "Python में यह सब उन्हें।",
        "FastAPI एक तरीका देता है, जो सुनिश्चित करता है कि handlers सही तरीके से काम करें।",
        "",
    ],
)
def test_not_steps(unit: str) -> None:
    assert not is_step(unit)


def test_action_terms_are_the_hindi_verbs_that_name_the_action() -> None:
    assert action_terms("JWT token कैसे बनाएं?") == action_terms("token बनाएँ") != set()
    assert not action_terms("JWT token कैसे बनाएं?") & content_terms("JWT token कैसे बनाएं?")
    assert action_terms("CORS कैसे उपयोग करें?") == set()  # "use", "do": no action named
    assert action_terms("How do I create a token?") == set()  # English keeps "create" anyway


def test_a_pointer_to_more_reading_is_not_a_step() -> None:
    assert not is_step("You can read more at [Pydantic: Configuration](https://pydantic.dev/).")
    # Hindi's "you can read / see / learn … in …" points elsewhere too; "you can set …" is a step
    assert not is_step("आप databases के बारे में [SQLModel docs](https://x.dev/) में पढ़ सकते हैं।")
    assert not is_step("आप Starlette के official docs में अधिक details देख सकते हैं।")
    assert not is_step("आप इसके बारे में और जान सकते हैं।")
    assert is_step("आप dependencies में भी headers सेट कर सकते हैं।")
    assert not is_step("You can see more details in [Starlette's docs](https://starlette.dev/).")


def test_a_verb_after_a_subject_and_a_comma_is_not_a_step() -> None:
    assert not is_step(
        "Hobson theorized that taxation could boost consumption, create wealth, and more."
    )
    assert is_step("If you need files, use `UploadFile`.")
    assert is_step(
        "The same way you can specify a response model, you can also declare the status code."
    )
    assert not is_step("To know more about status codes, check the [MDN documentation](https://x).")


def test_a_feature_list_with_one_instruction_in_it_is_not_a_list_of_steps() -> None:
    features = (
        "- **Explorer** - सभी *path operations* का tree view। route पर जाने के लिए click करें।\n"
        "- **Search** - path के आधार पर search करें।\n"
        "- **CodeLens** - test client calls के ऊपर clickable links।\n"
        "- **Deploy to FastAPI Cloud** - आपकी app का one-click deployment।\n"
        "- **Logs** - real-time log streaming।"
    )
    assert not is_step(features)
    assert is_step("1. Import `File`.\n2. Declare a parameter.\n   It is a `bytes`.\n3. Done.")


def test_hindi_so_is_not_an_imperative() -> None:
    """ "इसलिए" (so) ends like "कीजिए" (please do)."""
    assert not is_step("इसलिए, default रूप से, `Header` names को hyphen में convert करेगा।")
    assert is_step("यहाँ `Header` import कीजिए।")


def test_hindi_you_have_to_is_a_step() -> None:
    assert is_step("headers घोषित करने के लिए, आपको `Header` का उपयोग करना होगा।")
    assert is_step("आपको यह जानना चाहिए।")
    assert not is_step("आपको कोई फ़र्क नहीं पड़ता।")


@pytest.mark.parametrize(
    ("unit", "points"),
    [
        (
            "अगर आप binary data stream करना चाहते हैं, तो advanced guide देखें: "
            "[Data Stream करें](../advanced/stream-data.md).",
            True,
        ),
        ("Read more about it in the [FastAPI docs](https://fastapi.tiangolo.com/).", True),
        ("Check the [MDN documentation](https://developer.mozilla.org/) for details.", True),
        ("अगर आप advanced guide देखें तो आपको सब मिलेगा।", False),  # no link to go to
        ("Import `StaticFiles` from [Starlette](https://www.starlette.io/).", False),  # a step
        ("* Read [the docs](docs.md)\n* See [the API](api.md)", False),  # a block
        ("Once it is ready, run [the installer](install.md).", False),  # "ready" is no "read"
    ],
)
def test_a_unit_points_to_a_link_to_read_or_see(unit: str, points: bool) -> None:
    assert points_to_link(unit) is points


@pytest.mark.parametrize(
    ("question", "what"),
    [
        ("What is middleware?", True),
        ("What does jsonable_encoder do?", True),
        ("What's a dependency?", True),
        ("yield वाली dependency क्या है?", True),
        ("jsonable_encoder क्या करता है?", True),
        ("Middleware kya hota hai?", True),
        ("क्या FastAPI async है?", False),  # "क्या" opening a yes/no question
        ("How do I enable CORS?", False),
        ("Whatever works?", False),
    ],
)
def test_questions_for_what_something_is_or_does(question: str, what: bool) -> None:
    assert asks_what(question) is what


@pytest.mark.parametrize(
    ("query", "topic", "to_do"),
    [
        ("cors", True, False),
        ("background tasks", True, False),
        ("CORS middleware", True, False),
        ("पाथ पैरामीटर", True, False),
        ("रिस्पॉन्स मॉडल", True, False),
        ("gzip middleware for large responses", True, False),
        ("upload", True, False),  # one word names a topic
        ("enable cors", True, True),  # a request names its topic too
        ("type hints", True, True),  # "type" may be either
        ("CORS चालू करना", True, True),
        ("cors enable karna", True, True),
        ("file upload karne ka tarika", True, True),
        # questions and sentences are no bare topics
        ("cors?", False, False),
        ("What is CORS", False, False),
        ("how to enable cors", False, False),
        ("cors kya hai", False, False),
        ("CORS क्या है", False, False),
        ("CORS எப்படி", False, False),
        ("Can I use def", False, False),
        ("does cors work", False, False),
        ("Aspirin inhibits the production of PGE2.", False, False),  # a claim
        ("Name a luxury division of Toyota.", False, False),
        ("set up cors for the frontend and the backend of my app", False, False),  # 12 words
        ("", False, False),
    ],
)
def test_bare_topics_and_requests(query: str, topic: bool, to_do: bool) -> None:
    assert asks_topic(query) is topic
    assert asks_to_do(query) is to_do


def test_a_bare_topic_is_asked_as_what_it_is_and_a_request_as_how() -> None:
    assert asks_what("background tasks") and asked_subject("background tasks") == "background tasks"
    assert asked_subject("`jsonable_encoder`") == "jsonable_encoder"
    assert asks_how("enable cors") and asks_how("CORS चालू करना") and asks_how("cookie set karein")
    assert not asks_how("background tasks") and not asks_how("upload")
