"""The pipeline: judges in order, each step timed with its LLM usage, fallbacks recorded (scripted LLM)."""

from __future__ import annotations

import json

import pytest
from llama_index.core.schema import NodeWithScore

from ragkit.llms import LLMClient
from ragkit.llms.calls import StageUsage
from ragkit.pipeline.pipeline import Pipeline, stage_row
from ragkit.stages.answer.generator import Generator, GeneratorParams
from ragkit.stages.answer.groundedness import GroundednessJudge, GroundednessParams
from ragkit.stages.context.rerank import RerankJudge, RerankJudgeParams
from ragkit.stages.retrieval.retrieval_judge import RetrievalJudge, RetrievalJudgeParams
from tests.doubles import ListRetriever
from tests.factories import scripted_llm_class

pytestmark = pytest.mark.unit

ScriptedLLM = scripted_llm_class()
TEXTS = {
    "dogs": "Dogs bark at strangers.",
    "cats": "Cats purr when they are content.",
    "market": "The stock market fell.",
}


def ids(nodes: list[NodeWithScore]) -> list[str]:
    return [node.node.node_id for node in nodes]


def test_without_judges_the_pipeline_is_plain_retrieval():
    retriever = ListRetriever(default=list(TEXTS), texts=TEXTS, doc_ids=True)
    trace = Pipeline(retriever, retriever).answer("why do cats purr")
    assert ids(trace.nodes) == ["dogs", "cats", "market"]
    assert [row["stage"] for row in trace.stages] == ["retrieve"]
    assert trace.stages[0]["llm_calls"] == 0 and trace.stages[0]["cached"] is False
    assert trace.answer is None and trace.judgements == []


def test_judges_run_in_order_and_each_stage_carries_its_llm_usage(tmp_path):
    backend = ScriptedLLM([
        json.dumps({"refined_query": "", "relevant": [2, 1], "order": [2, 1], "request_more": False}),  # retrieval
        json.dumps({"scores": [90, 10]}),  # rerank of the two kept chunks
        json.dumps({"answer": "They are content [1].", "citations": [1]}),  # generator
        json.dumps({"supported": True, "evidence": "Cats purr when they are content"}),  # groundedness claim
    ])
    llm = LLMClient(backend, tmp_path)
    retriever = ListRetriever(default=list(TEXTS), texts=TEXTS, doc_ids=True)
    pipeline = Pipeline(
        retriever, retriever,
        stages=(RetrievalJudge(RetrievalJudgeParams(), llm), RerankJudge(RerankJudgeParams(top_n=1), llm),
                Generator(GeneratorParams(), llm), GroundednessJudge(GroundednessParams(claim_split="heuristic"), llm)),
        clients=(llm,),
    )
    trace = pipeline.answer("why do cats purr")

    assert ids(trace.nodes) == ["cats"]  # judge kept [cats, dogs], rerank kept the best one
    assert trace.answer.text == "They are content [1]." and trace.answer.citations == ["cats"]
    assert trace.groundedness == 1.0
    assert [j.judge for j in trace.judgements] == ["retrieval", "rerank", "generator", "groundedness"]
    stages = {row["stage"]: row for row in trace.stages}
    assert list(stages) == ["retrieve", "judge:retrieval", "judge:rerank", "generate", "judge:groundedness"]
    assert [stages[s]["llm_calls"] for s in stages] == [0, 1, 1, 1, 1]
    assert stages["generate"]["prompt_tokens"] == 1 and stages["generate"]["backend_calls"] == 1


def test_a_garbage_reply_falls_back_to_the_judge_off_output_and_is_recorded_invalid(tmp_path):
    llm = LLMClient(ScriptedLLM(["not json at all"]), tmp_path)
    retriever = ListRetriever(default=list(TEXTS), texts=TEXTS, doc_ids=True)
    pipeline = Pipeline(retriever, retriever, stages=(RetrievalJudge(RetrievalJudgeParams(), llm),), clients=(llm,))
    trace = pipeline.answer("why do cats purr")
    assert ids(trace.nodes) == ["dogs", "cats", "market"]  # exactly the unjudged retrieval
    (judgement,) = trace.judgements
    assert judgement.valid is False and judgement.fell_back is True and judgement.raw_reply == "not json at all"
    assert trace.stages[1]["invalid_replies"] == 1


def test_usage_left_from_an_earlier_question_is_not_charged_to_the_next(tmp_path):
    llm = LLMClient(ScriptedLLM(['{"answer": "x", "citations": []}']), tmp_path)
    llm.call("unrelated", stage="elsewhere")
    retriever = ListRetriever(default=list(TEXTS), texts=TEXTS, doc_ids=True)
    trace = Pipeline(retriever, retriever, stages=(Generator(GeneratorParams(), llm),), clients=(llm,)).answer("q")
    assert sum(row["llm_calls"] for row in trace.stages) == 1


def test_an_empty_answer_is_not_checked_for_groundedness_and_says_why(tmp_path):
    llm = LLMClient(ScriptedLLM(['{"answer": "", "citations": []}']), tmp_path)
    retriever = ListRetriever(default=list(TEXTS), texts=TEXTS, doc_ids=True)
    pipeline = Pipeline(retriever, retriever,
                        stages=(Generator(GeneratorParams(), llm), GroundednessJudge(GroundednessParams(), llm)),
                        clients=(llm,))
    trace = pipeline.answer("q")
    assert trace.groundedness is None and "empty answer" in trace.groundedness_error
    assert [j.judge for j in trace.judgements] == ["generator"]


@pytest.mark.parametrize(("wall", "usage", "seconds"), [
    (0.3, [], 0.3),  # no LLM call: the step's own time
    (5.2, [StageUsage("generate", 1, 1, 0, 5.1, 5.0, 10, 5, False, replayed_seconds=0.0)], 5.2),
    # the same reply from the cache: 0.2 s now, plus the 4.9 s it took to generate beyond reading it
    (0.2, [StageUsage("generate", 1, 0, 0, 0.1, 5.0, 10, 5, True, replayed_seconds=4.9)], 5.1),
])
def test_a_cached_reply_costs_the_stage_what_it_took_to_generate(wall, usage, seconds):
    row = stage_row("generate", wall, usage)
    assert row["seconds"] == pytest.approx(seconds)
    assert row["backend_calls"] == sum(item.backend_calls for item in usage)
