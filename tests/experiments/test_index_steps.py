"""Index steps: the full-text index is built only for runs that search text and charged to them
alone; an ANN setting is part of the index and run ids and is built above its row threshold."""

from __future__ import annotations

import json

import pytest

from ragkit.artefacts.index import IndexStore
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import prepare, run_experiment
from ragkit.results import ResultStore
from tests.factories import write_beir

pytestmark = pytest.mark.integration

DOCS = {f"d{i}": f"Farm {i} keeps {animal}s and grows {crop}." for i, (animal, crop) in
        enumerate([("cow", "wheat"), ("goat", "barley"), ("hen", "maize"), ("pig", "oats")])}
QUESTIONS = {f"q{i}": (f"which farm grows {crop}", f"d{i}") for i, crop in enumerate(["wheat", "barley"])}


def config(dataset, retrievers, **extra):
    return config_from_dict({"name": "steps", "dataset": {"path": str(dataset)}, "chunkers": ["document"],
                             "retrievers": retrievers, "top_k": [2], **extra})


def build_stages(out, run_ids) -> dict[str, set[str]]:
    stages = ResultStore(out).read("stages")
    builds = stages[stages["question_id"].isna()]
    return {run: set(builds.loc[builds["run_id"] == run, "stage"]) for run in run_ids}


def test_the_full_text_index_is_built_for_text_search_only_and_charged_to_those_runs(tmp_path):
    dataset = write_beir(tmp_path / "beir", DOCS, QUESTIONS)
    dense_only = config(dataset, ["dense"])
    plan, derived = prepare(dense_only)
    (step,) = plan.index_steps
    assert step.fulltext is False
    run_experiment(dense_only, tmp_path / "out")
    assert IndexStore(derived / "lancedb").has_fulltext(step.index_id) is False
    (dense_run,) = [r.run_id for r in plan.runs]
    assert build_stages(tmp_path / "out", [dense_run])[dense_run] == {"chunk", "embed", "index"}

    # Hybrid joins the grid: the same index gets its full-text index once, charged to hybrid only.
    grid = config(dataset, ["dense", "hybrid"])
    plan, _ = prepare(grid)
    assert [s.index_id for s in plan.index_steps] == [step.index_id] and plan.index_steps[0].fulltext
    report = run_experiment(grid, tmp_path / "out")
    assert report.indexes_built == 0 and IndexStore(derived / "lancedb").has_fulltext(step.index_id)
    hybrid_run = next(r.run_id for r in plan.runs if r.point.retriever.type == "hybrid")
    stages = build_stages(tmp_path / "out", [dense_run, hybrid_run])
    assert stages[dense_run] == {"chunk", "embed", "index"}
    assert stages[hybrid_run] == {"chunk", "embed", "index", "fulltext"}
    record = json.loads((derived / "steps" / f"{step.index_id}.fulltext.json").read_text())
    assert record["fulltext"] > 0


def test_an_ann_setting_changes_index_and_run_ids_of_vector_runs_only(tmp_path):
    dataset = write_beir(tmp_path / "beir", DOCS, QUESTIONS)
    exact, _ = prepare(config(dataset, ["dense", "bm25"], embedders=["minilm"]))
    ann = {"kind": "ivf_hnsw_sq", "min_rows": 1000}
    approximate, _ = prepare(config(dataset, ["dense", "bm25"], embedders=["minilm"], ann=ann))
    by_type = lambda plan: {r.point.retriever.type: r for r in plan.runs}  # noqa: E731
    assert by_type(exact)["bm25"].run_id == by_type(approximate)["bm25"].run_id
    assert by_type(exact)["dense"].run_id != by_type(approximate)["dense"].run_id
    assert by_type(exact)["dense"].index_id != by_type(approximate)["dense"].index_id
    step = next(s for s in approximate.index_steps if s.embedder is not None)
    assert step.ann is not None and step.ann.kind == "ivf_hnsw_sq"
    with pytest.raises(Exception, match="num_sub_vectors"):
        config(dataset, ["dense"], ann={"kind": "ivf_hnsw_sq", "num_sub_vectors": 4})


def test_an_ann_index_is_built_above_its_threshold_and_the_run_row_names_it(tmp_path):
    docs = {f"d{i}": f"Farm {i} keeps animal {i} and grows crop {i * 7 % 300}." for i in range(300)}
    questions = {f"q{i}": (f"which farm keeps animal {i}", f"d{i}") for i in range(3)}
    ann = {"kind": "ivf_hnsw_sq", "min_rows": 256, "num_partitions": 2}
    cfg = config(write_beir(tmp_path / "beir", docs, questions), ["dense"], ann=ann)
    plan, derived = prepare(cfg)
    run_experiment(cfg, tmp_path / "out")
    (step,) = plan.index_steps
    marker = json.loads((derived / "lancedb" / f"chunks_{step.index_id}.ready").read_text())
    assert marker["ann_built"] is True and marker["ann"]["kind"] == "ivf_hnsw_sq" and marker["rows"] == 300
    runs = ResultStore(tmp_path / "out").read("runs")
    assert runs["ann.kind"].tolist() == ["ivf_hnsw_sq"] and runs["ann.nprobes"].tolist() == [20]
    retrievals = ResultStore(tmp_path / "out").read("retrievals")
    assert (retrievals.groupby("question_id")["rank"].max() == 2).all()


def test_ann_kind_none_keeps_the_exact_ids_whatever_its_other_knobs(tmp_path):
    dataset = write_beir(tmp_path / "beir", DOCS, QUESTIONS)
    exact, _ = prepare(config(dataset, ["dense"], embedders=["minilm"]))
    off, _ = prepare(config(dataset, ["dense"], embedders=["minilm"], ann={"kind": "none", "nprobes": 50}))
    assert [r.run_id for r in off.runs] == [r.run_id for r in exact.runs]
    assert [s.index_id for s in off.index_steps] == [s.index_id for s in exact.index_steps]
    assert all(s.ann is None for s in off.index_steps)
