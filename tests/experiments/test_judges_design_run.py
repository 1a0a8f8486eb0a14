"""experiments/reference/judges.yaml as written (the data cut to two questions, the LLM a scripted
backend that replies by schema): the Retrieval Judge is a benchmark of the judges' cost, so each
question of a judge-on run makes exactly one Retrieval Judge call, on the first search with the
original question, over 15 dense candidates shown as 300-character previews after their file
names; an empty "relevant" list keeps every chunk. The scripted replies ask for more chunks and
name none relevant, the two ways the judge could otherwise call again or empty the context.

The same run holds the design's phase 3 and 4 (issue 43 item 14): an LLM semantic chunker arm and
the Retrieval Judge's loop, an evaluation, a separate refine call and a new search, per round."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.llms import LLMBackend, LLMParams, llms
from ragkit.llms.base import BackendReply
from ragkit.registry import ComponentParams
from ragkit.results import ResultStore
from tests.experiments.test_judges_example import small_sample

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # 12 configurations, about 2 minutes

JUDGES = Path(__file__).resolve().parents[2] / "experiments" / "reference" / "judges.yaml"


class ByScheme(LLMBackend):
    """The Retrieval Judge: nothing relevant, and more wanted; the Chunking Judge: token, no sizes
    (so the design's 500 / 50 are filled in and divided by 4); anything else: a cited answer."""

    name: ClassVar[str] = "by_schema"
    Params: ClassVar[type[ComponentParams]] = type("ByParams", (LLMParams,), {"__annotations__": {"model": str},
                                                                             "model": "by_schema"})
    prompts: ClassVar[list[tuple[str, str]]] = []

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        title = (json_schema or {}).get("title", "text")
        ByScheme.prompts.append((title, messages[-1]["content"]))
        if title == "RetrievalReply":
            text = json.dumps({"refined_query": "something else", "relevant": [], "order": [], "request_more": True})
        elif title == "ChunkingReply":
            text = json.dumps({"chunker": "token", "params": {}, "justification": "plain text"})
        elif title == "EvaluateReply":
            text = json.dumps({"relevant": [], "sufficient": False, "missing": "more"})
        elif title == "RefineReply":  # the question and a number: a new query each time, like the question
            question = [line for line in messages[-1]["content"].splitlines() if line.startswith("Question: ")][-1]
            text = json.dumps({"query": f"{question.removeprefix('Question: ')} {len(ByScheme.prompts)}"})
        elif title == "BoundaryReply":
            text = json.dumps({"starts": []})
        else:
            text = "It is in the first source [1]."
        return BackendReply(text=text, prompt_tokens=10, completion_tokens=5)


@pytest.fixture
def by_schema():
    ByScheme.prompts = []
    with llms.registered("by_schema", ByScheme):
        yield ByScheme


def test_the_judges_reference_makes_one_retrieval_judge_call_per_question(tmp_path, by_schema, monkeypatch):
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "data"))
    data: dict[str, Any] = yaml.safe_load(JUDGES.read_text(encoding="utf-8"))
    data["dataset"] = {**data["dataset"], "path": str(small_sample(tmp_path / "sample")), "limit": 2}
    data["llm"] = {"default": "by_schema"}
    out = tmp_path / "out"
    run_experiment(config_from_dict(data), out)
    store = ResultStore(out)
    runs, judgements, stages, retrievals = (store.read(t) for t in ("runs", "judgements", "stages", "retrievals"))
    assert len(runs) == 12  # 2 chunkers x chunking judge off / on x retrieval judge off / one call / loop
    looped = set(runs.loc[runs["judge.retrieval.loop"].eq("evaluate_refine"), "run_id"])
    judged = set(runs.loc[runs["judge.retrieval"].eq("llm") & runs["judge.retrieval.loop"].isin(["judge"]), "run_id"])
    assert len(judged) == 4 and len(looped) == 4  # each: 2 chunkers x chunking judge off and on
    questions = set(judgements["question_id"].dropna())
    assert len(questions) == 2
    calls = judgements[(judgements["judge"] == "retrieval") & judgements["run_id"].isin(judged)]
    assert calls.groupby(["run_id", "question_id"]).size().to_dict() == {
        (run, question): 1 for run in judged for question in questions}
    llm_calls = stages[(stages["stage"] == "judge:retrieval") & stages["run_id"].isin(judged)]
    assert llm_calls["llm_calls"].sum() == len(judged) * len(questions)
    for decision in (json.loads(d) if isinstance(d, str) else d for d in calls["decision"]):
        # The first search, with the original question; nothing relevant: every chunk kept.
        assert decision["iteration"] == 1 and decision["stopped"] == "none relevant: kept all"
        assert decision["kept"] == decision["shown"] and len(decision["shown"]) <= 15
    asked = [prompt for title, prompt in by_schema.prompts if title == "RetrievalReply"]
    assert asked and all("(file: " in prompt for prompt in asked)
    shown_lines = [line for prompt in asked for line in prompt.splitlines() if line.startswith("[")]
    assert all(len(line.split(") ", 1)[1]) <= 300 for line in shown_lines if line.startswith("[") and "(file: " in line)
    # Judge on or off, the context is the same chunks: an empty "relevant" emptied nothing.
    per_run = retrievals.groupby("run_id")["chunk_id"].apply(frozenset)
    off = set(runs.loc[runs["judge.retrieval"] == "off", "run_id"])
    assert {len(per_run[run]) for run in judged} == {len(per_run[run]) for run in off}

    # Phase 4: per question 3 evaluations of at most 10 chunks each and 2 refine calls between them,
    # each refined query searched; nothing relevant, so every chunk shown is kept.
    loop_rows = judgements[(judgements["judge"] == "retrieval") & judgements["run_id"].isin(looped)]
    loop_decisions = [json.loads(d) if isinstance(d, str) else d for d in loop_rows["decision"]]
    for run in looped:
        for question in questions:
            mine = [d for d, r, q in zip(loop_decisions, loop_rows["run_id"], loop_rows["question_id"])
                    if r == run and q == question]
            calls = [d["call"] for d in mine]
            # At most 3 evaluations with a refine call between two; a refined search with nothing new
            # to show (its chunks were all shown already) ends the loop without an evaluation call, and
            # a refined query that repeats a searched one is recorded, not searched, and ends the loop.
            searched = [d for d in mine if d["call"] == "refine" and d.get("action") == "search"]
            repeated = [d for d in mine if d["call"] == "refine" and d.get("action") == "not searched"]
            assert calls[:2] == ["evaluate", "refine"] and calls[-1] == "result", calls
            assert calls.count("evaluate") <= 3 and len(searched) == calls.count("evaluate") - 1, calls
            assert len(repeated) <= 1 and calls.count("refine") == len(searched) + len(repeated), calls
            assert all(d["repeats"] in d["searched"] for d in repeated)
            assert mine[-1]["stopped"] != "repeated query" or repeated, mine[-1]
            assert len(mine[-1]["queries"]) == 1 + len(searched)  # each refined query not a repeat was searched
            assert all(len(d["shown"]) <= 10 for d in mine if d["call"] == "evaluate")
            assert mine[-1]["action"].startswith("none relevant: kept all")
    loop_calls = stages[(stages["stage"] == "judge:retrieval") & stages["run_id"].isin(looped)]
    asked_model = [d for d in loop_decisions if d["call"] == "refine"
                   or (d["call"] == "evaluate" and d.get("action") != "nothing new to judge")]
    assert loop_calls["llm_calls"].sum() == len(asked_model)
    # Phase 3: the LLM semantic arm's chunks were cut by the LLM's calls (or their recorded fallback).
    semantic = set(runs.loc[runs["chunker"] == "llm_semantic", "run_id"])
    assert len(semantic) == 6
    assert any(title == "BoundaryReply" for title, _ in by_schema.prompts)
