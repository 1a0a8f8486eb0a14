"""The router deciding against the question's own document (``summary_scope: document``, the
dynamic-documents design's): per-document summaries written once per (corpus, method, model);
the heuristic and the LLM router read the named document's summary, not the collection's, and
record what they read; a question naming no document is routed on the corpus summary, recorded;
off (``corpus``) is byte-identical and out of the ids. One real-model run for the mechanics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from ragkit.corpus.document_summary import (
    DOCUMENT_WORDS,
    document_summaries,
    document_summary_path,
    heuristic_summaries,
)
from ragkit.corpus.model import Corpus, make_document
from ragkit.corpus.profile import domain_tags
from ragkit.errors import LLMError
from ragkit.llms import LLMClient
from ragkit.pipeline.pipeline import Pipeline
from ragkit.stages.base import STAGES, JudgementLog
from ragkit.stages.query.router.stage import RouterJudge, RouterParams
from tests.factories import TINY_DOCS, scripted_llm_class

ScriptedLLM = scripted_llm_class()

# The corpus summary covers all three documents; each document's covers itself.
CORPUS_SUMMARY = "3 documents: cats purr and eat fish; dogs bark in the park; the sun is a star."
PER_DOCUMENT = {"d1": "Cats purr and eat fish.", "d2": "Dogs bark and walk in the park.",
                "d3": "The sun is a star of the solar system."}


def tiny_corpus() -> Corpus:
    return Corpus.from_documents("tiny", [make_document(doc_id, text, {"title": f"About {doc_id}"})
                                          for doc_id, text in TINY_DOCS.items()])


def reply(text: str) -> str:
    return json.dumps({"summary": text})


def router(mode: str = "heuristic", llm: Any = None, **params: Any) -> RouterJudge:
    return RouterJudge(RouterParams(mode=mode, summary_scope="document", **params), llm,
                       summary=CORPUS_SUMMARY, document_summaries=PER_DOCUMENT)


@pytest.mark.unit
def test_heuristic_summaries_are_the_title_and_the_documents_own_words():
    documents = list(tiny_corpus().documents)
    summaries = heuristic_summaries(documents)
    words = domain_tags([document.text for document in documents], DOCUMENT_WORDS)
    assert [summary.doc_id for summary in summaries] == ["d1", "d2", "d3"]
    assert summaries[0].text == f"'About d1'. Frequent distinctive words: {', '.join(words[0])}"
    assert "purr" in summaries[0].text and "bark" not in summaries[0].text and "star" not in summaries[0].text


@pytest.mark.unit
def test_llm_summaries_are_one_call_per_document_written_once(tmp_path):
    backend = ScriptedLLM([reply("About cats."), reply("About dogs."), "no json"])
    client = LLMClient(backend, None)
    summaries = document_summaries(tiny_corpus(), tmp_path, "llm", client)
    assert [summaries[d].text for d in ("d1", "d2")] == ["About cats.", "About dogs."]
    assert summaries["d3"].fell_back and summaries["d3"].error  # the unusable reply: the rule's summary
    assert summaries["d3"].text == heuristic_summaries(list(tiny_corpus().documents))[2].text
    assert len(backend.requests) == 3
    assert "About d2" in backend.requests[1][-1]["content"] and "Dogs bark" in backend.requests[1][-1]["content"]
    assert document_summary_path(tmp_path, tiny_corpus().corpus_id, "llm", "scripted:scripted").exists()
    again = document_summaries(tiny_corpus(), tmp_path, "llm", LLMClient(ScriptedLLM([LLMError("down")]), None))
    assert again == summaries  # read back: no call


@pytest.mark.unit
def test_a_failed_call_is_not_written(tmp_path):
    client = LLMClient(ScriptedLLM([reply("About cats."), LLMError("server gone")]), None)
    summaries = document_summaries(tiny_corpus(), tmp_path, "llm", client)
    assert summaries["d2"].fell_back and "server gone" in (summaries["d2"].error or "")
    assert not list(tmp_path.iterdir())  # the next run asks again
    with pytest.raises(ValueError, match="needs an LLM client"):
        document_summaries(tiny_corpus(), tmp_path, "llm", None)


@pytest.mark.unit
def test_heuristic_router_reads_the_named_documents_summary():
    question = "Why do dogs bark?"
    # Against the corpus summary "dogs" and "bark" are covered: documents, yes.
    corpus_trace = JudgementLog()
    assert RouterJudge(RouterParams(mode="heuristic"), summary=CORPUS_SUMMARY).route(
        question, [], corpus_trace).relevance == "yes"
    # Against the loaded cats document they are not: the design's relevance is per document.
    trace = JudgementLog()
    decision = router().route(question, [], trace, documents=["d1"])
    assert (decision.route, decision.relevance) == ("web", "no")
    (judgement,) = trace.judgements
    assert judgement.decision["summary_of"] == ["d1"] and judgement.decision["unmatched"] == ["dog", "bark"]
    assert "the document's vocabulary" in judgement.decision["reason"]
    on_dogs = JudgementLog()
    assert router().route(question, [], on_dogs, documents=["d2"]).relevance == "yes"
    assert on_dogs.judgements[0].decision["summary_of"] == ["d2"]


@pytest.mark.unit
@pytest.mark.parametrize(("documents", "why"), [
    (None, "the question names no document"), (["d9"], "no summary of d9")])
def test_without_a_summary_of_its_document_the_corpus_summary_decides_recorded(documents, why):
    trace = JudgementLog()
    decision = router(decisions="two").route("Why do dogs bark?", [], trace, documents=documents)
    assert decision.relevance == "yes"  # the corpus summary covers dogs
    (judgement,) = trace.judgements
    assert judgement.decision["summary_of"] == "corpus" and judgement.decision["summary_reason"] == why


@pytest.mark.unit
def test_llm_router_is_shown_the_named_documents_summary_in_both_decisions(tmp_path):
    backend = ScriptedLLM([json.dumps({"relevance": "no", "confidence": 0.8, "reason": "not about it"}),
                           json.dumps({"route": "web", "confidence": 0.7, "reason": "needs the web"})])
    judge = router("llm", LLMClient(backend, tmp_path), decisions="two")
    trace = JudgementLog()
    assert judge.route("Why do dogs bark?", [], trace, documents=["d1", "d3"]).route == "web"
    relevance_prompt = backend.requests[0][-1]["content"]
    assert f"Documents: {PER_DOCUMENT['d1']}\n{PER_DOCUMENT['d3']}" in relevance_prompt
    assert CORPUS_SUMMARY not in relevance_prompt
    assert [j.decision["summary_of"] for j in trace.judgements] == [["d1", "d3"], ["d1", "d3"]]


@pytest.mark.unit
def test_corpus_scope_is_the_default_unchanged_and_out_of_the_key(tmp_path):
    assert RouterParams().summary_scope == "corpus"
    assert "summary_scope" not in RouterParams().key_dump()
    with pytest.raises(ValidationError, match="summary_scope"):
        RouterParams(summary_scope="chapter")
    backend = ScriptedLLM([json.dumps({"route": "documents", "relevance": "yes", "reason": "r"})] * 2)
    plain = RouterJudge(RouterParams(mode="llm"), LLMClient(backend, None), summary=CORPUS_SUMMARY)
    first, second = JudgementLog(), JudgementLog()
    plain.route("Why do dogs bark?", [], first)
    plain.route("Why do dogs bark?", [], second, documents=["d1"])  # ignored with summary_scope corpus
    assert backend.requests[0] == backend.requests[1]
    assert first.judgements[0].decision == second.judgements[0].decision
    assert "summary_of" not in first.judgements[0].decision


@pytest.mark.unit
def test_built_by_name_and_given_the_named_documents_by_the_pipeline():
    judge = STAGES.build({"type": "router", "params": {"mode": "heuristic", "summary_scope": "document"}},
                         llm=None, summary=CORPUS_SUMMARY, document_summaries=PER_DOCUMENT)

    class NoSearch:
        def retrieve(self, query):
            return []

    pipeline = Pipeline(NoSearch(), NoSearch(), stages=(judge,))  # type: ignore[arg-type]
    trace = pipeline.answer("Why do dogs bark?", documents=["d1"])
    (routed,) = [j for j in trace.judgements if j.judge == "router"]
    assert routed.decision["summary_of"] == ["d1"] and trace.route == "web"


@pytest.mark.slow  # about 90 s on a shared 2-core machine: three summaries and two decisions
def test_real_local_model_summarises_each_document_and_routes_on_it(tmp_path, local_backend):
    client = LLMClient(local_backend, cache_dir=tmp_path / "llm")
    summaries = document_summaries(tiny_corpus(), tmp_path / "summaries", "llm", client)
    assert set(summaries) == {"d1", "d2", "d3"} and all(summary.text for summary in summaries.values())
    for summary in summaries.values():  # the model's words, or the rule's with the reason
        assert summary.fell_back == bool(summary.error)
    judge = RouterJudge(RouterParams(mode="llm", decisions="two", summary_scope="document", max_tokens=64),
                        client, summary=CORPUS_SUMMARY, document_summaries=summaries)
    trace = JudgementLog()
    decision = judge.route("Why do cats purr?", [], trace, documents=["d1"])
    assert decision.route in ("documents", "conversational", "web")
    assert trace.judgements and all(j.decision.get("summary_of") == ["d1"] for j in trace.judgements)
