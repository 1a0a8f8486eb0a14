"""The dry run counts the calls a design makes beyond one per question and role: the Retrieval
Judge's evaluate -> refine loop at its bound (2 x max_iterations - 1 a question) and the router's
summaries written by the model (the corpus summary once, each document's with ``summary_scope:
document``), once per corpus and model; a run then makes the summary calls counted and no more
loop calls than the bound."""

from __future__ import annotations

import json
from typing import ClassVar

import pandas as pd
import pytest

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.estimate import calls_per_question, dry_run
from ragkit.experiments.runner import prepare, run_experiment
from ragkit.llms import LLMBackend, LLMParams, llms
from ragkit.llms.base import BackendReply
from ragkit.registry import ComponentParams
from ragkit.results import ResultStore
from tests.factories import TINY_DOCS, tiny_experiment, write_beir

pytestmark = pytest.mark.integration


class SystemParams(LLMParams):
    model: str = "by-system"


class BySystemLLM(LLMBackend):
    """Records each call's system prompt; the loop's evaluations are never enough and each search
    finds a chunk not shown yet (one shown a round), so the loop runs to its bound."""

    name: ClassVar[str] = "by_system"
    Params: ClassVar[type[ComponentParams]] = SystemParams
    systems: ClassVar[list[str]] = []
    refined: ClassVar[int] = 0

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        BySystemLLM.systems.append(system)
        title = (json_schema or {}).get("title", "")
        if title == "RefineReply":  # two queries that share no word, each finding every document
            BySystemLLM.refined += 1
            reply = {"query": "cats dogs sun" if BySystemLLM.refined % 2 else "furry fish bark loudly star centre"}
        else:
            reply = {"summary": "about animals", "route": "documents", "relevance": "yes", "confidence": 0.9,
                     "reason": "r", "relevant": [1], "sufficient": False, "missing": "more"}
        return BackendReply(text=json.dumps(reply), prompt_tokens=3, completion_tokens=2)


def config(dataset) -> dict:
    return tiny_experiment(dataset, "loops", top_k=[3], llm={"default": "by_system"}, generator=True, judges={
        "router": {"mode": "llm", "params": {"summary": "llm", "summary_scope": "document"}},
        "retrieval": {"mode": "llm", "params": {"loop": "evaluate_refine", "max_iterations": 3,
                                                 "max_chunks": 1}}})


def test_the_refine_loop_and_the_routers_summaries_are_counted(tmp_path, isolated_data_dir):
    dataset = write_beir(tmp_path / "beir")
    BySystemLLM.systems, BySystemLLM.refined = [], 0
    with llms.registered("by_system", BySystemLLM):
        experiment = config_from_dict(config(dataset))
        estimate = dry_run(experiment, tmp_path / "out", calibrate_first=False)
        questions = estimate.questions_to_compute
        (run,) = prepare(experiment, check=False)[0].runs
        assert questions == 3 and calls_per_question(run) == {"router": 1, "retrieval": 5, "generator": 1}
        # The corpus summary and one summary per document, then one routing per question.
        assert estimate.llm_calls["router"] == 1 + len(TINY_DOCS) + questions
        assert estimate.llm_calls["retrieval"] == 5 * questions
        run_experiment(experiment, tmp_path / "out")
        again = dry_run(experiment, tmp_path / "other", calibrate_first=False)
    asked = BySystemLLM.systems
    assert sum(s.startswith("You describe a collection") for s in asked) == 1
    assert sum(s.startswith("You describe a document") for s in asked) == len(TINY_DOCS)
    stages = ResultStore(tmp_path / "out").read("stages")
    loop_calls = pd.to_numeric(stages.loc[stages["stage"] == "judge:retrieval", "llm_calls"]).sum()
    assert loop_calls == estimate.llm_calls["retrieval"]  # every loop ran to its bound here
    # Written once: another results folder needs only the per-question calls.
    assert again.llm_calls["router"] == questions


@pytest.mark.parametrize(("params", "calls"), [
    ({"mode": "llm"}, 8),  # one call per claim, max_claims (8) at most
    ({"mode": "llm", "max_claims": 3, "claim_split": "llm"}, 4),  # the design's: the split and 3 claims
    ({"mode": "nli", "claim_split": "llm"}, 1),  # the NLI model checks; the LLM only splits
    ({"mode": "nli"}, 0),
])
def test_the_groundedness_judge_counts_its_claims_at_their_bound(params, calls):
    from ragkit.stages.base import STAGES

    assert STAGES.info("groundedness").llm_calls_per_question(params) == calls


def test_other_stages_count_one_call_and_the_one_call_retrieval_judge_too():
    from ragkit.stages.base import STAGES

    assert STAGES.info("rerank").llm_calls_per_question({"mode": "llm"}) == 1
    assert STAGES.info("retrieval").llm_calls_per_question({"mode": "llm", "max_iterations": 3}) == 1
    assert STAGES.info("retrieval").llm_calls_per_question({"mode": "llm", "loop": "evaluate_refine"}) == 3
