"""Hindi software words and the English words pages use for them.

Hindi documentation (FastAPI's among them) writes most technical words in English — "testing",
"error", "request" — while a reader may ask in Hindi words: "परीक्षण", "त्रुटि", "अनुरोध". The
consonant skeletons of `service.text.phonetic` meet an English word spelled in Devanagari
("मिडलवेयर"), never a Hindi word for it, and the packaged embedder knows English only. So a
question's Hindi software words also ask for their English equivalents, as BM25 terms of their
own (`service.text.bm25.query_terms`), and a sentence that says the English word holds the
Hindi question term (`service.answerability.content_keys`).

The list is general software vocabulary (standard Hindi technical terms and common spellings
of loanwords too short for a skeleton: "फ़ाइल", "ऐप", "कोड", "पाथ", "हेडर", "एपीआई"; a
skeleton needs three consonants, and "पाथ" has two, so "पाथ पैरामीटर क्या है?" met "parameter"
and never "path", and the demo abstained on it). It does hold the two words the
README named as the `docs` suite's Hindi misses ("परीक्षण", "त्रुटि"), so that suite is not a
blind test of it. Question words and how-to verbs are left out: they say what is asked,
not what about. Each entry: a Hindi word (spelling variants are entries of their own) and the
English word(s) it asks for, the first being the one a held sentence is matched on.
"""

from __future__ import annotations

from functools import cache

from service.text.tokenize import bm25_terms, has_devanagari

_ENTRIES = """
परीक्षण test testing
टेस्टिंग testing test
जांच test check
जाँच test check
त्रुटि error
त्रुटियां error
त्रुटियाँ error
गलती error
ग़लती error
अपवाद exception
अनुरोध request
प्रतिक्रिया response
प्रमाणीकरण authentication
प्राधिकरण authorization
सत्यापन validation verification
उपयोगकर्ता user
सुरक्षा security
निर्भरता dependency
निर्भरताएं dependencies
निर्भरताएँ dependencies
मार्ग path route
पथ path
शीर्षलेख header
प्रारूप format
दस्तावेज़ documentation document
दस्तावेज documentation document
दस्तावेज़ीकरण documentation
तैनाती deployment deploy
परिनियोजन deployment
विन्यास configuration
वातावरण environment
पर्यावरण environment
चर variable
मान value
प्रकार type
वर्ग class
विधि method
तर्क argument
आयात import
स्थापना installation install
संस्करण version
अद्यतन update
उन्नयन upgrade
फ़ाइल file
फाइल file
फ़ाइलें files
फाइलें files
फ़ाइलों files
फाइलों files
निर्देशिका directory
ग्राहक client
कुकी cookie
कुकीज़ cookies
सत्र session
कुंजी key
गुप्त secret
पृष्ठभूमि background
कार्य task
अनुप्रयोग application
एप्लिकेशन application app
एप्लीकेशन application app
ऐप app application
कोड code
स्थिर static
स्थिति status
संदेश message
घटना event
घटनाएं events
लॉग log
कैश cache
सीमा limit
पृष्ठ page
खोज search
अनुमति permission
अनुमतियां permissions
भूमिका role
समूह group
बॉडी body
डेटा data
डाटा data
प्रपत्र form
फ़ॉर्म form
फॉर्म form
पाथ path
पाथ्स paths
टाइप type
टाइप्स types
हेडर header
हेडर्स headers
होस्ट host
टैग tag
टैग्स tags
राउट route
रूट route root
वेब web
कॉल call
लूप loop
यूज़र user
यूजर user
यूज़र्स users
यूजर्स users
एरर error
एरर्स errors
आईडी id
एपीआई api
यूआरएल url
एचटीटीपी http
एचटीटीपीएस https
पुट put
पैच patch
सेट set
बूल bool
टाइम time
डेट date
पेज page
शेल shell
पिप pip
गिट git
नोड node
जॉब job
"""


@cache
def _table() -> dict[str, tuple[str, ...]]:
    """A Hindi word's BM25 stem → the BM25 stems of its English words (first: the main one)."""
    out: dict[str, tuple[str, ...]] = {}
    for line in _ENTRIES.strip().splitlines():
        hindi, *english = line.split()
        stems = bm25_terms(hindi)
        said = tuple(dict.fromkeys(t for w in english for t in bm25_terms(w)))
        if len(stems) == 1 and said:
            out.setdefault(stems[0], said)
    return out


def may_hold(text: str) -> bool:
    """Whether `text` may hold a glossary word (every one is written in Devanagari): a text
    without any has no glossary terms (SciFact's "β-cells" or "naïve" included)."""
    return has_devanagari(text)


def english_terms(term: str) -> tuple[str, ...]:
    """The English BM25 terms a Hindi BM25 term (a stem) asks for; () for any other term."""
    return _table().get(term, ())


def query_terms(terms: list[str]) -> list[str]:
    """The English BM25 terms of a query's Hindi terms (stems), in order, once each."""
    return list(dict.fromkeys(t for term in terms for t in english_terms(term)))
