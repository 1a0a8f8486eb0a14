"""The agentic design's profiles (profile judge ``taxonomy: design``, ``sample: stratified``): its
29 document types, its stratified sample (hand-computed cut points), its intents factual /
conceptual / comparative / procedural by its rules (a table), the strategy they lead to, the llm
prompts and replies on a scripted model, and one real-model run. Off by default, its files apart
from the basic profile's, out of the ids."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from ragkit.corpus.model import Corpus, make_document
from ragkit.corpus.profile import CorpusProfile, DocumentProfile, corpus_profile, profile_path, profile_variant
from ragkit.corpus.profile_design import DESIGN_DOCUMENT_TYPES, FINAL_MARK, MIDDLE_MARK, stratified_sample
from ragkit.llms import LLMClient
from ragkit.stages.base import JudgementLog
from ragkit.stages.query.design_intents import design_complexity, design_intent, question_word
from ragkit.stages.query.profile import CorpusSide, ProfileJudge, ProfileParams, QueryProfile
from ragkit.stages.query.strategy import profiled_choice
from tests.factories import TINY_DOCS, scripted_llm_class

ScriptedLLM = scripted_llm_class()


def tiny_corpus() -> Corpus:
    return Corpus.from_documents("tiny", [make_document(doc_id, text, {"title": f"About {doc_id}"})
                                          for doc_id, text in TINY_DOCS.items()])


@pytest.mark.unit
def test_the_designs_29_types_in_its_groups():
    assert len(DESIGN_DOCUMENT_TYPES) == 29 and len(set(DESIGN_DOCUMENT_TYPES)) == 29
    assert DESIGN_DOCUMENT_TYPES[:6] == ("research_paper", "conference_paper", "journal_article", "thesis",
                                         "dissertation", "literature_review")
    assert DESIGN_DOCUMENT_TYPES[-1] == "other" and "api_reference" in DESIGN_DOCUMENT_TYPES


@pytest.mark.unit
def test_stratified_sample_cut_points_by_hand():
    text = "".join(f"{i % 10}" for i in range(1000))  # position i holds digit i % 10
    assert stratified_sample(text, 1000) == text  # fits: whole
    sample = stratified_sample(text, 100)
    # first: min(30% of 1000 = 300, 45% of 100 = 45) -> text[:45]; last: from max(800, 1000 - 22) = 978;
    # middle budget 100 - 45 - 22 = 33 of the 500 between 300 and 800: centred, from 300 + (500 - 33) // 2 = 533.
    assert sample == text[:45] + MIDDLE_MARK + text[533:566] + FINAL_MARK + text[978:]
    short = text[:120]  # first: min(36, 45) -> [:36]; last: from max(96, 98) = 98; middle from 36 + (60 - 33) // 2
    assert stratified_sample(short, 100) == short[:36] + MIDDLE_MARK + short[49:82] + FINAL_MARK + short[98:]


@pytest.mark.unit
@pytest.mark.parametrize(("query", "asked", "intent", "complexity"), [
    ("How do I install the client?", "how", "procedural", "moderate"),
    ("Give me a step by step guide to sequencing", None, "procedural", "moderate"),
    ("What is the difference between BCoV and OC43?", "what", "comparative", "complex"),  # comparative first
    ("BCoV vs OC43", None, "comparative", "simple"),  # under 5 words: simple whatever the intent
    ("Why do cats purr when they are content?", "why", "conceptual", "complex"),
    ("What is the incubation period of MERS?", "what", "conceptual", "complex"),  # "what" is conceptual
    ("Explain the replication cycle of coronaviruses in cells", None, "conceptual", "complex"),
    ("When was the French strain of BCoV sequenced?", "when", "factual", "moderate"),
    ("Which host carried the strain sampled in Normandy in 2014 and in the years before it?", "which",
     "factual", "complex"),  # 16 words
    ("BCoV genome length", None, "factual", "simple"),
])
def test_the_designs_intent_and_complexity_rules(query, asked, intent, complexity):
    assert question_word(query) == asked
    assert design_intent(query) == intent
    assert design_complexity(query, intent) == complexity


@pytest.mark.unit
@pytest.mark.parametrize(("intent", "expected"), [
    ("conceptual", ("dense", 0.7, "a conceptual question: meaning over exact words")),
    ("comparative", ("hybrid", 0.6, "a comparison: exact names and meaning both count")),
    ("exploratory", ("dense", 0.7, "an exploratory question: meaning over exact words")),  # the basic one, unchanged
])
def test_the_designs_intents_lead_where_exploratory_and_comparison_do(intent, expected):
    profile = QueryProfile(intent, "moderate", CorpusSide(None, 0.0, False, ()))
    assert profiled_choice("an open question with several plain words", profile) == expected


@pytest.mark.unit
def test_heuristic_design_profile_records_the_designs_intent_and_types(tmp_path):
    documents = corpus_profile(tiny_corpus(), tmp_path, "heuristic", taxonomy="design")
    assert {profile.type for profile in documents.documents} == {"other"}  # general prose: the design's fallback
    api = CorpusProfile("c", "heuristic", None, (DocumentProfile("a", "api_reference", 0.1, ()),))
    judge = ProfileJudge(ProfileParams(mode="heuristic", taxonomy="design"), document_profiles=api)
    trace = JudgementLog()
    profile = judge.profile("Why do cats purr when content?", trace)
    assert profile is not None and (profile.intent, profile.complexity) == ("conceptual", "complex")
    assert profile.technical  # an API reference counts as code does, whatever its density
    assert trace.judgements[0].decision["intent"] == "conceptual"
    basic = ProfileJudge(ProfileParams(mode="heuristic"), document_profiles=api).profile("Why?", JudgementLog())
    assert basic is not None and basic.intent == "exploratory" and not basic.technical  # unchanged off


@pytest.mark.unit
def test_llm_design_profiles_show_the_sample_and_the_29_types(tmp_path):
    corpus = Corpus.from_documents("long", [make_document("d1", "A" * 300 + "B" * 400 + "C" * 300, {"title": "T"})])
    reply = json.dumps({"type": "journal_article", "technical_density": 0.6, "domain_tags": ["virology"]})
    backend = ScriptedLLM([reply])
    client = LLMClient(backend, None)
    result = corpus_profile(corpus, tmp_path, "llm", client, taxonomy="design", sample="stratified", sample_chars=200)
    assert result.documents[0] == DocumentProfile("d1", "journal_article", 0.6, ("virology",))
    prompt = backend.requests[0][-1]["content"]
    assert f"Sample: {'A' * 90}{MIDDLE_MARK}{'B' * 66}{FINAL_MARK}{'C' * 44}\n" in prompt
    assert "conference_paper" in prompt and "literature_review" in prompt
    assert profile_path(corpus.corpus_id, tmp_path, "llm", "scripted:scripted",
                        ("design", "stratified", 200)).exists()
    bad = ScriptedLLM([json.dumps({"type": "academic", "technical_density": 0.6, "domain_tags": []})])
    fell_back = corpus_profile(corpus, tmp_path / "b", "llm", LLMClient(bad, None), taxonomy="design")
    assert not fell_back.documents[0].valid and fell_back.documents[0].type == "other"  # a basic type is refused


@pytest.mark.unit
def test_llm_design_intents_in_the_prompt_and_the_reply(tmp_path):
    backend = ScriptedLLM([json.dumps({"intent": "conceptual", "complexity": "moderate", "reason": "why"}),
                           json.dumps({"intent": "exploratory", "complexity": "moderate", "reason": "r"})])
    judge = ProfileJudge(ProfileParams(mode="llm", taxonomy="design"), LLMClient(backend, tmp_path))
    profile = judge.profile("Why do cats purr?", JudgementLog())
    assert profile is not None and profile.intent == "conceptual"
    assert "conceptual (understanding a concept" in backend.requests[0][-1]["content"]
    assert "exploratory" not in backend.requests[0][-1]["content"]
    trace = JudgementLog()
    assert judge.profile("Why do dogs bark?", trace) is None  # a basic intent is not one of the design's
    assert trace.judgements[0].fell_back


@pytest.mark.unit
def test_off_by_default_apart_and_out_of_the_key():
    params = ProfileParams()
    assert (params.taxonomy, params.sample, params.sample_chars) == ("basic", "opening", 800)
    assert not {"taxonomy", "sample", "sample_chars"} & set(params.key_dump())
    assert profile_variant("llm") is None and profile_variant("heuristic", sample_chars=20000) is None
    assert profile_variant("heuristic", "design") == ("design",)
    with pytest.raises(ValidationError):
        ProfileParams(taxonomy="dewey")
    with pytest.raises(ValidationError):
        ProfileParams(sample_chars=50)


@pytest.mark.slow  # three document profiles and a query profile on the embedded model
def test_real_local_model_profiles_with_the_designs_types_and_intents(tmp_path, local_backend):
    client = LLMClient(local_backend, cache_dir=tmp_path / "llm")
    documents = corpus_profile(tiny_corpus(), tmp_path / "profiles", "llm", client, taxonomy="design",
                               sample="stratified", sample_chars=2000)
    for item in documents.documents:  # one of the 29, by the model or by the rule with the reason
        assert item.type in DESIGN_DOCUMENT_TYPES and (item.valid or item.error)
    trace = JudgementLog()
    profile = ProfileJudge(ProfileParams(mode="llm", taxonomy="design"), client,
                           document_profiles=documents).profile("Why do cats purr?", trace)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None
    if judgement.valid:
        assert profile is not None and profile.intent in ("factual", "conceptual", "comparative", "procedural")
    else:
        assert profile is None and judgement.fell_back
