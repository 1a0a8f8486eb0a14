"""A search's trials are ordinary runs of the grid, and a killed search resumes (real bm25 runs)."""

from __future__ import annotations

import json

import pytest
import yaml

from ragkit.cli import main
from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.executor import LocalExecutor
from ragkit.experiments.runner import prepare
from ragkit.experiments.search import halving_rungs
from ragkit.experiments.search_run import STATE_FILE, run_search
from ragkit.results import ResultStore
from tests.factories import tiny_experiment, write_beir

pytestmark = pytest.mark.integration

FILLER = [f"filler{j} words here" for j in range(12)]
DOCS = {f"d{i}": " ".join([f"Document {i} talks about topic{i} at length.", *FILLER, f"It also mentions topic{i + 1}."])
        for i in range(8)}
QUESTIONS = {f"q{i}": (f"what about topic{i}", f"d{i}") for i in range(8)}


TOKEN_SIZES = [{"type": "token", "params": {"chunk_size": size, "chunk_overlap": 0}} for size in (16, 24, 64)]


def searched(dataset, strategy: str = "halving"):
    """Six bm25 runs (three chunk sizes x top 3 and 5) and a search over them."""
    return config_from_dict(tiny_experiment(dataset, "searched", chunkers=TOKEN_SIZES, top_k=[3, 5], search={
        "strategy": strategy, "objective": "ndcg@3", "seed": 1, "eta": 2}))

def _search(config, out, execute_hook=None):
    plan, derived = prepare(config)
    executor = LocalExecutor(derived, ResultStore(out))
    if execute_hook is not None:
        original = executor.execute
        executor.execute = lambda p, progress=lambda e, n: None: execute_hook(original, p, progress)
    return plan, run_search(config, plan, executor, ResultStore(out))


def test_trials_are_grid_runs_and_a_killed_search_resumes_where_it_stopped(tmp_path):
    dataset = write_beir(tmp_path / "beir", DOCS, QUESTIONS)
    config = searched(dataset)
    plan, whole = _search(config, tmp_path / "whole")
    grid_ids = [run.run_id for run in plan.runs]
    runs = ResultStore(tmp_path / "whole").read("runs")
    assert set(runs["run_id"]) <= set(grid_ids) and len(set(runs["run_id"])) == len(grid_ids)  # halving asks all
    assert [t.questions for t in whole.trials if t.rung == 0] == [halving_rungs(6, 8, 2, None)[0]] * 6
    assert whole.best("maximize", 8) is not None

    calls = []

    def killed_on_third(original, p, progress):
        calls.append(p.runs[0].run_id)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return original(p, progress)

    with pytest.raises(KeyboardInterrupt):
        _search(config, tmp_path / "resumed", killed_on_third)
    state = json.loads((tmp_path / "resumed" / STATE_FILE).read_text())
    assert len(state["trials"]) == 2
    computed = []

    def counting(original, p, progress):
        report = original(p, progress)
        computed.append(report.questions_computed)
        return report

    _, resumed = _search(config, tmp_path / "resumed", counting)
    assert [(t.candidate, t.questions, t.value) for t in resumed.trials] == \
        [(t.candidate, t.questions, t.value) for t in whole.trials]
    assert len(computed) == len(whole.trials) - 2  # the two trials done are not evaluated again
    assert all(n > 0 for n in computed)


def test_ragkit_run_with_a_search_block_runs_the_search(tmp_path, capsys):
    dataset = write_beir(tmp_path / "beir", DOCS, QUESTIONS)
    path = tmp_path / "x.yaml"
    data = searched(dataset, "random").model_dump(mode="json", exclude_defaults=True)
    data["search"]["budget"] = 2
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "search: random, 2 trial(s), cost 2.00 of the grid's 6 full runs" in out and "best on every question" in out
    assert ResultStore(tmp_path / "out").read("runs")["run_id"].nunique() == 2


def test_an_objective_deeper_than_some_run_is_refused_before_any_trial(tmp_path):
    dataset = write_beir(tmp_path / "beir", DOCS, QUESTIONS)
    config = searched(dataset).model_copy(update={"top_k": [1, 3]})
    with pytest.raises(ConfigError, match=r"'ndcg@3' is not scored by runs whose final context holds 1 chunk"):
        _search(config, tmp_path / "out")
    assert not (tmp_path / "out" / STATE_FILE).exists()
