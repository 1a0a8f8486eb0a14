"""Judges inside a real run: grid toggles, run ids, the judgements/answers tables, LLM usage in
stages, the Chunking Judge in the chunk set key, and re-runs that make 0 LLM calls.

The LLM here is a deterministic backend that answers by the reply schema it is asked for, so
every judge gets a well-formed decision; real BM25 over LanceDB, real results store. The real
embedded model runs the example experiment in test_judges_example.py.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, ClassVar

import pytest

from ragkit.analysis.failures import metric_failures
from ragkit.analysis.summary import summary_table
from ragkit.experiments.config import config_from_dict, expand_grid
from ragkit.experiments.runner import run_experiment
from ragkit.llms import LLMBackend, LLMParams, llms
from ragkit.llms.base import BackendReply
from ragkit.registry import ComponentParams
from ragkit.results import ResultStore
from tests.factories import TINY_DOCS, TINY_QUESTIONS, tiny_experiment, write_beir

pytestmark = pytest.mark.integration


class RuleParams(LLMParams):
    model: str = "rules"


class RuleLLM(LLMBackend):
    """Replies by the schema asked for: keeps chunks 2 and 1, scores chunks descending, picks
    `document` for every document, answers citing [1]. Counts the calls it really answers."""

    name: ClassVar[str] = "rules"
    Params: ClassVar[type[ComponentParams]] = RuleParams
    calls: ClassVar[list[str]] = []

    def _chat(self, messages, *, json_schema, max_tokens) -> BackendReply:
        title = (json_schema or {}).get("title", "text")
        RuleLLM.calls.append(title)
        if title == "RetrievalReply":
            text = {"refined_query": "", "relevant": [2, 1], "order": [2, 1], "request_more": False}
        elif title.startswith("RerankReply"):
            count = json_schema["properties"]["scores"]["minItems"]
            text = {"scores": [100 - 10 * i for i in range(count)]}
        elif title == "ChunkingReply":
            text = {"chunker": "document", "params": {}, "justification": "short"}
        elif title == "GeneratorReply":
            text = {"answer": "It is in the first source [1].", "citations": [1]}
        else:
            text = "It is in the first source [1]."
        return BackendReply(text=text if isinstance(text, str) else json.dumps(text), prompt_tokens=10,
                            completion_tokens=5)


@pytest.fixture
def rules_llm():
    RuleLLM.calls = []
    with llms.registered("rules", RuleLLM):
        yield RuleLLM


def config(dataset, **extra: Any):
    chunkers = [{"type": "token", "params": {"chunk_size": 16, "chunk_overlap": 0}}]
    return config_from_dict(tiny_experiment(dataset, "judged", **{"top_k": 3, "llm": {"default": "rules"},
                                                                  "chunkers": chunkers, **extra}))


def test_each_judge_toggle_doubles_the_grid_and_off_runs_keep_the_judge_free_run_id(tmp_path, rules_llm):
    dataset = write_beir(tmp_path / "beir")
    plain = run_experiment(config(dataset), tmp_path / "plain")
    judged = config(dataset, judges={"retrieval": "both", "rerank": {"mode": ["off", "heuristic", "llm"]}},
                    generator=True)
    assert len(expand_grid(judged)) == 6
    report = run_experiment(judged, tmp_path / "out")
    assert report.runs_total == 6

    runs = ResultStore(tmp_path / "out").read("runs")
    plain_id = ResultStore(tmp_path / "plain").read("runs")["run_id"].item()
    both_off = runs[(runs["judge.retrieval"] == "off") & (runs["judge.rerank"] == "off")]
    assert plain.runs_total == 1 and len(both_off) == 1
    # Same retrieval, plus answers: the generator is part of the id, the judges that are off are not.
    assert both_off["run_id"].item() != plain_id
    assert set(runs["judge.rerank"]) == {"off", "heuristic", "llm"}
    assert runs.loc[runs["judge.rerank"] == "off", "judge.rerank.top_n"].isna().all()
    assert set(runs["llm.generator"]) == {"rules:rules"}


def test_judgements_answers_and_llm_usage_are_stored_and_a_rerun_calls_no_llm(tmp_path, rules_llm):
    dataset = write_beir(tmp_path / "beir")
    judged = config(dataset, judges={"retrieval": "both", "rerank": "both"}, generator=True)
    run_experiment(judged, tmp_path / "out")
    store = ResultStore(tmp_path / "out")
    runs, judgements, stages = store.read("runs"), store.read("judgements"), store.read("stages")
    answers, scores = store.read("answers"), store.read("scores")

    on = runs[(runs["judge.retrieval"] == "llm") & (runs["judge.rerank"] == "llm")]["run_id"].item()
    mine = judgements[judgements["run_id"] == on]
    assert set(mine.groupby("question_id")["judge"].apply(tuple)) == {("retrieval", "rerank", "generator")}
    assert mine["valid"].all()
    for text in mine[mine["judge"] == "retrieval"]["decision"]:
        decision = json.loads(text)  # the rule LLM keeps chunks 2 and 1 of those shown, in that order
        assert decision["action"] == "final" and decision["kept"] == decision["shown"][:2][::-1]

    assert len(answers) == 4 * 3 and (answers["answer"] == "It is in the first source [1].").all()
    assert all(len(json.loads(c)) == 1 for c in answers["citations"])
    per_stage = stages[stages["run_id"] == on].groupby("stage")["llm_calls"].sum()
    assert per_stage["judge:retrieval"] == 3 and per_stage["judge:rerank"] == 3 and per_stage["generate"] == 3
    assert per_stage["retrieve"] == 0
    # The final chunks are scored: with rerank kept at the default top_n the retrieval metrics exist.
    assert scores[scores["run_id"] == on]["metric"].str.startswith("recall@").any()

    summary = summary_table(store)
    assert {"llm_calls/q", "tokens/q", "invalid:retrieval", "invalid:rerank"} <= set(summary.columns)
    assert (summary["invalid:retrieval"].dropna() == 0).all()

    # The same experiment into a fresh folder: every reply comes from the LLM cache.
    made = len(RuleLLM.calls)
    run_experiment(judged, tmp_path / "again")
    assert len(RuleLLM.calls) == made
    again = ResultStore(tmp_path / "again").read("stages")
    assert again["llm_calls"].sum() == stages["llm_calls"].sum() and again["backend_calls"].sum() == 0


def test_the_chunking_judge_is_part_of_the_chunk_set_and_its_decisions_are_recorded(tmp_path, rules_llm):
    dataset = write_beir(tmp_path / "beir")
    run_experiment(config(dataset, judges={"chunking": ["off", "heuristic", "llm"]}), tmp_path / "out")
    store = ResultStore(tmp_path / "out")
    runs, judgements = store.read("runs"), store.read("judgements")
    assert runs["chunkset_id"].nunique() == 3
    per_document = judgements[judgements["question_id"].isna()]
    assert len(per_document) == 2 * len(TINY_DOCS)  # heuristic and llm runs, one decision per document
    chosen = {json.loads(d)["chunker"] for d in per_document["decision"]}
    assert chosen == {"document"}  # short documents (heuristic) and the rule LLM both choose it
    retrievals = store.read("retrievals").merge(runs[["run_id", "judge.chunking"]], on="run_id")
    # Judged runs retrieve whole documents (chunk index 0 only); the 16-token windows split them.
    judged_chunks = retrievals[retrievals["judge.chunking"] != "off"]["chunk_id"]
    assert judged_chunks.str.endswith(":0").all()


def test_a_bad_judge_config_names_the_judge_and_the_valid_choices(tmp_path, rules_llm):
    dataset = write_beir(tmp_path / "beir")
    with pytest.raises(ValueError, match=re.escape("no mode 'heuristic'. Valid modes: off, llm, both")):
        config(dataset, judges={"retrieval": "heuristic"})
    valid = "unknown judge ['reranker']. Valid judges: answer_check, chunking, compression, condense"
    with pytest.raises(ValueError, match=re.escape(valid)):
        config(dataset, judges={"reranker": "llm"})
    with pytest.raises(ValueError, match="top_n"):
        config(dataset, judges={"rerank": {"mode": "llm", "params": {"top_n": 0}}})
    with pytest.raises(ValueError, match="set 'generator: true'"):
        config(dataset, judges={"groundedness": "llm"})


def test_an_llm_that_cannot_answer_stops_the_run_before_anything_is_written(tmp_path):
    dataset = write_beir(tmp_path / "beir")
    down = config_from_dict({
        "name": "down", "dataset": {"path": str(dataset)}, "embedders": [], "retrievers": ["bm25"],
        "judges": {"retrieval": "both"}, "generator": True,
        "llm": {"default": {"type": "ollama", "params": {"base_url": "http://127.0.0.1:9"}}},
    })
    with pytest.raises(ValueError, match=r"LLM for generator, retrieval: Ollama is not reachable at http://127.0.0.1:9"):
        run_experiment(down, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_generation_metrics_are_scored_per_question_with_reasons_and_their_cost_kept_apart(tmp_path, rules_llm):
    dataset = write_beir(tmp_path / "beir")
    evaluated = config(dataset, generator=True,
                       evaluation={"metrics": ["faithfulness", "embedding_groundedness", "answer_overlap"],
                                   "timeout_s": 30})
    run_experiment(evaluated, tmp_path / "out")
    store = ResultStore(tmp_path / "out")
    scores, stages, runs = store.read("scores"), store.read("stages"), store.read("runs")
    assert runs["evaluation"].item() == "faithfulness,embedding_groundedness,answer_overlap"
    assert set(runs["llm.evaluation"]) == {"rules:rules"}
    table = scores.set_index(["question_id", "metric"])
    for question in TINY_QUESTIONS:
        # The rule LLM does not speak ragas' formats: NaN with the reason, never 0.
        faithfulness = table.loc[(question, "faithfulness")]
        assert math.isnan(faithfulness["value"]) and "unparseable judge output" in faithfulness["error"]
        overlap = table.loc[(question, "answer_overlap")]  # BEIR questions carry no reference answer
        assert math.isnan(overlap["value"]) and overlap["error"] == "no reference answer"
        assert 0.0 <= table.loc[(question, "embedding_groundedness"), "value"] <= 1.0
    evaluating = stages["stage"].str.startswith("eval")
    assert stages[stages["stage"] == "eval:faithfulness"]["llm_calls"].min() >= 1
    assert stages[~evaluating & stages["question_id"].notna()]["stage"].isin(["retrieve", "generate"]).all()

    summary = summary_table(store)
    assert "eval_ms" in summary and "eval_tokens/q" in summary
    failures = metric_failures(scores).set_index("metric")
    assert failures.loc["faithfulness", ["scored", "failed"]].tolist() == [0, len(TINY_QUESTIONS)]
    assert failures.loc["answer_overlap", "top_reason"] == "no reference answer"
    assert "embedding_groundedness" not in failures.index
