"""A stage defined here, as a plugin would define it, runs where its role says (issue 30, item 3).

``ShortChunkFilter`` declares role ``context`` and is registered in code, under a name the
pipeline has never heard of. Run in a real experiment (BM25 over LanceDB, no LLM), it runs after
the rerank judge, its decisions are rows of the run's ``judgements`` table and its cost a row of
``stages``; off, the run is the plain run with the plain run's id.
"""

from __future__ import annotations

import json
import time
from typing import Any, ClassVar

import pytest
from llama_index.core.schema import NodeWithScore, TextNode
from pydantic import Field

from ragkit.experiments.config import config_from_dict, judge_names
from ragkit.experiments.runner import run_experiment
from ragkit.pipeline.pipeline import Pipeline
from ragkit.results import ResultStore
from ragkit.stages.base import STAGES, JudgementLog, Stage, StageParams
from ragkit.stages.context.rerank import RerankJudge, RerankJudgeParams
from tests.factories import tiny_experiment, write_beir


class ShortChunkFilterParams(StageParams):
    mode: Any = Field(default="heuristic", description="off or heuristic.")
    keep: int = Field(default=1, ge=1, le=100, description="Chunks passed on, in the order received.")


class ShortChunkFilter(Stage):
    """Keeps the first ``keep`` chunks: a context stage with a decision worth recording."""

    name: ClassVar[str] = "short_chunk_filter"
    role: ClassVar[str] = "context"
    modes: ClassVar[tuple[str, ...]] = ("off", "heuristic")
    Params: ClassVar[type[StageParams]] = ShortChunkFilterParams
    params: ShortChunkFilterParams
    seen: ClassVar[list[list[str]]] = []

    def __init__(self, params: ShortChunkFilterParams, llm: Any = None, **_dependencies: Any) -> None:
        super().__init__(params, llm)

    def process(self, query: str, nodes: list[NodeWithScore], trace: JudgementLog) -> list[NodeWithScore]:
        started = time.perf_counter()
        ShortChunkFilter.seen.append([node.node.node_id for node in nodes])
        kept = nodes[: self.params.keep]
        decision = {"kept": [node.node.node_id for node in kept], "dropped": len(nodes) - len(kept)}
        trace.add(self.judgement(query, decision, started=started))
        return kept


@pytest.fixture
def plugin_stage():
    ShortChunkFilter.seen = []
    with STAGES.registered(ShortChunkFilter.name, ShortChunkFilter):
        yield ShortChunkFilter


def experiment(dataset, **judge_choices: Any):
    return config_from_dict(tiny_experiment(dataset, "plugin", top_k=3, judges=judge_choices, chunkers=[
        {"type": "token", "params": {"chunk_size": 16, "chunk_overlap": 0}}]))


@pytest.mark.unit
def test_the_plugin_stage_runs_after_the_stages_before_it_in_role_order(plugin_stage):
    nodes = [NodeWithScore(node=TextNode(id_=f"c{i}", text=f"cats purr {'x' * i}"), score=1.0 - i / 10)
             for i in range(3)]

    class Fixed:
        def retrieve(self, query: str) -> list[NodeWithScore]:
            return list(nodes)

    # Given in the wrong order: the pipeline runs the rerank judge (order 10) before the plugin.
    stages = (ShortChunkFilter(ShortChunkFilterParams(keep=2)),
              RerankJudge(RerankJudgeParams(mode="heuristic", top_n=3)))
    trace = Pipeline(Fixed(), Fixed(), stages=stages).answer("cats purr")  # type: ignore[arg-type]
    assert [row["stage"] for row in trace.stages] == ["retrieve", "judge:rerank", "judge:short_chunk_filter"]
    assert [judgement.judge for judgement in trace.judgements] == ["rerank", "short_chunk_filter"]
    assert len(trace.nodes) == 2 and trace.judgements[-1].decision["dropped"] == 1


@pytest.mark.integration
def test_a_plugin_stage_runs_in_a_real_run_and_its_decisions_are_judgements(plugin_stage, tmp_path):
    assert "short_chunk_filter" in judge_names()
    dataset = write_beir(tmp_path / "beir")
    run_experiment(experiment(dataset), tmp_path / "plain")
    plain = set(ResultStore(tmp_path / "plain").read("runs")["run_id"])
    out = tmp_path / "plugin"
    run_experiment(experiment(dataset, short_chunk_filter={"mode": "both", "params": {"keep": 1}}), out)
    store = ResultStore(out)
    runs = store.read("runs").set_index("run_id")
    on = runs.index[runs["judge.short_chunk_filter"] == "heuristic"]
    off = runs.index[runs["judge.short_chunk_filter"] == "off"]
    assert len(on) == 1 and len(off) == 1 and set(off) == plain
    judgements = store.read("judgements")
    mine = judgements[judgements["judge"] == "short_chunk_filter"]
    questions = store.read("scores")["question_id"].nunique()
    # One decision per question of the run with the stage on, none in the run with it off.
    assert set(mine["run_id"]) == set(on) and len(mine) == questions == len(plugin_stage.seen)
    dropped = sorted(json.loads(decision)["dropped"] for decision in mine["decision"])
    assert dropped == sorted(max(len(ids) - 1, 0) for ids in plugin_stage.seen) and dropped[-1] >= 1
    stages = store.read("stages")
    assert set(stages[stages["stage"] == "judge:short_chunk_filter"]["run_id"]) == set(on)
    # The final context is the one chunk the stage kept.
    retrievals = store.read("retrievals")
    assert retrievals[retrievals["run_id"].isin(on)].groupby("question_id").size().max() == 1
