from __future__ import annotations

import msgspec
import numpy as np
import pytest

from evals.fit_answerability import Row, fit, pick_threshold
from evals.logistic import fit_logistic
from service.answerability import (
    Logistic,
    Model,
    Signals,
    abstain_message,
    action_terms,
    compute,
    content_keys,
    content_terms,
    decide,
    load_model,
    question_lang,
)
from service.generate.protocol import Passage
from service.generate.select import select
from service.index.protocol import Hit
from service.text.bm25 import K1, term_weights
from service.text.question_words import INDIC_QUESTION_STOP
from service.text.tokenize import bm25_terms, words

pytestmark = pytest.mark.unit


def _hit(text: str, dense: float, bm25: float, title: str = "") -> Hit:
    return Hit(
        id=text[:8],
        doc_id=text[:8],
        chunk_ix=0,
        score=0.0,
        text=text,
        title=title,
        scores={"dense": dense, "bm25": bm25},
    )


def test_question_language() -> None:
    assert question_lang("How do I enable CORS?") == "en"
    assert question_lang("मैं CORS कैसे सक्षम करूं?") == "hi"
    assert question_lang("FastAPI app mein CORS kaise enable karein?") == "hinglish"
    assert question_lang("What is the main idea?") == "en"
    # a short request that ends in a romanized Hindi infinitive is Hinglish with that one word
    assert question_lang("cors enable karna") == "hinglish"
    assert question_lang("cookie set karein") == "hinglish"
    assert question_lang("CORS enable") == "en"
    assert question_lang("How do I enable CORS in my app, so that karna works?") == "en"


def test_question_language_is_judged_on_its_prose_not_its_code() -> None:
    """Quoted code (a backticked span, identifier-like tokens) says nothing of the language the
    question is asked in: it made a Hindi or Hinglish question that quotes a line "English"."""
    code = '`app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_credentials=True)`'
    assert question_lang(f"{code} का मतलब क्या है?") == "hi"
    bare = 'app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"])'
    assert question_lang(f"{bare} का मतलब क्या है?") == "hi"
    line = '`@app.get("/items/{item_id}") async def read_item(item_id: int)`'
    assert question_lang(f"Mera code {line} 422 error kyon deta hai?") == "hinglish"
    assert question_lang(f"Why does {line} return 422?") == "en"
    assert question_lang("What does app.include_router do?") == "en"
    assert question_lang("`app.include_router`") == "en"  # nothing but code: the code decides
    # the other Indic scripts each tell their language, English words mixed in or not
    assert question_lang("CORSMiddleware ஐ எப்படி பயன்படுத்துவது?") == "ta"
    assert question_lang("ফ্রান্সের রাজধানী কী?") == "bn"
    assert question_lang("ఫ్రాన్స్ రాజధాని ఏది?") == "te"
    assert question_lang("ಫ್ರಾನ್ಸ್‌ನ ರಾಜಧಾನಿ ಯಾವುದು?") == "kn"
    assert question_lang("ഫ്രാൻസിന്റെ തലസ്ഥാനം ഏതാണ്?") == "ml"
    assert question_lang("ફ્રાન્સની રાજધાની કઈ છે?") == "gu"
    assert question_lang("ਫਰਾਂਸ ਦੀ ਰਾਜਧਾਨੀ ਕੀ ਹੈ?") == "pa"
    assert question_lang("ଫ୍ରାନ୍ସର ରାଜଧାନୀ କଣ?") == "or"
    assert question_lang("Какая столица Франции?") == "other"


def test_signals_use_raw_scores_and_term_coverage() -> None:
    hits = [
        _hit("CORSMiddleware enables CORS. Origins are listed.", 0.7, 12.0),
        _hit("Unrelated text about cookies.", 0.2, 3.0),
    ]
    s = compute("How do I enable CORS with a middleware?", hits)
    assert s.dense_top == 0.7
    assert s.terms == 3  # enabl, cor, middlewar
    assert s.bm25_per_term == pytest.approx(12.0 / 3)
    assert s.coverage == 1.0  # "middleware" is only inside CORSMiddleware: split, it counts
    assert s.sentence_coverage == 1.0
    assert s.lang == "en"


def _scored(text: str, idf: dict[str, float], dense: float) -> Hit:
    """A hit whose BM25 is what the engine gives with these IDFs (Σ idf · stored weight)."""
    w = term_weights(text)
    return _hit(text, dense, sum(idf[t] * v for t, v in w.items() if t in idf))


# "Who founded the Zorblax company?": zorblax is rare, compani common, found in between.
KNOWN_IDF = {"found": 1.0, "zorblax": 4.0, "compani": 0.5}
EVIDENCE = {
    "Zorblax is a company.": 0.6,
    "The company was found by many.": 0.4,
    "Zorblax and the company grew, the company grew.": 0.3,
}


def _evidence(idf: dict[str, float]) -> list[Hit]:
    return [_scored(text, idf, dense) for text, dense in EVIDENCE.items()]


def test_idf_weighted_coverage_counts_rare_terms_more() -> None:
    hits = _evidence(KNOWN_IDF)
    s = compute("Who founded the Zorblax company?", hits)
    assert s.terms == 3 and s.coverage == 1.0
    assert s.idf_coverage == pytest.approx(1.0)
    # best sentence by weight: "Zorblax is a company." holds 4.0 + 0.5 of 5.5
    assert s.sentence_idf_coverage == pytest.approx(4.5 / 5.5)
    assert s.sentence_coverage == pytest.approx(2 / 3)
    other = _scored("A company, a company.", KNOWN_IDF, 0.3)
    lacking = compute("Who founded the Zorblax company?", [hits[1], other])
    # only "found" and "compani" are held: unweighted 2/3, weighted (1 + 0.5) / (1 + 0.5 + 1)
    # ("zorblax" is in no hit: it gets the largest IDF recovered, 1.0)
    assert lacking.coverage == pytest.approx(2 / 3)
    assert lacking.idf_coverage == pytest.approx(1.5 / 2.5)


def test_bm25_normalised_by_the_most_the_query_can_reach() -> None:
    hits = _evidence(KNOWN_IDF)
    s = compute("Who founded the Zorblax company?", hits)
    best = max(h.scores["bm25"] for h in hits)
    assert 0 < s.bm25_norm < 1
    assert s.bm25_norm == pytest.approx(best / ((K1 + 1) * 5.5))
    # the same evidence with every IDF tripled (raw BM25 triples): the same value
    tripled = _evidence({t: v * 3 for t, v in KNOWN_IDF.items()})
    assert max(h.scores["bm25"] for h in tripled) == pytest.approx(3 * best)
    assert compute("Who founded the Zorblax company?", tripled).bm25_norm == pytest.approx(
        s.bm25_norm
    )
    assert s.dense_margin == pytest.approx(0.2)


def test_hinglish_function_words_are_not_question_terms() -> None:
    hits = [_hit("Enable CORS with CORSMiddleware.", 0.5, 9.0)]
    s = compute("CORS kaise enable karein?", hits)
    assert s.terms == 2 and s.coverage == 1.0 and s.lang == "hinglish"


@pytest.mark.parametrize(
    ("question", "verb"),
    [
        ("background task kaise chalayein?", "chalayein"),
        ("Docker image kaise banayein?", "banayein"),
        ("CORS kaise chalu karein?", "chalu"),
    ],
)
def test_hinglish_how_to_verbs_are_no_question_terms(question: str, verb: str) -> None:
    """A romanized Hindi verb ("chalayein": run) is no English page's word: counted as a term,
    it left a short Hinglish question half covered (read as English: one Hindi word in four),
    and the demo abstained on "background task kaise chalayein?". It marks the question as
    Hinglish and, naming the action, stays a term of a how-answer's steps as Hindi's do."""
    hits = [_hit("Run a background task, build a Docker image, enable CORS.", 0.5, 9.0)]
    s = compute(question, hits)
    assert s.lang == "hinglish" and s.coverage == 1.0, s
    assert not {verb, *bm25_terms(verb)} & content_terms(question)
    assert set(bm25_terms(verb)) <= action_terms(question)  # a how-answer's steps count it


@pytest.mark.parametrize(
    ("first_person", "imperative"),
    [
        ("मैं अपना ऐप कैसे चलाऊं?", "अपना ऐप कैसे चलाएं?"),
        ("मैं अपना ऐप कैसे चलाऊँ?", "अपना ऐप कैसे चलाएं?"),
        ("मैं request body कैसे भेजूं?", "request body कैसे भेजें?"),
        ("मैं CORS कैसे चालू करूँ?", "CORS कैसे चालू करें?"),
    ],
)
def test_a_hindi_how_to_verb_in_the_first_person_is_the_same_verb(
    first_person: str, imperative: str
) -> None:
    """ "चलाऊं" ("shall I run") is the verb the lists hold as "चलाएं": no content term (it was
    one, uncovered, and the demo abstained on "मैं अपना ऐप कैसे चलाऊं?"), and the same action
    for a how-answer's steps."""
    assert content_terms(first_person) == content_terms(imperative)
    assert action_terms(first_person) == action_terms(imperative)


def _model(threshold: float = 0.5) -> Model:
    lex = Logistic(
        features=["coverage"],
        mean=[0.5],
        scale=[0.25],
        coef=[3.0],
        intercept=0.0,
        threshold=threshold,
    )
    dense = Logistic(
        features=["dense_top", "coverage"],
        mean=[0.4, 0.5],
        scale=[0.1, 0.25],
        coef=[2.0, 2.0],
        intercept=0.0,
        threshold=threshold,
    )
    return Model(version="t", models={"dense": dense, "lexical": lex})


def test_decide_picks_the_model_by_language_and_thresholds() -> None:
    hits = [_hit("Paris is the capital of France.", 0.8, 10.0)]
    yes = decide("What is the capital of France?", hits, _model())
    assert yes.answerable and yes.model == "dense" and yes.probability > 0.9
    far = [_hit("Paris is the capital of France.", 0.1, 0.0)]
    no = decide("How tall is Mount Everest?", far, _model())
    assert not no.answerable and no.probability < 0.1
    hindi = decide("भारत की राजधानी क्या है?", hits, _model())
    assert hindi.model == "lexical" and not hindi.answerable  # no Hindi words in the passage
    # "फ्रांस" is the passage's "France" spelled in Devanagari (service.text.phonetic)
    france = decide("फ्रांस की राजधानी क्या है?", hits, _model())
    assert france.signals.coverage == 0.5 and france.probability > hindi.probability
    assert not decide("anything", [], _model()).answerable


def test_question_words_of_the_other_indic_languages_are_not_content_terms() -> None:
    """ "What is the capital of France?" asks about France and its capital, in any script."""
    assert content_terms("ফ্রান্সের রাজধানী কী?") == {"ফ্রান্সের", "রাজধানী"}
    assert content_terms("ఫ్రాన్స్ రాజధాని ఏది?") == {"ఫ్రాన్స్", "రాజధాని"}
    assert content_terms("ഫ്രാൻസിന്റെ തലസ്ഥാനം ഏതാണ്?") == {"ഫ്രാൻസിന്റെ", "തലസ്ഥാനം"}
    assert "எப்படி" not in content_terms("CORSMiddleware ஐ எப்படி பயன்படுத்துவது?")
    assert "কীভাবে" not in content_terms("CORSMiddleware কীভাবে ব্যবহার করব?")
    for word in INDIC_QUESTION_STOP:  # each entry is one word as the tokenizer reads it
        assert words(word) == [word]


def test_abstain_message_follows_the_question_language() -> None:
    assert abstain_message("hi") == "स्रोतों में इस प्रश्न का उत्तर नहीं है।"
    assert abstain_message("en") == abstain_message("hinglish")
    assert "do not answer" in abstain_message("en")
    assert abstain_message("ta") == "மூலங்களில் இந்தக் கேள்விக்கான பதில் இல்லை."
    assert abstain_message("bn") == "উৎসগুলিতে এই প্রশ্নের উত্তর নেই।"
    # every Indic language a question can be told in has its own message, in its own script
    for lang in ("bn", "pa", "gu", "or", "ta", "te", "kn", "ml"):
        message = abstain_message(lang)
        assert message != abstain_message("en") and question_lang(message) == lang
    assert abstain_message("other") == abstain_message("en")


def test_shipped_model_is_loadable_and_sane() -> None:
    model = load_model()
    assert set(model.models) == {"aligned", "sentence", "dense", "lexical"}
    lo, hi = model.align_band
    assert 0 <= lo < hi <= 1
    for logit in model.models.values():
        assert 0 < logit.threshold < 1
        weak = Signals(
            lang="en",
            dense_top=0.05,
            coverage=0.0,
            sentence_coverage=0.0,
            terms=4,
            sentence_sim=0.05,
            sentence_sim_first=0.05,
            align_mean=0.3,
            align_min=0.1,
        )
        strong = Signals(
            lang="en",
            dense_top=0.8,
            bm25_per_term=6.0,
            coverage=1.0,
            sentence_coverage=1.0,
            terms=4,
            sentence_sim=0.8,
            sentence_sim_first=0.8,
            align_mean=0.95,
            align_min=0.9,
        )
        assert logit.probability(weak) < logit.threshold < logit.probability(strong)


def test_fit_logistic_separates_and_threshold_bounds_false_abstention() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal(1, 1, 200), rng.normal(-1, 1, 200)])[:, None]
    y = np.array([1.0] * 200 + [0.0] * 200)
    coef, _ = fit_logistic(x, y)
    assert coef[0] > 1.0
    rows = [
        Row(
            suite="s",
            id=str(i),
            lang="en",
            split="dev",
            kind="k",
            answerable=bool(y[i]),
            signals=Signals(coverage=float(x[i, 0])),
        )
        for i in range(400)
    ]
    model = fit(rows, ["coverage"], max_false=0.05)
    pos = [model.probability(r.signals) for r in rows if r.answerable]
    assert sum(p < model.threshold for p in pos) / len(pos) <= 0.05
    assert pick_threshold(model, rows, 0.0) <= model.threshold


def test_sentence_similarity_is_a_signal_only_for_english_with_vectors() -> None:
    sentence = Logistic(
        features=["sentence_sim"],
        mean=[0.4],
        scale=[0.1],
        coef=[3.0],
        intercept=0.0,
        threshold=0.5,
    )
    model = _model()
    model.models["sentence"] = sentence
    on_topic = msgspec.structs.replace(
        _hit("Paris is the capital of France. It is big.", 0.8, 10.0),
        sentence_scores=[0.7, -2.0],
    )
    d = decide("What is the capital of France?", [on_topic], model)
    assert d.model == "sentence" and d.signals.has_sentences
    assert d.signals.sentence_sim == d.signals.sentence_sim_first == 0.7  # -2: no vector
    assert d.answerable
    unrelated = msgspec.structs.replace(on_topic, sentence_scores=[0.1, 0.05])
    assert not decide("What is the capital of France?", [unrelated], model).answerable
    # an index built before sentence vectors: the dense model decides
    old = _hit("Paris is the capital of France.", 0.8, 10.0)
    assert decide("What is the capital of France?", [old], model).model == "dense"
    # the English embedder is noise for Hindi: never the sentence model
    assert decide("फ्रांस की राजधानी क्या है?", [on_topic], model).model == "lexical"


def test_pronouns_are_not_content_terms() -> None:
    """ "मिडलवेयर क्या है और इसे कैसे बनाएं?" asks about middleware; "इसे" ("it") is not what
    it asks about, in Devanagari or romanized, so a sentence that says "इसे" is no closer."""
    assert content_terms("मिडलवेयर क्या है और इसे कैसे बनाएं?") == {"मिडलवेयर"}
    assert "ise" not in content_terms("middleware kya hai aur ise kaise banayein?")
    assert content_terms("उसका status code कैसे बदलें?") == {"status", "code"}
    assert question_lang("isko kaise configure karein?") == "hinglish"
    definition = '"middleware" एक function है जो हर request के साथ काम करता है।'
    pronoun = "अगर कोई background tasks थे, तो आप इसे बाद में देखेंगे: वे middleware के बाद चलेंगे।"
    picked = select(
        content_terms("मिडलवेयर क्या है और इसे कैसे बनाएं?"),
        [Passage(id="S1", title="", text=f"{definition} {pronoun}")],
        1,
        content_keys("मिडलवेयर क्या है और इसे कैसे बनाएं?"),
    )
    assert picked == [(definition, "S1")]
