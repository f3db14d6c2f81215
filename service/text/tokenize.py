"""Unicode-aware word tokens for BM25, for English, Hindi and other Indic scripts.

`[\\p{L}\\p{M}\\p{N}]+` keeps Devanagari vowel signs (category M) inside their word, where a plain
`\\w+` would cut "हिन्दी" into pieces. Latin words are stemmed with Snowball English, Devanagari
with Snowball Hindi; short stop-word lists for both languages are dropped.

Hindi is written with free spelling variation, and a question and a page rarely agree:
"बनाएं"/"बनाएँ", "फ़ाइल"/"फाइल", "हिन्दी"/"हिंदी", "गये"/"गए", "सूची"/"सुची". Before stemming, a
Devanagari word's spelling is normalized (`hindi_spelling`: no nukta, chandrabindu as anusvara, a
dead न/म before a consonant as anusvara, a final "ये" after a vowel as "ए", no zero-width joiners),
and after it the stem's long vowels are made short (`ी`→`ि`, `ू`→`ु`), after Lucene's Hindi
normalizer (Pingali and Varma, "Word normalization in Indian languages"). Only the terms change:
the text quoted, and the words `service.text.phonetic` spells out, stay as written.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Set as AbstractSet
from functools import lru_cache

import regex
import snowballstemmer

from service.text.memo import memo_text

_WORD = regex.compile(r"[\p{L}\p{M}\p{N}]+")
_DEVANAGARI = regex.compile(r"\p{Devanagari}")
_OTHER_INDIC = regex.compile(
    r"[\p{Bengali}\p{Gurmukhi}\p{Gujarati}\p{Oriya}\p{Tamil}\p{Telugu}\p{Kannada}\p{Malayalam}]"
)

ENGLISH_STOP = frozenset(
    "a an and are as at be but by for from has have he her his i if in into is it its of on or"
    " she so than that the their them then there these they this to was we were what when where"
    " which who whom why will with you your do does did not no can could would should how".split()
)
_NUKTA = "\u093c"  # NFC writes क़ ख़ ग़ ज़ ड़ ढ़ फ़ य़ as the letter and this sign
_CHANDRABINDU, _ANUSVARA, _VIRAMA = "\u0901", "\u0902", "\u094d"
_DEAD_NASAL = regex.compile(r"[नम]\u094d(?=[\u0915-\u0939])")  # हिन्दी → हिंदी, सम्बन्ध → संबंध
_FINAL_YE = regex.compile(r"(?<=[\u0915-\u0939\u093e-\u094c])य\u0947(?=\u0902?$)")  # गये → गए
_LONG_VOWELS = str.maketrans({"ी": "ि", "ू": "ु", "ई": "इ", "ऊ": "उ"})
_JOINERS = str.maketrans("", "", "\u200c\u200d")


def has_devanagari(text: str) -> bool:
    """Whether `text` holds a Devanagari letter (an ASCII text, the usual case, is told at once)."""
    return not text.isascii() and _DEVANAGARI.search(text) is not None


def hindi_spelling(word: str) -> str:
    """One Devanagari word in a single spelling of its common variants (module docstring)."""
    word = word.replace(_NUKTA, "").replace(_CHANDRABINDU, _ANUSVARA)
    if _VIRAMA in word:
        word = _DEAD_NASAL.sub(_ANUSVARA, word)
    return _FINAL_YE.sub("ए", word)


def in_any_spelling(word: str, vocab: AbstractSet[str]) -> bool:
    """`word` is in `vocab` as written or, a non-Latin word, in its `hindi_spelling` (a list
    holds one spelling: "परन्तु" is "परंतु", "पढें" is "पढ़ें")."""
    return word in vocab or (not word.isascii() and hindi_spelling(word) in vocab)


_HINDI_STOP_WORDS = (
    "का के की को में से पर और है हैं था थे थी हो होता होती होते यह वह ये वे इस उस इन उन एक"
    " भी तो ही कि जो जब तक लिए साथ द्वारा या कर करने करता करती किया गया गई गए रहा रही रहे"
    " अपने अपना अपनी क्या कैसे क्यों कौन कहाँ नहीं ना"
    # the pronouns' oblique and possessive forms: "इसे" stems to "इस", which would otherwise
    # match every chunk that says "इसे" or "इसका"
    " इसे इसका इसकी इसके इसको इसमें इससे इसी उसे उसका उसकी उसके उसको उसमें उससे उसी इन्हें"
    " उन्हें इनका इनकी इनके इनको इनमें इनसे उनका उनकी उनके उनको उनमें उनसे इन्हीं उन्हीं जिसे"
    " जिसका जिसकी जिसके जिसमें जिससे जिन्हें जिनका जिनकी जिनके मुझे मेरा मेरी मेरे हमें हमारा"
    " हमारी हमारे आपका आपकी आपके आपको"
    # more function words (conjunctions, quantifiers, auxiliaries; after Lucene's Hindi list)
    " अंदर आदि इत्यादि एवं ऐसे ऐसा ऐसी कई काफ़ी किसी किसे कुछ कोई जहाँ जहां जा जितना जिस जैसा"
    " जैसे जैसी तब तरह दूसरे ने फिर बहुत भीतर मगर यदि अगर यहाँ यहां यही वही वहाँ वहां वाले"
    " वाला वाली लेकिन परंतु किंतु क्योंकि इसलिए सकता सकते सकती सबसे सभी सारा हुआ हुई हुए होना"
    " होने होगा होगी होंगे जाता जाती जाते जाए जाएगा जाएगी चाहिए बिलकुल बिल्कुल वगैरह"
    # as often typed without the nasal, or with a medial "ये"
    " हमे इसमे उसमे इनमे उनमे जिसमे जायेगा जायेगी जायेंगे".split()
)
# Frequent Hindi function words (postpositions, auxiliaries, pronouns, conjunctions), as
# written and in their normalized spelling ("कहाँ", "कहां").
HINDI_STOP = frozenset(_HINDI_STOP_WORDS) | {hindi_spelling(w) for w in _HINDI_STOP_WORDS}

_english = snowballstemmer.stemmer("english")
_hindi = snowballstemmer.stemmer("hindi")


@lru_cache(maxsize=200_000)
def stem(word: str) -> str:
    """One case-folded word's BM25 stem (Snowball English or Hindi; other scripts as they are).
    A Devanagari word is stemmed in its normalized spelling, and its stem's vowels made short."""
    if _DEVANAGARI.match(word):
        return str(_hindi.stemWord(hindi_spelling(word))).translate(_LONG_VOWELS)
    if word.isascii():
        return str(_english.stemWord(word))
    return word  # other scripts: exact word forms (no stemmer shipped that we trust)


def words(text: str) -> list[str]:
    """Case-folded, NFC-normalized words, including Indic words with their vowel signs (a
    zero-width joiner or non-joiner inside a word does not cut it)."""
    text = unicodedata.normalize("NFC", text).casefold()
    if "\u200c" in text or "\u200d" in text:
        text = text.translate(_JOINERS)
    return _WORD.findall(text)


def bm25_terms(text: str) -> list[str]:
    """Stemmed terms without stop words, in order (repeats kept for term frequency)."""
    return list(_bm25_terms(text))


@memo_text
def _bm25_terms(text: str) -> tuple[str, ...]:
    return tuple(stem(w) for w in content_words(text))


def script_of(text: str) -> str:
    """`latin`, `devanagari`, `indic` (other Indic scripts) or `other`, by majority of letters."""
    counts = {"latin": 0, "devanagari": 0, "indic": 0, "other": 0}
    for ch in text[:2000]:
        if not ch.isalpha() and unicodedata.category(ch)[0] != "M":
            continue
        if ch.isascii():
            counts["latin"] += 1
        elif _DEVANAGARI.match(ch):
            counts["devanagari"] += 1
        elif _OTHER_INDIC.match(ch):
            counts["indic"] += 1
        else:
            counts["other"] += 1
    letters = sum(counts.values())
    if not letters:
        return "latin"
    # Indic pages mix in Latin (code, product names, links): a fifth of the letters decides.
    for script in ("devanagari", "indic"):
        if counts[script] >= 0.2 * letters:
            return script
    return max(counts, key=lambda k: counts[k])


INDIC_SCRIPT_LANGS = {
    "BENGALI": "bn",
    "GURMUKHI": "pa",
    "GUJARATI": "gu",
    "ORIYA": "or",
    "TAMIL": "ta",
    "TELUGU": "te",
    "KANNADA": "kn",
    "MALAYALAM": "ml",
}
"""Each Indic script other than Devanagari and the language most written in it."""


def indic_lang(text: str) -> str:
    """The language of the Indic script (other than Devanagari) most of `text`'s Indic letters
    are in, by `INDIC_SCRIPT_LANGS` (Bengali script → `bn`, Tamil → `ta`, …); "" for none."""
    counts: dict[str, int] = {}
    for ch in text[:2000]:
        if _OTHER_INDIC.match(ch):
            script = unicodedata.name(ch, "").split(" ", 1)[0]
            if script in INDIC_SCRIPT_LANGS:
                counts[script] = counts.get(script, 0) + 1
    return INDIC_SCRIPT_LANGS[max(counts, key=lambda k: counts[k])] if counts else ""


def content_words(text: str) -> list[str]:
    """`words` without stop words (unstemmed), in order; a Devanagari word is a stop word in any
    of its spellings ("परन्तु" as "परंतु", "जाये" as "जाए": `hindi_spelling`)."""
    return [w for w in words(text) if w not in ENGLISH_STOP and not _hindi_stop(w)]


@lru_cache(maxsize=200_000)
def _hindi_stop(word: str) -> bool:
    return in_any_spelling(word, HINDI_STOP)
