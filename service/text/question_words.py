"""Words a question uses to say what it asks, not what it is about, in English, romanized Hindi
(Hinglish), Hindi and the other Indic languages: `service.answerability` does not count them
as the question's content terms (a page that holds them is no closer to answering), and
romanized Hindi function words also mark a question as Hinglish."""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import regex

from service.text.tokenize import hindi_spelling, in_any_spelling

# Romanized Hindi function words (Hinglish): never in English documentation, so they would
# count as uncovered question terms; they also mark the question as Hinglish.
HINGLISH_STOP = frozenset(
    "kya kaise kaisa kaisi kyun kyon kaun kaunsa kaunsi kahan kab kitna kitne kitni hai hain tha"
    " thi hota hoti hote karein karen kare karna karte karta karti kar kiya ke ki ka ko"
    " se mein aur ya bhi toh ye yeh wo woh liye sath saath wala wali wale chahiye sakte sakta"
    " sakti hum mujhe mera meri mere apna apne apni koi kuch jaise jab tak sabse nahi nahin diya"
    " gaya raha rahe rahi batao bataiye"
    # pronouns in their oblique and possessive forms ("ise kaise banayein": "ise" is "it")
    " ise iska iski iske isko isme isse usko uska uski uske usme usse inhe unhe inka inki inke"
    " unka unki unke inko unko inme unme inse unse jise jiska jiski jiske hamara hamari hamare"
    " humein hame hamein aapka aapki aapke aapko ismein usmein inmein unmein jinka jinki jinke"
    " inhen unhen".split()
)
HINGLISH_ACTIONS = frozenset(
    "chalayein chalaye chalaen chalayen chalana chalane chalao chalaiye"  # run
    " banayein banaye banaen banayen banane banao banaiye"  # create ("banana": English too)
    " bhejein bheje bhejen bhejna bhejne bhejo bhejiye"  # send
    " badlein badle badlen badalna badalne badlo badliye"  # change
    " jodein jode joden jodna jodne jodo jodiye"  # add
    " likhein likhe likhen likhna likhne likho likhiye"  # write
    " padhein padhe padhen padhna padhne padho padhiye"  # read
    " lautayein lautaye lautayen lautana lautane lautao"  # return
    " hatayein hataye hatayen hatana hatane hatao"  # remove
    " dikhayein dikhaye dikhayen dikhana dikhane dikhao"  # show
    " lagayein lagaye lagayen lagana lagane lagao"  # apply, attach
    " rakhein rakhe rakhen rakhna rakhne rakho"  # keep, store
    " todein tode toden todna todne"  # split
    " milega milegi milenge milengi"  # get
    " chalu saksham".split()  # enable
)
"""Romanized Hindi how-to verbs that name the action, as Hinglish questions spell them
("background task kaise chalayein?"): like Hindi's (`HINDI_ACTIONS`), a page says them in
English, so they are no content terms (the question asked for "background task" and was
abstained on); they mark a question as Hinglish, and selection counts them in a how-question's
steps (`service.answerability.action_terms`)."""
HINGLISH_ASKING = frozenset("istemal istemaal upyog prayog".split())
"""Romanized "use": a how-to verb that names no action."""
# Hindi question words and auxiliaries beyond BM25's stop words: they say what is asked, not
# what about, so they are not content terms (they match any Hindi page).
HINDI_QUESTION_STOP = frozenset(
    "कितना कितने कितनी किसने किसको किसका किसकी किसके कब कहां कहाँ कौनसा कौनसी कौन सा सी"
    " होते होती होता हुआ हुई हुए जाता जाती जाते सबसे बहुत सकते सकता सकती चाहिए करें करूं"
    " करूँ करे बनाएं बनाते बताएं मैं हम आप अपने"
    # how-to verbs ("enable", "use", "set", "send", "get", "read", "add", "run"): a translation
    # says them in other words (or in English), so they never decide whether a page answers
    " चालू बंद सक्षम इस्तेमाल उपयोग प्रयोग बदलें बदले सेट लौटाएं लौटाएँ भेजें प्राप्त पढ़ें"
    " जोड़ें लें लिखें चलाएं चलाएँ करना करने करते बनाना बनाने".split()
)
HINDI_ACTIONS = frozenset(
    "चालू बंद सक्षम बदलें बदले सेट लौटाएं लौटाएँ भेजें प्राप्त पढ़ें जोड़ें लिखें चलाएं चलाएँ बनाएं बनाना बनाने".split()
)
"""The how-to verbs among them that name the action ("बनाएं": create), not just "do" or "use":
a step that says the same verb ("… token बनाएँ।") is the step asked for."""
# (Hindi pronouns in every form, "इसे", "उसका", are BM25 stop words: service.text.tokenize.)
# The question words of the other Indic languages (what, how, why, where, when, who, which,
# how many), as questions write them: like Hindi's, they say what is asked, not what about.
INDIC_QUESTION_STOP = frozenset(
    "কী কি কেন কোথায় কখন কে কীভাবে কিভাবে কোন কোনটি কত"  # Bengali
    " ਕੀ ਕਿਵੇਂ ਕਿਉਂ ਕਿੱਥੇ ਕਦੋਂ ਕੌਣ ਕਿਹੜਾ ਕਿਹੜੀ ਕਿੰਨੇ ਕਿੰਨਾ"  # Punjabi
    " શું કેવી રીતે કેમ ક્યાં ક્યારે કોણ કયું કયો કઈ કેટલા કેટલું"  # Gujarati
    " କଣ କିପରି କାହିଁକି କେଉଁଠି କେବେ କିଏ କେଉଁ କେତେ"  # Odia
    " என்ன எப்படி ஏன் எங்கே எப்போது யார் எது எந்த எத்தனை"  # Tamil
    " ఏమిటి ఏమి ఎలా ఎందుకు ఎక్కడ ఎప్పుడు ఎవరు ఏది ఏ ఎన్ని"  # Telugu
    " ಏನು ಹೇಗೆ ಏಕೆ ಎಲ್ಲಿ ಯಾವಾಗ ಯಾರು ಯಾವುದು ಯಾವ ಎಷ್ಟು"  # Kannada
    " എന്ത് എങ്ങനെ എന്തുകൊണ്ട് എവിടെ എപ്പോൾ ആര് ഏത് ഏതാണ് എത്ര".split()  # Malayalam
)
# English function words BM25 keeps (possessives, quantifiers): not what a question is about.
ENGLISH_QUESTION_STOP = frozenset(
    "my me mine our ours us yours his hers any some all also just more most very much many"
    " one get got".split()
)
QUESTION_STOP = (
    HINGLISH_STOP
    | HINGLISH_ACTIONS
    | HINGLISH_ASKING
    | HINDI_QUESTION_STOP
    | {hindi_spelling(w) for w in HINDI_QUESTION_STOP}  # as typed: "पढें", "बनाएँ", "जोडें"
    | INDIC_QUESTION_STOP
    | ENGLISH_QUESTION_STOP
)
HINGLISH_WORDS = HINGLISH_STOP | HINGLISH_ACTIONS | HINGLISH_ASKING
"""Every romanized Hindi word that marks a question as Hinglish."""
# Words of the list that are also English words never mark a question as Hinglish.
ALSO_ENGLISH = frozenset("ki ka ko ye wo hum tak raha kar koi".split())


_FIRST_PERSON = regex.compile(r"(?<=\p{L}\p{M}*)(?:(?<=ा)ऊ|ू)[ंँ]$")
"""A Hindi verb's first person ("चलाऊं", "भेजूँ", "करूं": shall I run, send, do)."""


def imperative(word: str) -> str:
    """A Hindi verb's first person as its polite imperative, the form the lists hold and pages
    say ("मैं अपना ऐप कैसे चलाऊं?" asks for "चलाएं"; "भेजूं" is "भेजें"); any other word as it is."""
    return _FIRST_PERSON.sub(lambda m: "एं" if m.group().startswith("ऊ") else "ें", word)


def _listed(word: str, vocab: AbstractSet[str]) -> bool:
    """`word` is in `vocab` in any of its Hindi spellings, a Hindi verb in any person (its first
    person as the imperative the lists hold)."""
    return in_any_spelling(word, vocab) or in_any_spelling(imperative(word), vocab)


def asks(word: str) -> bool:
    """A case-folded word that says what is asked, not what about (`_listed`)."""
    return _listed(word, QUESTION_STOP)


_INDIC_ASKING = (
    HINDI_QUESTION_STOP | {hindi_spelling(w) for w in HINDI_QUESTION_STOP} | INDIC_QUESTION_STOP
)


_ACTIONS = HINDI_ACTIONS | {hindi_spelling(w) for w in HINDI_ACTIONS}


def names_action(word: str) -> bool:
    """A (case-folded) Hindi how-to verb that names the action (`HINDI_ACTIONS`, in any person,
    or romanized: `HINGLISH_ACTIONS`)."""
    if word.isascii():
        return word in HINGLISH_ACTIONS
    return _listed(word, _ACTIONS)


def asks_in_indic(word: str) -> bool:
    """Whether a (case-folded) word is one a Hindi or other Indic question asks with, in any
    of its spellings: left out of a question's BM25 terms (`service.text.bm25.query_terms`)."""
    return not word.isascii() and _listed(word, _INDIC_ASKING)
