"""Profile judge: intent and complexity rules as tables, llm replies on a scripted model (used,
unusable, failed), the strategy chosen from a profile, the pipeline handing the profile to the
strategy judge, and one real-model run."""

from __future__ import annotations

import json
from typing import ClassVar

import pytest

from ragkit.corpus.profile import CorpusProfile, DocumentProfile
from ragkit.errors import ConfigError, LLMError
from ragkit.llms import LLMClient
from ragkit.pipeline.pipeline import Pipeline
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.query.profile import (
    CorpusSide,
    ProfileJudge,
    ProfileParams,
    QueryProfile,
    heuristic_complexity,
    heuristic_intent,
)
from ragkit.stages.query.strategy import StrategyJudge, StrategyParams, heuristic_choice, profiled_choice
from tests.doubles import SwitchableStub
from tests.factories import scripted_llm_class

ScriptedLLM = scripted_llm_class()

ACADEMIC = CorpusProfile("c", "heuristic", None, (
    DocumentProfile("a", "academic", 0.5, ("genome", "bcov")), DocumentProfile("b", "academic", 0.3, ("genome",)),
))
PROSE = CorpusProfile("p", "heuristic", None, (DocumentProfile("a", "general", 0.1, ("cats",)),))


@pytest.mark.unit
@pytest.mark.parametrize(("query", "intent", "complexity"), [
    ("What is the incubation period of MERS?", "factual", "simple"),  # 3 content words, no joint
    ("BCoV genome", "factual", "simple"),
    ("How long does it take?", "factual", "simple"),  # "how long" is no procedure
    ("Who sequenced the French bovine coronavirus strain in Normandy in 2014 and how?", "factual", "moderate"),
    ("what genome, host and year were reported for the strain and where was it sampled", "factual", "complex"),
    ("Compare MERS and SARS", "comparison", "complex"),  # a comparison is complex
    ("What is the difference between BCoV and OC43", "comparison", "complex"),
    ("How do I install the client?", "procedural", "simple"),
    ("Which steps are needed to sequence a genome", "procedural", "moderate"),  # 4 content words
    ("Explain how coronaviruses spread", "exploratory", "simple"),
    ("Tell me about BCoV", "exploratory", "simple"),
    ("Why do cats purr", "exploratory", "simple"),
])
def test_intent_and_complexity_rules(query, intent, complexity):
    assert heuristic_intent(query) == intent
    assert heuristic_complexity(query, intent) == complexity


@pytest.mark.unit
def test_complexity_thresholds_are_params():
    # 4 content words: moderate by default, simple at simple_words=4, complex at complex_words=4.
    query = "bovine coronavirus genome sequence"
    assert [heuristic_complexity(query, "factual", s, c) for s, c in ((3, 8), (4, 8), (2, 4))] == \
        ["moderate", "simple", "complex"]
    with pytest.raises(ConfigError, match=r"simple_words \(8\) must be below complex_words \(8\)"):
        STAGES.validate_params("profile", {"simple_words": 8, "complex_words": 8})


@pytest.mark.unit
def test_heuristic_profile_reads_the_documents_and_records_everything():
    judge = ProfileJudge(ProfileParams(mode="heuristic"), document_profiles=ACADEMIC)
    trace = JudgementLog()
    profile = judge.profile("Compare MERS and SARS", trace)
    assert profile == QueryProfile("comparison", "complex", CorpusSide("academic", 0.4, True, ("genome", "bcov")))
    (judgement,) = trace.judgements
    assert judgement.judge == "profile" and judgement.valid
    assert judgement.decision == {
        "intent": "comparison", "complexity": "complex", "dominant_type": "academic", "technical_density": 0.4,
        "technical": True, "domain_tags": ["genome", "bcov"], "documents": 2, "document_types": {"academic": 2},
        "document_method": "heuristic", "invalid_documents": 0}


@pytest.mark.unit
@pytest.mark.parametrize(("profiles", "threshold", "technical"), [
    (ACADEMIC, 0.3, True), (ACADEMIC, 0.41, False), (PROSE, 0.3, False),
    (CorpusProfile("k", "heuristic", None, (DocumentProfile("a", "code", 0.1, ()),)), 0.3, True),  # code is
    (None, 0.0, False),  # no documents: nothing is known
])
def test_a_corpus_is_technical_at_the_threshold_or_when_it_is_code(profiles, threshold, technical):
    judge = ProfileJudge(ProfileParams(mode="heuristic", technical_density=threshold), document_profiles=profiles)
    assert judge.corpus_side().technical is technical


@pytest.mark.unit
def test_off_profiles_nothing_and_records_nothing():
    trace = JudgementLog()
    assert ProfileJudge(ProfileParams(mode="off"), document_profiles=ACADEMIC).profile("q", trace) is None
    assert trace.judgements == []


@pytest.mark.unit
@pytest.mark.parametrize(("reply", "expected", "valid"), [
    (json.dumps({"intent": "procedural", "complexity": "moderate", "reason": "how-to"}),
     ("procedural", "moderate"), True),
    (json.dumps({"intent": "opinion", "complexity": "simple"}), None, False),  # not an intent
    (json.dumps({"intent": "factual"}), None, False),  # no complexity
    ("factual, simple", None, False),
    (LLMError("timed out"), None, False),
])
def test_llm_replies(tmp_path, reply, expected, valid):
    backend = ScriptedLLM([reply])
    judge = ProfileJudge(ProfileParams(mode="llm"), LLMClient(backend, tmp_path), document_profiles=ACADEMIC)
    trace = JudgementLog()
    profile = judge.profile("How is the genome sequenced?", trace)
    assert (None if profile is None else (profile.intent, profile.complexity)) == expected
    (judgement,) = trace.judgements
    assert judgement.valid is valid and judgement.fell_back is (not valid)
    assert judgement.decision["documents"] == 2  # the documents are recorded either way
    if valid:
        assert judgement.decision["intent"] == "procedural" and judgement.decision["technical"] is True
    prompt = backend.requests[0][-1]["content"]
    assert "Documents: mostly academic, technical density 0.40 (high); topics: genome, bcov." in prompt
    assert prompt.endswith("Query: How is the genome sequenced?\nReply as JSON with intent, complexity and reason.")


def query_profile(intent: str, complexity: str, technical: bool) -> QueryProfile:
    return QueryProfile(intent, complexity, CorpusSide("academic", 0.5 if technical else 0.1, technical, ()))  # type: ignore[arg-type]


@pytest.mark.unit
@pytest.mark.parametrize(("query", "intent", "complexity", "technical", "strategy", "confidence"), [
    ("IL-6 levels in severe patients", "exploratory", "simple", False, "bm25", 0.9),  # an identifier comes first
    ('"spike protein" binding', "comparison", "complex", True, "bm25", 0.9),  # so does a quoted phrase
    ("explain how the bovine coronavirus spreads between calves in winter", "exploratory", "moderate", True,
     "dense", 0.7),
    ("coronavirus genome", "factual", "simple", True, "bm25", 0.7),  # short, technical documents
    ("where was the calf sampled", "factual", "moderate", True, "hybrid", 0.6),
    ("which is more severe in calves: winter dysentery or shipping fever", "comparison", "complex", False,
     "hybrid", 0.6),
    ("what is the incubation period of the new coronavirus in adults", "factual", "complex", False, "hybrid", 0.6),
    ("what is the incubation period of the new coronavirus in adults", "factual", "moderate", False, "dense", 0.7),
    ("coronavirus symptoms", "factual", "simple", False, "bm25", 0.7),  # the rules without a profile
])
def test_the_strategy_chosen_from_a_profile(query, intent, complexity, technical, strategy, confidence):
    assert profiled_choice(query, query_profile(intent, complexity, technical))[:2] == (strategy, confidence)


@pytest.mark.unit
def test_the_strategy_judge_records_the_profile_it_read_and_nothing_without_one():
    judge = StrategyJudge(StrategyParams(mode="heuristic"))
    query = "explain how the bovine coronavirus spreads between calves in winter"
    with_profile, without = JudgementLog(), JudgementLog()
    profile = query_profile("exploratory", "moderate", True)
    assert judge.choose(query, with_profile, profile=profile) == "dense"
    assert judge.choose(query, without) == heuristic_choice(query)[0] == "dense"
    assert with_profile.judgements[0].decision["profile"] == profile.record()
    assert "profile" not in without.judgements[0].decision
    technical = query_profile("factual", "moderate", True)
    assert judge.choose("where was the calf sampled", JudgementLog(), profile=technical) == "hybrid"


@pytest.mark.unit
def test_the_llm_strategy_prompt_carries_the_profile_only_when_given_one(tmp_path):
    backend = ScriptedLLM([json.dumps({"strategy": "bm25", "confidence": 0.8})])
    judge = StrategyJudge(StrategyParams(mode="llm"), LLMClient(backend, None))
    profile = query_profile("factual", "simple", True)
    trace = JudgementLog()
    judge.choose("BCoV genome", trace, profile=profile)
    judge.choose("BCoV genome", trace)
    with_profile, without = (request[-1]["content"] for request in backend.requests)
    assert f"{profile.describe()}\nAllowed: dense, bm25, hybrid\nQuery: BCoV genome" in with_profile
    assert without == with_profile.replace(f"{profile.describe()}\n", "")  # as before the profile judge
    assert trace.judgements[0].decision["profile"]["intent"] == "factual"
    assert "profile" not in trace.judgements[1].decision


@pytest.mark.unit
@pytest.mark.parametrize(("with_profile", "strategy"), [(True, "dense"), (False, "hybrid")])
def test_the_pipeline_profiles_the_query_before_the_strategy_judge_reads_it(with_profile, strategy):
    # 6 words, no identifier: hybrid by the plain rules; exploratory with a profile: dense.
    query = "explain how coronaviruses spread among cattle"
    switchable = SwitchableStub()
    stages = [StrategyJudge(StrategyParams(mode="heuristic"))]
    if with_profile:
        stages.append(ProfileJudge(ProfileParams(mode="heuristic"), document_profiles=PROSE))
    trace = Pipeline(switchable, switchable, stages=tuple(stages), switchable=switchable).answer(query)
    assert switchable.used == [strategy]
    assert [row["stage"] for row in trace.stages] == \
        (["judge:profile"] if with_profile else []) + ["judge:strategy", "retrieve"]
    assert [judgement.judge for judgement in trace.judgements] == \
        (["profile"] if with_profile else []) + ["strategy"]


@pytest.mark.unit
def test_a_strategy_stage_that_narrows_its_inputs_to_the_query_is_not_given_the_profile():
    """A stage reads what its role reads (the strategy role: query and profile) unless it declares
    ``inputs`` to narrow that; one without ``profile`` is called without it."""

    class QueryOnly(StrategyJudge):
        inputs: ClassVar[tuple[str, ...]] = ("query",)
        seen: ClassVar[list[str]] = []

        def choose(self, query: str, trace: JudgementLog) -> str | None:
            QueryOnly.seen.append(query)
            return "bm25"

    switchable = SwitchableStub()
    stages = (QueryOnly(StrategyParams(mode="heuristic")),
              ProfileJudge(ProfileParams(mode="heuristic"), document_profiles=PROSE))
    Pipeline(switchable, switchable, stages=stages, switchable=switchable).answer("how do cattle catch it")
    assert QueryOnly.seen == ["how do cattle catch it"] and switchable.used == ["bm25"]


@pytest.mark.integration
def test_real_local_model_profiles_documents_and_the_query_or_records_why_not(tmp_path, local_backend):
    from ragkit.corpus.model import Corpus, make_document
    from ragkit.corpus.profile import corpus_profile
    from tests.factories import TINY_DOCS

    client = LLMClient(local_backend, cache_dir=tmp_path / "llm")
    corpus = Corpus.from_documents("tiny", [make_document(k, v, {"title": k}) for k, v in TINY_DOCS.items()])
    documents = corpus_profile(corpus, tmp_path / "profiles", "llm", client)
    assert [item.doc_id for item in documents.documents] == ["d1", "d2", "d3"]
    for item in documents.documents:  # the model's profile, or the rule's with the reason
        assert 0.0 <= item.technical_density <= 1.0 and (item.valid or item.error)
    trace = JudgementLog()
    profile = ProfileJudge(ProfileParams(mode="llm"), client, document_profiles=documents).profile(
        "How do cats and dogs differ?", trace)
    (judgement,) = trace.judgements
    assert judgement.raw_reply is not None and judgement.decision["documents"] == 3
    if judgement.valid:
        assert profile is not None and judgement.decision["intent"] == profile.intent
    else:
        assert profile is None and judgement.fell_back
