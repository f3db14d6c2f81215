"""A consonant skeleton shared by Latin and Devanagari spellings of the same word.

Hindi writers spell English technical words either way: a page says "background tasks" and
"middleware" in Latin letters, a question asks "बैकग्राउंड टास्क" or "मिडलवेयर". Exact BM25 terms
never meet across scripts, and the packaged embedder knows English only. Both spellings reduce
to the sounds' consonants, in order, with close sounds merged: "background" and "बैकग्राउंड"
are both `bkgrnd`, "middleware" and "मिडलवेयर" both `mdlvr`, "response" and "रिस्पॉन्स" both
`rspns`. Vowels, `h` (aspiration: भ is `b`), `y` (a glide: वेयर is "ware") and doubled letters are
dropped; retroflex and dental stops merge (ट and त are `t`), as do `w`/`v` and `z`/`j`.

`key` gives the skeleton of one word, or "" when it is too short to say anything (fewer than
`MIN_CONSONANTS`) or the word is in another script. BM25 indexes the skeletons of a page's Latin
words as terms of their own, and a question asks for the skeletons of its Devanagari words
(`service.text.bm25`): each one's IDF, like every term's, comes from the principal's own chunks.
"""

from __future__ import annotations

from functools import lru_cache

import regex

MIN_CONSONANTS = 3
PREFIX = "~"
"""Marks a skeleton term apart from words (no tokenized word starts with it)."""

_DEVANAGARI_WORD = regex.compile(r"^[\p{Devanagari}]+$")
_LATIN_WORD = regex.compile(r"^[a-z]+$")

# Devanagari consonants by sound class (nukta forms included after NFC: क़ ख़ ग़ ज़ ड़ ढ़ फ़ य़)
_DEVA = {
    "क": "k", "ख": "k", "ग": "g", "घ": "g", "ङ": "n",
    "च": "c", "छ": "c", "ज": "j", "झ": "j", "ञ": "n",
    "ट": "t", "ठ": "t", "ड": "d", "ढ": "d", "ण": "n",
    "त": "t", "थ": "t", "द": "d", "ध": "d", "न": "n",
    "प": "p", "फ": "f", "ब": "b", "भ": "b", "म": "m",
    "र": "r", "ल": "l", "ळ": "l", "व": "v", "श": "s", "ष": "s", "स": "s",
    "ं": "n", "ँ": "n",  # anusvara, chandrabindu: a nasal
    "\u0958": "k", "\u0959": "k", "\u095a": "g", "\u095b": "j",
    "\u095c": "r", "\u095d": "r", "\u095e": "f",
}  # fmt: skip
_NUKTA = "\u093c"
_NUKTA_FORMS = {"ज": "j", "फ": "f", "ड": "r", "ढ": "r", "क": "k", "ख": "k", "ग": "g"}

# Latin spellings to the same classes, longest first
_LATIN_RULES = [
    ("tion", "sn"), ("sion", "sn"), ("ture", "cr"), ("tual", "cl"), ("sch", "sk"), ("tch", "c"),
    ("ph", "f"), ("sh", "s"), ("th", "t"), ("gh", "g"), ("ck", "k"), ("ch", "c"),
    ("qu", "kv"), ("x", "ks"), ("q", "k"), ("w", "v"), ("z", "j"),
]  # fmt: skip
_LATIN_CONSONANTS = frozenset("bcdfgjklmnprstv")


@lru_cache(maxsize=100_000)
def key(word: str) -> str:
    """The consonant skeleton of one case-folded word ("" if too short or another script)."""
    if _LATIN_WORD.match(word):
        out = _latin(_singular(word))
    elif _DEVANAGARI_WORD.match(word):
        out = _devanagari(word)
    else:
        return ""
    return out if len(out) >= MIN_CONSONANTS else ""


def _singular(word: str) -> str:
    """Without a plural's "s" ("applications" like एप्लिकेशन), which "CORS" may not be."""
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


@lru_cache(maxsize=100_000)
def _latin_keys(word: str) -> tuple[str, ...]:
    """A Latin word's skeletons: as if singular, and as written when its "s" may be its own
    ("cors" is `krs` like कॉर्स as well as `kr`)."""
    out = [
        k
        for k in dict.fromkeys((_latin(_singular(word)), _latin(word)))
        if len(k) >= MIN_CONSONANTS
    ]
    return tuple(out)


def _latin(word: str) -> str:
    sounds: list[str] = []
    i = 0
    while i < len(word):
        for spelled, sound in _LATIN_RULES:
            if word.startswith(spelled, i):
                sounds.append(sound)
                i += len(spelled)
                break
        else:
            ch = word[i]
            if ch == "c":  # soft before e, i, y ("service", "cycle"), else hard
                sounds.append("s" if word[i + 1 : i + 2] in ("e", "i", "y") else "k")
            elif ch in _LATIN_CONSONANTS:
                sounds.append(ch)
            i += 1
    return _squeeze("".join(sounds))


def _devanagari(word: str) -> str:
    word = word.rstrip("ंँ")  # a final nasal marks a plural or a verb form (फ़ाइलें, करें)
    sounds: list[str] = []
    for i, ch in enumerate(word):
        if ch == _NUKTA:
            continue
        if word[i + 1 : i + 2] == _NUKTA and ch in _NUKTA_FORMS:
            sounds.append(_NUKTA_FORMS[ch])
        else:
            sounds.append(_DEVA.get(ch, ""))
    return _squeeze("".join(sounds))


def _squeeze(sounds: str) -> str:
    """Doubled sounds once ("middle" is `mdl`, like मिडल)."""
    out: list[str] = []
    for s in sounds:
        if not out or out[-1] != s:
            out.append(s)
    return "".join(out)


def doc_terms(words: list[str]) -> list[str]:
    """A page's skeleton terms: of its Latin words (in order, repeats kept), each marked with
    `PREFIX`; they are what a question's Devanagari spelling can meet."""
    return [PREFIX + k for w in words if _LATIN_WORD.match(w) for k in _latin_keys(w)]


def query_terms(words: list[str]) -> list[str]:
    """A question's skeleton terms: of its Devanagari words only (its Latin words already match
    as they are, and an English question gets none)."""
    return [PREFIX + k for w in words if not w.isascii() and (k := key(w))]
