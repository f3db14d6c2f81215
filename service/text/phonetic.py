"""A consonant skeleton shared by Latin and Devanagari spellings of the same word.

Hindi writers spell English technical words either way: a page says "background tasks" and
"middleware" in Latin letters, a question asks "बैकग्राउंड टास्क" or "मिडलवेयर". Exact BM25 terms
never meet across scripts, and the packaged embedder knows English only. Both spellings reduce
to the sounds' consonants, in order, with close sounds merged: "background" and "बैकग्राउंड"
are both `bkgrnd`, "middleware" and "मिडलवेयर" both `mdlvr`, "response" and "रिस्पॉन्स" both
`rspns`. Vowels, `h` (aspiration: भ is `b`), `y` (a glide: वेयर is "ware") and doubled letters are
dropped; retroflex and dental stops merge (ट and त are `t`), as do `w`/`v` and `z`/`j`.

`key` gives the skeleton of one word, or "" when it is too short to say anything (fewer than
`MIN_CONSONANTS`) or the word is in another script. Three consonants meet many words by chance
("केरल" and "curly" are both `krl`, "बिरयानी" and "brain" `brn`, "खिलाड़ी" and "color" `klr`), so
where a question's word is matched against a sentence's Latin words (not in BM25, whose index
holds skeletons alone) the vowel after the first consonant must agree too (`first_vowel`,
`vowels_agree`): "के" is no "cu", "बि" no "bra", "खि" no "co", while "टो" is "to" (token), "डि"
"de" (deploy) and "मा" "mou" (mount). BM25 indexes the skeletons of a page's Latin
words as terms of their own, and a question asks for the skeletons of its Devanagari words
(`service.text.bm25`): each one's IDF, like every term's, comes from the principal's own chunks.
"""

from __future__ import annotations

from functools import lru_cache

import regex

MIN_CONSONANTS = 3
PREFIX = "~"
"""Marks a skeleton term apart from words (no tokenized word starts with it)."""
VOWEL_MARK = "/"
"""Parts a question word's skeleton from the class of its first vowel (`first_vowel`) in the
keys matched against sentences (`service.answerability.content_keys`): `~krl/E`."""

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


# The vowel after a word's first consonant, where both spellings show it plainly: a Devanagari
# vowel sign (or none: the inherent "a") against the Latin vowel letters that follow a single
# consonant. A consonant cluster on either side, or a nasal first, says nothing (no test).
_SIGNS = {
    "\u093e": "AA", "\u093f": "I", "\u0940": "I", "\u0941": "U", "\u0942": "U",
    "\u0947": "E", "\u0948": "AE", "\u094b": "O", "\u094c": "O", "\u0949": "O",
}  # fmt: skip
_VIRAMA = "\u094d"
_AGREE = {
    "A": ("a", "u", "o", "er", "ir"),  # the inherent vowel: "बटन" button, "कनेक्ट" connect
    "AA": ("a", "ou", "ow", "au", "aw"),  # "टास्क" task, "माउंट" mount
    "AI": ("i", "y", "ai", "ei"),  # "टाइप" type, "फ़ाइल" file
    "I": ("i", "e", "y"),  # "डिप्लॉय" deploy, "रिटर्न" return
    "U": ("u", "o"),  # "कुकी" cookie, "रूट" route
    "E": ("e", "a", "ai", "ay", "ei"),  # "टेबल" table, "सेट" set
    "AE": ("a", "e", "ai", "ay"),  # "कैश" cache, "बैक" back
    "O": ("o", "a", "au", "aw", "ou"),  # "टोकन" token, "कॉल" call
}
_LATIN_VOWELS = frozenset("aeiouy")


def first_vowel(word: str) -> str | None:
    """The class of the vowel after a Devanagari word's first consonant ("केरल": `E`, "बटन":
    `A`, the inherent one), None when it shows none plainly (a cluster, a nasal first)."""
    if not _DEVANAGARI_WORD.match(word):
        return None
    for i, ch in enumerate(word):
        if ch in ("\u0902", "\u0901"):  # a nasal first: its vowel says nothing
            return None
        if ch not in _DEVA:
            continue
        j = i + 1 + (word[i + 1 : i + 2] == _NUKTA)
        nxt = word[j : j + 1]
        if nxt == _VIRAMA:
            return None
        if nxt in _SIGNS:
            sign = _SIGNS[nxt]
            if sign == "AA" and word[j + 1 : j + 2] in ("इ", "ई", "य"):
                return "AI"  # "टाइप", "फ़ाइल"
            return sign
        return "A"
    return None


@lru_cache(maxsize=100_000)
def _latin_vowel(word: str) -> str | None:
    """The vowel letters after a Latin word's first consonant sound (an "h" after it is its
    aspiration; an "r" after one vowel letter is kept: "er"); "" when another consonant follows
    it (a cluster: "brain", "clear"); None when there is no consonant or nothing after it."""
    i = 0
    while i < len(word):
        for spelled, _ in _LATIN_RULES:
            if word.startswith(spelled, i):
                i += len(spelled)
                break
        else:
            if word[i] not in _LATIN_CONSONANTS:  # a vowel, or "h"/"y" before any consonant
                i += 1
                continue
            i += 1
        break
    else:
        return None
    if word[i : i + 1] == "h":
        i += 1
    j = i
    while j < len(word) and word[j] in _LATIN_VOWELS and j - i < 2:
        j += 1
    if j == i:
        return "" if j < len(word) else None  # a cluster ("" ), or the word's end
    return word[i:j] + ("r" if word[j : j + 1] == "r" and j - i == 1 else "")


def vowels_agree(devanagari: str | None, latin_word: str) -> bool:
    """Whether a Latin word may be the Devanagari word whose `first_vowel` is `devanagari`: True
    when either side shows no plain vowel; a Latin cluster ("brain") only against the inherent
    vowel (a Devanagari cluster says nothing: None), as "ब्राउज़र" writes "browser" and "बिरयानी"
    is no "brain"; else when the Latin vowel letters are one the class admits ("e" for `I`:
    "deploy"; not "u" for `E`: "curly" is no "केरल")."""
    if devanagari is None:
        return True
    latin = _latin_vowel(latin_word)
    if latin is None:
        return True
    if not latin:  # a Latin cluster is written with a virama, or with the inherent vowel
        return devanagari == "A"
    return latin.startswith(_AGREE[devanagari])
