"""Run depth (the most chunks a final context can hold) and the cut-offs each run scores."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.schema import Document

from ragkit.corpus.model import Corpus
from ragkit.experiments.config import config_from_dict, expand_grid
from ragkit.experiments.plan import final_depth, make_plan, run_row
from ragkit.questions import Question, QuestionSet

pytestmark = pytest.mark.unit

CORPUS = Corpus.from_documents("tiny", [Document(id_="d1", text="cats purr"), Document(id_="d2", text="dogs bark")])
QUESTIONS = QuestionSet(name="tiny", format="jsonl",
                        questions=[Question(id="q1", text="what purrs", relevant_docs={"d1": 1.0})])
LLM = {"default": {"type": "ollama", "params": {"model": "m"}}}


def config(top_k: int | list[int] = 10, **judges: Any):
    return config_from_dict({"name": "depth", "dataset": {"path": "unused"}, "embedders": [], "retrievers": ["bm25"],
                             "chunkers": ["document"], "top_k": top_k, "judges": judges, "llm": LLM})


def depth(top_k: int = 10, **judges: Any) -> int:
    (point,) = expand_grid(config(top_k, **judges))
    return final_depth(point)


def judge(mode: str = "llm", **params: Any) -> dict:
    return {"mode": mode, "params": params}


@pytest.mark.parametrize(
    ("top_k", "judges", "expected"),
    [
        (10, {}, 10),
        (10, {"rerank": judge("heuristic", top_n=5)}, 5),
        (10, {"rerank": judge("llm", top_n=20)}, 10),  # keeps at most what it is given
        (10, {"rerank": judge("off", top_n=5)}, 10),  # off is the judge-free run
        # Retrieval Judge: at most max_chunks, from a pool that grows by top_k per extra round
        (10, {"retrieval": judge(max_chunks=4, max_iterations=1)}, 4),
        (3, {"retrieval": judge(max_chunks=8, max_iterations=1)}, 3),
        (3, {"retrieval": judge(max_chunks=8, max_iterations=2)}, 6),
        (3, {"retrieval": judge(max_chunks=50, max_iterations=3)}, 9),
        (3, {"retrieval": judge(max_chunks=2, max_iterations=3, keep_unjudged=True)}, 9),  # keeps the whole pool
        (10, {"retrieval": judge(max_chunks=8), "rerank": judge("heuristic", top_n=5)}, 5),
        (10, {"retrieval": judge(max_chunks=4, max_iterations=1), "rerank": judge("heuristic", top_n=5)}, 4),
        # query transforms: fusion of several rankings, cut at the transform's own top_k
        (5, {"multi_query": judge(num_queries=3, top_k=10)}, 10),
        (2, {"multi_query": judge(num_queries=3, top_k=10)}, 8),  # 3 rewrites + the question, 2 each
        (2, {"multi_query": judge(num_queries=3, include_original=False, top_k=10)}, 6),
        (10, {"hyde": judge(combine="concatenate", top_k=4)}, 4),
        (3, {"hyde": judge(combine="rrf", top_k=10)}, 6),
        (3, {"hyde": judge(combine="rrf", top_k=10), "multi_query": judge(num_queries=1, top_k=100)}, 12),
        # the quality gate returns one attempt, a full retrieval: unchanged
        (10, {"quality_gate": judge("heuristic")}, 10),
        (10, {"quality_gate": judge("heuristic"), "rerank": judge("heuristic", top_n=3)}, 3),
    ],
)
def test_final_depth(top_k, judges, expected) -> None:
    assert depth(top_k, **judges) == expected


def test_every_run_scores_the_common_depth_with_every_other_run() -> None:
    plan = make_plan(config([5, 10], rerank={"mode": ["off", "heuristic"], "params": {"top_n": 5}}), CORPUS, QUESTIONS)
    depths = {(run.point.top_k, run.point.judge("rerank") is not None): run.depth for run in plan.runs}
    assert depths == {(5, False): 5, (5, True): 5, (10, False): 10, (10, True): 5}
    for run in plan.runs:
        for other in plan.runs:
            assert min(run.depth, other.depth) in run.ks
        assert run_row(plan, run)["depth"] == run.depth


def test_run_ids_do_not_depend_on_the_scored_cut_offs() -> None:
    alone = make_plan(config(10), CORPUS, QUESTIONS)
    with_rerank = make_plan(config(10, rerank={"mode": ["off", "heuristic"], "params": {"top_n": 4}}),
                            CORPUS, QUESTIONS)
    (plain,) = alone.runs
    same = next(run for run in with_rerank.runs if run.run_id == plain.run_id)
    assert plain.ks == [1, 3, 5, 10] and same.ks == [1, 3, 4, 5, 10]


def test_a_judge_declares_its_depth_on_its_class() -> None:
    from ragkit.stages.base import STAGES

    assert STAGES.get("rerank").final_depth(STAGES.validate_params("rerank", {"top_n": 3}), 10, 10) == 3
    assert STAGES.get("rerank").final_depth(STAGES.validate_params("rerank", {"mode": "off", "top_n": 3}), 10, 10) == 10
    assert STAGES.get("generator").final_depth(STAGES.validate_params("generator", {}), 7, 10) == 7
