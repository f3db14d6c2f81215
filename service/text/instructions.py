"""Questions that ask how to do something, and the units that tell how: the steps.

A "how do I …" question is answered by a procedure: the sentence that names the tool ("You can
configure it using the `CORSMiddleware`.") and the steps that follow it ("Import
`CORSMiddleware`.", a list of steps, "फिर cookie parameters … declare करें।"). The steps rarely
repeat the question's words, so a selection by shared terms alone leaves them out; these tests let
it recognise them.

- `asks_how`: English "how" (not "how many/much/long/…"), Hindi "कैसे"/"किस तरह", Hinglish
  "kaise", and the other Indic languages' "how" as questions write it.
- `asks_what`: English "what is/are/does", Hindi "क्या है/करता है/…", Hinglish "kya hai/…": a
  question for what something is or does (its answer goes on with the sentence that says so).
- `is_step`: an instruction. English: an imperative ("Import …", "Then, create …", "To …, use
  …") or a second-person recipe ("You can/need to/should … use …"). Hindi: a polite imperative
  that ends a main clause ("… import करें।", "… बनाएँ:", "… कीजिए।"; not after "कि"/"ताकि",
  where the same form is a subjunctive), "आप … कर सकते हैं" (you can) or "आपको … करना होगा"
  (you have to); in either language a purpose clause and "you use" ("To declare a request
  body, you use Pydantic models.", "middleware बनाने के लिए आप … का उपयोग करते हैं।"). A list
  whose first item and at least half of its items are instructions is a list of steps (a
  feature list with one "click करें" in it is not). A changelog entry, which cites its pull
  request, issue or commit ("* Update … PR #52"), is none.
  Other scripts: no test here (never a step), so their questions select as before.
"""

from __future__ import annotations

import regex

from service.text.markdown import is_block, is_list_item, list_items, said
from service.text.memo import memo_text
from service.text.question_words import INDIC_QUESTION_STOP
from service.text.tokenize import has_devanagari

_HOW_EN = regex.compile(
    r"\bhow\b(?!\s+(?:many|much|long|often|old|big|large|small|far|fast|come)\b)"
    r"|\b(?:steps?|way)\s+to\b",
    regex.IGNORECASE,
)
_HOW_INDIC = regex.compile(
    r"(?<![\p{L}\p{M}])(?:कैसे|किस\s+तरह|किस\s+प्रकार|kaise|kaisey|kese|kis\s+tarah"
    r"|কীভাবে|কিভাবে|ਕਿਵੇਂ|કેવી\s+રીતે|कसे|कसा|कशी|எப்படி|ఎలా|ಹೇಗೆ|എങ്ങനെ|କିପରି)(?![\p{L}\p{M}])",
    regex.IGNORECASE,
)


def asks_how(question: str) -> bool:
    """The question asks how to do something (any supported language), in words or as a
    request to do it (`asks_to_do`: "enable cors", "CORS चालू करना")."""
    return (
        _HOW_EN.search(question) is not None
        or _HOW_INDIC.search(question) is not None
        or asks_to_do(question)
    )


QUERY_WORDS = 6
"""A query of at most this many words may be a bare topic or a request (`asks_topic`,
`asks_to_do`); a longer one is a sentence of its own."""
_QUERY_WORD = regex.compile(r"[\p{L}\p{M}\p{N}_]+")
_WH_EN = frozenset("what how why when where which who whom whose".split())
_ASKING_EN = _WH_EN | frozenset(
    "can could does do did is are was were should would will shall may might must".split()
)
"""What an English question opens with; `_WH_EN` anywhere in a query makes it a question."""
_ASKING_INDIC = frozenset(
    "क्या कैसे क्यों क्यूं क्यूँ कब कहाँ कहां कौन कौनसा कौनसी किस किसे कितना कितने कितनी"
    " kya kaise kaisey kese kyun kyon kyu kab kahan kaun kaunsa kaunsi kis kise kitna kitne"
    " kitni".split()
)
_TO_DO_INDIC = regex.compile(
    r"(?<![\p{L}\p{M}])(?:करना|करें|करे|करने\s+का\s+तरीका|का\s+तरीका|karna|karein|karen"
    r"|karne\s+ka\s+tarika|ka\s+tarika)(?:\s+(?:है|hai))?\W*$",
    regex.IGNORECASE,
)
"""A Hindi or Hinglish request ending in an infinitive or imperative ("CORS चालू करना",
"cookie set karein", "file upload karne ka tarika")."""


def _query_words(question: str) -> list[str] | None:
    """A short query's case-folded words, None when it is a question or a sentence: a question
    mark, a question word (English, Hindi, Hinglish and the other Indic languages'), a full
    stop at its end (a claim: "Aspirin inhibits the production of PGE2."), or more than
    `QUERY_WORDS` words."""
    if "?" in question or question.rstrip().endswith((".", "!", "।")):  # a sentence
        return None
    words = [w.casefold() for w in _QUERY_WORD.findall(question)]
    if not words or len(words) > QUERY_WORDS or words[0] in _ASKING_EN:
        return None
    if any(w in _ASKING_INDIC or w in INDIC_QUESTION_STOP or w in _WH_EN for w in words):
        return None
    return words


def ends_in_request(question: str) -> bool:
    """The query ends in a Hindi or Hinglish infinitive or imperative ("… चालू करना", "…
    enable karna", "… set karein"): with one romanized Hindi word, it is Hinglish."""
    return _TO_DO_INDIC.search(question) is not None


def asks_to_do(question: str) -> bool:
    """A short query that asks to be told how to do something by naming it as an instruction:
    English opening with an instruction's verb ("enable cors", "set a cookie"), Hindi or
    Hinglish ending in an infinitive or imperative ("CORS चालू करना", "cookie set karein")."""
    words = _query_words(question)
    if words is None:
        return False
    if len(words) > 1 and words[0] in STEP_VERBS:  # one word ("upload", "list") names a topic
        return True
    return ends_in_request(question)


def asks_topic(question: str) -> bool:
    """A bare topic typed as into a search box ("cors", "background tasks", "पाथ पैरामीटर"):
    a short query with no question word. It is answered as "what is …" is, by what its page
    says it is; one that opens with an instruction's verb is a request too (`asks_to_do`),
    whose procedure follows ("enable cors"), as "type hints" may be either."""
    return _query_words(question) is not None


_POINTS = regex.compile(
    r"(?<![\p{L}\p{M}])(?:(?:read|see|check|learn|refer|visit)(?![\p{L}\p{M}])"
    r"|देख|पढ़|जान|सीख)",  # English words whole ("ready", "seems" are none); Hindi stems
    regex.IGNORECASE,
)
_LINKED = regex.compile(r"\[[^\]\n]*\]\(|<https?://", regex.IGNORECASE)


def points_to_link(unit: str) -> bool:
    """A prose unit that sends the reader to a link to read or see ("… तो advanced guide देखें:
    [Data Stream करें](../advanced/stream-data.md).", "Read more in [the docs](…)"): an
    instruction by its form, about where to read, not how to do what the page does."""
    return (
        not is_block(unit) and _LINKED.search(unit) is not None and _POINTS.search(unit) is not None
    )


_WHAT_EN = regex.compile(r"\bwhat(?:\s+(?:is|are|does|do)\b|'s\b)", regex.IGNORECASE)
_WHAT_INDIC = regex.compile(
    r"(?<![\p{L}\p{M}])(?:क्या\s+(?:है|हैं|होता|होती|होते|करता|करती|करते)|किसे\s+कहते"
    r"|kya\s+(?:hai|hain|hota|hoti|hote|karta|karti|karte))(?![\p{L}\p{M}])",
    regex.IGNORECASE,
)


def asks_what(question: str) -> bool:
    """The question asks what something is or does ("What is middleware?", "jsonable_encoder
    क्या करता है?", "yield wali dependency kya hai?"); Hindi's "क्या" opening a yes/no question
    ("क्या FastAPI async है?") does not."""
    return (
        _WHAT_EN.search(question) is not None
        or _WHAT_INDIC.search(question) is not None
        or asks_topic(question)
    )


_NEXT_ASKS = (
    r"(?:how|what|why|where|when|which|who|can|could|do|does|did|is|are|should|would|will)\b"
)
_SUBJECT_EN = regex.compile(
    r"\bwhat(?:\s+exactly)?(?:\s+(?:is|are)|['’]s)\s+(?:exactly\s+)?(?:(?:a|an|the)\s+)?"
    r"(?P<subject>(?:[^?,;!.\s]|\.(?=\S))(?:[^?,;!.]|\.(?=\S)){0,79}?)"
    rf"(?=\s+(?:and|or)\s+{_NEXT_ASKS}|\s+(?:used|for|in|on|when|if|that|which)\b|\s*(?:[?,;!]|\.(?!\S))|\s*$)"
    r"|\bwhat\s+(?:does|do)\s+(?:(?:a|an|the)\s+)?(?P<subject>[^?,;!]{1,80}?)\s+do\b",
    regex.IGNORECASE,
)
"""English "what is/are X", "what's X", "what does X do": X, up to 80 characters (a dot inside
a name stays: `app.include_router`, Node.js), ending before "and how …", a clause, or the
question mark."""
_ASKS_WHAT_INDIC = regex.compile(
    r"(?<![\p{L}\p{M}])(?:(?:क्या|kya)\s+(?:है|हैं|होता|होती|होते|करता|करती|करते"
    r"|hai|hain|hota|hoti|hote|karta|karti|karte)|किसे\s+कहते|kise\s+(?:kehte|kahte))"
    r"(?![\p{L}\p{M}])",
    regex.IGNORECASE,
)
_CLAUSE_END = regex.compile(r"[?,;:.!।]")
_BEFORE_SUBJECT = regex.compile(
    r".*(?<![\p{L}\p{M}])(?:और|या|तो|में|कि|aur|ya|to|mein|and|or)(?![\p{L}\p{M}])\s*",
    regex.IGNORECASE,
)
"""A Hindi subject's last word before it: a clause before ("… और", "बताइए कि"), or where it is
("FastAPI में"); not Hinglish "ki", which is "of" as often as "that" ("France ki capital")."""
_MEANING_OF = regex.compile(
    r"\s+(?:का|की|के|ka|ki|ke)\s+(?:मतलब|अर्थ|matlab|arth|meaning)$", regex.IGNORECASE
)
SUBJECT_CHARS = 120
"""How far before Hindi "क्या है" a subject is looked for (a question is up to 4,000)."""


def asked_subject(question: str) -> str | None:
    """What a `asks_what` question asks about: "middleware" in "What is a middleware and how
    do I create one?", "yield वाली dependency" in "yield वाली dependency क्या है?",
    "मिडलवेयर" in "मिडलवेयर का मतलब क्या है?", "jsonable_encoder" in "What does
    `jsonable_encoder` do?"; None for another question. Each match is bounded (80 characters
    after "what", `SUBJECT_CHARS` before "क्या है"), so a long question costs linear time."""
    if asks_topic(question):
        return question.strip(" `'\".!") or None
    m = _SUBJECT_EN.search(question)
    if m is not None:
        subject = m.group("subject")
    else:
        key = _ASKS_WHAT_INDIC.search(question)
        if key is None:
            return None
        before = question[max(0, key.start() - SUBJECT_CHARS) : key.start()]
        subject = _CLAUSE_END.split(before)[-1]  # the clause that asks
        lead = _BEFORE_SUBJECT.match(subject)  # "… और मिडलवेयर क्या है": not the clause before
        if lead is not None:
            subject = subject[lead.end() :]
        subject = _MEANING_OF.sub("", subject.strip())
    return subject.strip(" `'\"") or None


_DEFINES = regex.compile(
    r"(?<!\bthere\s)\b(?:is|are)\s+(?:a|an|one|some|the)\b|\brefers?\s+to\b|\bmeans\b"
    r"|\bstands?\s+for\b"
    r"|(?<![\p{L}\p{M}])(?:एक\s+(?!ही(?![\p{L}\p{M}]))(?:[^\s।]+\s+){0,3}?"
    r"(?![^\s।]*(?:ता|ती|ते|ना)\s)[^\s।]+\s+(?:है|हैं)"
    r"|(?:है|हैं)\s+जो|कहते\s+हैं|का\s+मतलब|का\s+अर्थ)(?![\p{L}\p{M}])",
    regex.IGNORECASE,
)
"""English "X is a/an/the …", "refers to", "means", "stands for" (not "there is a"); Hindi "X
एक Y है" (Y a few words, not a verb: "एक parameter declare करना होता है" is no definition,
nor "एक ही …"), "… है जो …", "… को … कहते हैं", "… का मतलब / अर्थ"."""


def defines(unit: str) -> bool:
    """A prose sentence in the form of a definition: "A "middleware" is a function that …",
    "… refers to …"; Hindi "… एक function है जो …", "… को … कहते हैं", "… का मतलब …"."""
    return not is_block(unit) and _DEFINES.search(said(unit)) is not None


STEP_VERBS = frozenset(
    "add adjust annotate append apply assign attach build call change choose click clone"
    " combine configure connect convert copy create declare decorate define delete deploy"
    " disable edit enable ensure execute expose extend fetch fill generate get give go import"
    " include inherit initialize inject install instantiate keep launch list load make mark"
    " modify mount move name open override pass place point provide put raise register"
    " remove rename render replace require restart return run save select send serve set"
    " specify start stop store subclass switch tell try type update upgrade upload use validate"
    " verify wrap write".split()
)
"""Base forms that open an English instruction (documentation's imperatives); not "read",
"see", "check" or "learn": "You can read more in …", "check the MDN documentation" point
elsewhere, they are not steps."""

_LEAD = regex.compile(
    r"^(?:[\s*_>#-]|\d{1,3}[.)])*"  # list markers, emphasis, quotes
    r"(?:(?:first|then|now|next|finally|afterwards|also|just|so|and|but|after that|lastly|"
    r"second|third)\b,?\s*)*",
    regex.IGNORECASE,
)
_CLAUSE = regex.compile(
    r"^(?:to|in|inside|if|for|when|with|within|after|before|once|instead|here|otherwise"
    r"|optionally|by|from|on|at|using|as|the\s+same\s+way|just\s+(?:as|like)|like|similarly"
    r"|because|since)\b[^,;:.!?]{0,100},\s*",
    regex.IGNORECASE,
)
"""A leading adverbial clause: "To do that, …", "In your app, …", "If you need X, …" (not a
subject: "Hobson argued that taxes could boost consumption, create wealth" is no step)."""
_YOU = regex.compile(
    r"^you\s+(?:can|could|need\s+to|have\s+to|should|must)\s+"
    r"(?:(?:also|then|just|simply|instead|now|always|not)\s+)*",
    regex.IGNORECASE,
)
_WORD = regex.compile(r"([A-Za-z]+)\b(?!')")

_HI_VERB = regex.compile(
    r"(?<![\p{L}\p{M}])([\p{L}\p{M}]+)[*_`\"'”]*"
    r"(?=\s*(?:[।:：.!,;(]|$|(?:जैसे|ताकि|जिससे|क्योंकि|और|या|लेकिन|फिर)(?![\p{L}\p{M}])))"
)
"""A word that ends a clause (punctuation, the sentence's end, or a conjunction follows)."""
_HI_IMPERATIVE = regex.compile(r"(?:ें|ाएँ|ाएं|एँ|एं|िए|िये|ियें)$")
_HI_NOT_VERB = frozenset(
    "में हमें उन्हें इन्हें जिन्हें तुम्हें किन्हें मुझे आपमें उनमें इनमें जिनमें किसमें सबमें"
    " किए किये दिए दिये गए हुए हुये नए चाहिए".split()
)
"""Words ending like a polite imperative that are not one (postpositions, pronouns, particles)."""
_HI_FOR = ("लिए", "लिये")
""""for", "so" ("के लिए", "इसलिए", "किसलिए"): words ending so are no imperative, though they end
like "कीजिए"."""
_HI_YOU_CAN = regex.compile(r"(?<![\p{L}\p{M}])आप(?![\p{L}\p{M}]).*\sसकते\s+हैं\W*$")
_HI_POINTS_ELSEWHERE = regex.compile(r"(?<![\p{L}\p{M}])(?:पढ़|देख|जान|सीख)\s+सकते\s+हैं\W*$")
""""आप … में पढ़ / देख / जान / सीख सकते हैं" (you can read, see, find out, learn more in …)
points elsewhere, as English "You can read more in …" does: no step."""
_HI_YOU_MUST = regex.compile(
    r"(?<![\p{L}\p{M}])आपको(?![\p{L}\p{M}])[^।,;:]*[\p{L}\p{M}]+ना\s+"
    r"(?:होगा|होता\s+है|है|चाहिए|पड़ेगा|पड़ता\s+है)"
)
""""आपको … करना होगा / चाहिए" (you have to, you should): Hindi's "You need to …"."""
_HI_TO_DO_YOU_USE = regex.compile(
    r"(?:के\s+लिए|हेतु),?\s+(?:आप|हम)(?![\p{L}\p{M}]).*(?:उपयोग|इस्तेमाल|प्रयोग)\s+करते\s+हैं\W*$"
)
""""X करने के लिए आप Y का उपयोग करते हैं" (to do X, you use Y): how documentation states a
procedure ("middleware बनाने के लिए आप … decorator `@app.middleware("http")` का उपयोग करते हैं।")."""
_TO_DO_YOU_USE = regex.compile(
    r"^to\s[^,;:.!?]{1,100},\s*(?:you|we)\s+(?:use|call|add|declare|create|import)\b",
    regex.IGNORECASE,
)
""""To declare a request body, you use Pydantic models.": the same in English."""


def _opens_with_step(text: str) -> bool:
    for opening in (_LEAD, _YOU):
        m = opening.match(text)
        if m is not None:
            text = text[m.end() :]
    m = _WORD.match(text)
    return m is not None and m.group(1).lower() in STEP_VERBS


def _english_step(text: str) -> bool:
    if _opens_with_step(text) or _TO_DO_YOU_USE.match(text) is not None:
        return True
    lead = _LEAD.match(text)  # "But when you want …, you can …": the clause after it
    if lead is not None:
        text = text[lead.end() :]
    m = _CLAUSE.match(text)
    return m is not None and _opens_with_step(text[m.end() :])


_HI_SUBORDINATE = regex.compile(
    r"(?<![\p{L}\p{M}])(?:कि|ताकि|जो|जिससे|जिसे|जिन्हें|यदि|अगर|जब|चाहे)(?![\p{L}\p{M}])"
)
"""Words that open a subordinate clause, whose "… करें" is a subjunctive ("ताकि वे काम करें":
so that they work), not an instruction."""
_HI_CLAUSE_START = regex.compile(r"[,;:।]")


def _hindi_step(text: str) -> bool:
    for m in _HI_VERB.finditer(text):
        word = m.group(1)
        if word in _HI_NOT_VERB or word.endswith(_HI_FOR) or not _HI_IMPERATIVE.search(word):
            continue
        clause = _HI_CLAUSE_START.split(text[: m.start()])[-1]
        if _HI_SUBORDINATE.search(clause) is None:
            return True
    you_can = _HI_YOU_CAN.search(text) is not None and _HI_POINTS_ELSEWHERE.search(text) is None
    return (
        you_can
        or _HI_YOU_MUST.search(text) is not None
        or _HI_TO_DO_YOU_USE.search(text) is not None
    )


@memo_text
def is_step(unit: str) -> bool:
    """The unit tells the reader to do something: an instruction, or a list of them."""
    if unit.lstrip().startswith(("```", "~~~", "|", "#")):
        return False  # code and tables show a step; a heading names a section
    if is_block(unit):  # a list of steps: its first item and at least half of them are steps
        items = [said(i).strip() for i in list_items(unit)]
        steps = [_says_step(i) for i in items if i]
        return bool(steps) and steps[0] and 2 * sum(steps) >= len(steps)
    return _says_step(said(unit).strip())


_CITES_CHANGE = regex.compile(
    r"(?:/(?:pull|pulls|issues|merge_requests|commit|commits)/[0-9a-f]+\b"
    r"|(?<![\w#])(?:PR|pull\s+request|issue)\s*\[?#\d+|\(#\d+\))",
    regex.IGNORECASE,
)
"""A changelog entry cites the pull request, issue or commit it records ("* Update [SQL
tutorial …](…). PR [#52](https://github.com/…/pull/52)."): an imperative by its form ("Add",
"Fix", "Update"), it says what changed, not what to do."""


def _is_entry(item: str) -> bool:
    """A list item that cites a change (a prose sentence that mentions an issue is no entry:
    "To work around it, pass `--no-cache` (see #123).")."""
    return is_list_item(item) and _CITES_CHANGE.search(item) is not None


def records_change(unit: str) -> bool:
    """A changelog entry, or a list of them (at least half of its items cite a change)."""
    if "#" not in unit and "/" not in unit:  # no reference to a change: most units
        return False
    items = [said(i) for i in list_items(unit)]
    cited = sum(_is_entry(i) for i in items)
    return cited > 0 and 2 * cited >= len(items)


def _says_step(text: str) -> bool:
    if not text or _is_entry(text):
        return False
    if has_devanagari(text):
        return _hindi_step(text)
    return _english_step(text)
