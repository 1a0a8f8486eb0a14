"""The late tier through the pipeline with scripted parts: the answer check as a second gate that
retries a failed answer (regenerate from the same chunks, or re-retrieve and answer from new
ones), each step a stage row and the decisions in the answer check's judgements; a kept retry
is checked for groundedness again."""

from __future__ import annotations

import json

import pytest
from llama_index.core.schema import NodeWithScore, TextNode

from ragkit.pipeline.pipeline import Pipeline
from ragkit.stages.answer.answer_check import AnswerCheckJudge, AnswerCheckParams
from ragkit.stages.answer.groundedness import GroundednessJudge, GroundednessParams
from tests.doubles import NamedRetriever, SwitchableStub
from tests.pipeline.test_loops import FixedRouter, client, generator, stages, verdict

pytestmark = pytest.mark.unit


class EchoRetriever(NamedRetriever):
    """One chunk whose text carries the query, so a new search shows the generator new sources."""

    def _retrieve(self, query_bundle):
        self.queries.append(query_bundle.query_str)
        query = query_bundle.query_str
        return [NodeWithScore(node=TextNode(id_=f"docs:{query}", text=f"about {query}"), score=0.9)]


def grade(relevance: int, completeness: int, accuracy: int, reason: str = "") -> str:
    return json.dumps({"relevance": relevance, "completeness": completeness, "accuracy": accuracy, "reason": reason})


def checks(trace):
    return [j.decision for j in trace.judgements if j.judge == "answer_check"]


def test_an_off_topic_answer_is_regenerated_and_the_retry_passes_at_50(tmp_path):
    llm, backend = client(["Dogs bark at night.", grade(30, 90, 90),
                           "Cats purr when content [1].", grade(55, 90, 90)], tmp_path)
    retriever = NamedRetriever()
    checker = AnswerCheckJudge(AnswerCheckParams(retry=True), llm)
    trace = Pipeline(retriever, retriever, stages=(generator(llm), checker), clients=(llm,)).answer("why do cats purr")
    assert stages(trace) == ["retrieve", "generate", "judge:answer_check", "retry:regenerate", "judge:answer_check"]
    assert "- Dogs bark at night." in backend.requests[2][-1]["content"]  # the regenerated prompt
    first, retry = checks(trace)
    assert (first["threshold"], first["gate_score"], first["issue"], first["action"]) == (65, 30, "off_topic",
                                                                                          "regenerate")
    assert (retry["threshold"], retry["gate_score"], retry["passed"], retry["kept"]) == (50, 55, True, 1)
    assert trace.answer.text == "Cats purr when content [1]." and trace.answer_check["relevance"] == 0.55
    assert retriever.queries == ["why do cats purr"]


def test_an_incomplete_answer_re_retrieves_and_the_kept_retry_is_checked_for_groundedness_again(tmp_path):
    llm, _ = client(["Cats purr when content.", verdict(True), grade(90, 40, 90, "misses hunting"),
                     "Cats purr when hunting too.", grade(90, 80, 90), verdict(False)], tmp_path)
    retriever = EchoRetriever()
    grounded = GroundednessJudge(GroundednessParams(), llm)
    checker = AnswerCheckJudge(AnswerCheckParams(retry=True), llm)
    trace = Pipeline(retriever, retriever, stages=(generator(llm), grounded, checker), clients=(llm,)).answer(
        "why do cats purr")
    assert stages(trace) == ["retrieve", "generate", "judge:groundedness", "judge:answer_check", "retry:re_retrieve",
                             "retry:regenerate", "judge:answer_check", "judge:groundedness"]
    assert retriever.queries == ["why do cats purr", "why do cats purr misses hunting"]
    assert trace.nodes[0].node.node_id == "docs:why do cats purr misses hunting"
    first, retry = checks(trace)
    assert (first["issue"], first["action"], first["retry_query"]) == ("incomplete", "re_retrieve",
                                                                       "why do cats purr misses hunting")
    assert retry["passed"] and retry["kept"] == 1 and retry["stopped"] == "passed"
    # The groundedness score is the final answer's (0.0), not the first answer's (1.0).
    assert trace.answer.text == "Cats purr when hunting too." and trace.groundedness == 0.0


def test_retry_off_only_scores(tmp_path):
    llm, _ = client(["Dogs bark at night.", grade(30, 90, 90)], tmp_path)
    retriever = NamedRetriever()
    trace = Pipeline(retriever, retriever, stages=(generator(llm), AnswerCheckJudge(AnswerCheckParams(), llm)),
                     clients=(llm,)).answer("why do cats purr")
    assert stages(trace) == ["retrieve", "generate", "judge:answer_check"]
    assert "action" not in checks(trace)[0] and trace.answer.text == "Dogs bark at night."


def test_a_conversational_answer_is_graded_not_retried(tmp_path):
    llm, _ = client(["Hello there!", grade(10, 10, 10)], tmp_path)
    retriever = NamedRetriever()
    trace = Pipeline(retriever, retriever, stages=(FixedRouter("conversational"), generator(llm),
                                                   AnswerCheckJudge(AnswerCheckParams(retry=True), llm)),
                     clients=(llm,)).answer("hi")
    assert stages(trace) == ["judge:router", "generate", "judge:answer_check"] and retriever.queries == []


def test_a_re_retrieval_with_retry_strategy_next_switches_the_strategy(tmp_path):
    llm, _ = client(["Cats purr.", grade(90, 40, 90, "misses hunting"), "Cats purr when hunting.",
                     grade(90, 90, 90)], tmp_path)
    switchable = SwitchableStub()
    checker = AnswerCheckJudge(AnswerCheckParams(retry=True, retry_strategy="next"), llm)
    trace = Pipeline(switchable, switchable, stages=(generator(llm), checker), switchable=switchable,
                     clients=(llm,)).answer("why do cats purr")
    assert switchable.parts["bm25"].queries == ["why do cats purr misses hunting"]
    assert (checks(trace)[0]["strategy_before"], checks(trace)[0]["strategy"]) == ("dense", "bm25")


def test_a_groundedness_re_retrieval_with_the_next_strategy_switches_it(tmp_path):
    llm, _ = client(["Glass cats shatter loudly.", verdict(False), "Cats purr when content.", verdict(True)],
                    tmp_path)
    switchable = SwitchableStub()
    grounded = GroundednessJudge(GroundednessParams(on_fail="re_retrieve", re_retrieve_strategy="next"), llm)
    trace = Pipeline(switchable, switchable, stages=(generator(llm), grounded), switchable=switchable,
                     clients=(llm,)).answer("why do cats purr")
    assert switchable.parts["bm25"].queries == ["why do cats purr glass shatter loudly"]
    (correction,) = [j.decision for j in trace.judgements if j.judge == "correction"]
    assert (correction["tier"], correction["strategy"]) == ("re_retrieve", "bm25") and trace.groundedness == 1.0


def test_a_re_retrieval_that_finds_the_same_chunks_regenerates_with_the_answer_listed(tmp_path):
    llm, backend = client(["Cats purr.", grade(90, 40, 90, "misses hunting"), "Cats purr when hunting.",
                           grade(90, 90, 90)], tmp_path)
    retriever = NamedRetriever()  # the same text for every query
    checker = AnswerCheckJudge(AnswerCheckParams(retry=True), llm)
    trace = Pipeline(retriever, retriever, stages=(generator(llm), checker), clients=(llm,)).answer("why do cats purr")
    first = checks(trace)[0]
    assert first["action"] == "re_retrieve" and first["feedback"] == ["Cats purr."]
    assert first["action_note"] == "the search found the same chunks: regenerated instead"
    assert "- Cats purr." in backend.requests[2][-1]["content"] and trace.answer.text == "Cats purr when hunting."
