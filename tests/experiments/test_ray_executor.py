"""The Ray executor on a real local Ray: the same tables as the in-process executor, a killed
run that resumes, a shard that fails every try as error rows, and a clear error without Ray."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from ragkit.cli import main
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.execution_report import ExecutionReport
from ragkit.experiments.runner import prepare, run_experiment
from ragkit.results import ResultStore
from ragkit.settings import get_settings
from tests.factories import write_beir
from tests.held_run import process_alive, process_stderr, start_held_run, wait_until_held

ray = pytest.importorskip("ray", reason="the test extra installs ray; without it the Ray executor cannot be tested")

pytestmark = pytest.mark.integration

ANIMALS = ["cat", "dog", "cow", "owl", "fox", "bee", "ant", "elk"]
DOCS = {f"d{i}": f"The {name} is an animal. It lives on farm number {i} and eats plants." for i, name in
        enumerate(ANIMALS)}
QUESTIONS = {f"q{i}": (f"where does the {name} live", f"d{i}") for i, name in enumerate(ANIMALS)}
# What a table holds about the questions, without what depends on when and where it ran.
KEYS = {"scores": ["run_id", "question_id", "metric", "value", "error"],
        "retrievals": ["run_id", "question_id", "rank", "chunk_id", "doc_id", "start_char", "end_char", "score"],
        "stages": ["run_id", "question_id", "stage"]}


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module, as the README runs it: loopback, 2 CPUs, no auth."""
    # Set for the module only: a later test in this process must not inherit it (random order).
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_MODE", "disabled")
        temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        ray.init(num_cpus=2, _node_ip_address="127.0.0.1", _temp_dir=temp_dir, include_dashboard=False,
                 log_to_driver=False)
        yield ray
        ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)  # its sockets and logs: nothing else uses them


def grid(dataset: Path, **extra) -> dict:
    """6 runs: two chunkers x three retrievers with the heuristic rerank, three-question shards."""
    return {"name": "ray-grid", "dataset": {"path": str(dataset)}, "chunkers": ["document", "sentence"],
            "retrievers": ["bm25", "dense", "hybrid"], "top_k": [3], "judges": {"rerank": "heuristic"},
            "shard_size": 3, **extra}


def table(out: Path, name: str) -> pd.DataFrame:
    """The table's key columns, sorted; a retrieval score is rounded to 6 decimals: a Ray task has
    one CPU thread, and float32 sums in another order differ in the last bits (ranks do not)."""
    columns = KEYS[name]
    frame = ResultStore(out).read(name)[columns]
    if name == "retrievals":
        frame = frame.assign(score=frame["score"].round(6))
    return frame.sort_values(columns).reset_index(drop=True).astype(str)


def fresh_data_dir(monkeypatch, folder: Path) -> None:
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(folder))
    get_settings.cache_clear()


def test_a_ray_run_writes_the_tables_a_local_run_writes(tmp_path, monkeypatch, local_ray):
    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS)))
    local = run_experiment(config, tmp_path / "local")
    fresh_data_dir(monkeypatch, tmp_path / "ray-data")  # nothing cached: the workers build and embed
    on_ray = run_experiment(config, tmp_path / "ray", executor="ray")

    assert on_ray.runs_total == local.runs_total == 6
    assert on_ray.questions_computed == local.questions_computed == 48
    assert (on_ray.chunksets_built, on_ray.indexes_built) == (local.chunksets_built, local.indexes_built) == (2, 4)
    assert on_ray.chunks_embedded == local.chunks_embedded > 0
    for name in KEYS:
        pd.testing.assert_frame_equal(table(tmp_path / "ray", name), table(tmp_path / "local", name))
    # Each run's build costs are recorded once, with its first shard.
    stages = ResultStore(tmp_path / "ray").read("stages")
    builds = stages[stages["question_id"].isna()]
    assert not builds.duplicated(["run_id", "stage"]).any() and set(builds["stage"]) >= {"chunk", "index", "embed"}

    again = run_experiment(config, tmp_path / "ray", executor="ray")
    assert again.nothing_to_do and again.questions_computed == 0


def test_workers_stay_up_across_steps_and_the_questions_are_embedded_once(tmp_path, monkeypatch, local_ray):
    """Two dense runs in 4 two-question shards each on 2 workers: every step of the execution
    runs in one of 2 processes (a worker per CPU that stays up), both answer shards, and the
    plan's questions are embedded in one batch for the whole execution, not once per worker."""
    from ragkit.experiments.ray_executor import RayExecutor

    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS), chunkers=["document"],
                                   retrievers=["dense", "hybrid"], judges={}, shard_size=2))
    fresh_data_dir(monkeypatch, tmp_path / "data")
    plan, derived_dir = prepare(config)
    executor = RayExecutor(derived_dir, ResultStore(tmp_path / "ray"))
    report = executor.execute(plan)
    assert report.questions_computed == 16 and not report.errors

    stats = executor.worker_stats
    steps = 1 + len(plan.index_steps) + 1 + 2 * 4  # chunk set, indexes, query vectors, shards
    assert len({worker["pid"] for worker in stats}) == len(stats) == 2
    assert sum(worker["steps"] for worker in stats) == steps
    assert all(worker["shards"] > 0 for worker in stats)  # both answered dense questions...
    assert sum(worker["query_batches"] for worker in stats) == 1  # ...with the questions embedded once
    assert not any(worker["windows"] for worker in stats)  # one window per chunk set: no embed steps
    local = run_experiment(config, tmp_path / "local")
    assert local.questions_computed == 16
    for name in KEYS:
        pd.testing.assert_frame_equal(table(tmp_path / "ray", name), table(tmp_path / "local", name))


class Ref:  # hashable by identity, as Ray's object refs are
    def __init__(self, name, args):
        self.name, self.args = name, args


class FakeWorker:
    """A stand-in for a ``PlanWorker`` actor handle: each method call is a Ref of its name and
    args, recorded by the FakeRay that started it."""

    def __init__(self, fake):
        self.fake = fake

    def __getattr__(self, method):
        def submit(*args):
            self.fake.submitted.append(Ref(method, args))
            return self.fake.submitted[-1]
        return SimpleNamespace(remote=submit)


class FakeRay:
    """Ray replaced for the driver's side: ``get`` answers a Ref by ``answer(ref)``, and ``wait``
    gives back the first ref ``order`` sorts first (default: the first submitted)."""

    def __init__(self, answer, order=lambda refs: refs):
        self.answer, self.order = answer, order
        self.options, self.submitted, self.killed = [], [], []

    def remote(self, **options):
        self.options.append(options)
        return lambda cls: SimpleNamespace(remote=lambda *args: FakeWorker(self))

    def cluster_resources(self):
        return {"CPU": 2}

    def put(self, value):
        return value

    def wait(self, refs, num_returns):
        first = self.order(refs)[0]
        return [first], [ref for ref in refs if ref is not first]

    def get(self, ref):
        if isinstance(ref, list):
            return [self.get(one) for one in ref]
        if ref.name == "stats":
            return {"pid": 0, "node": "n", "steps": 0, "shards": 0, "query_batches": 0}
        return self.answer(ref)

    def kill(self, worker):
        self.killed.append(worker)


def shard_rows(ref) -> object:
    from ragkit.experiments.ray_executor import ShardResult

    run_id, question_ids = ref.args[1], ref.args[2]  # after the plan's [ref], which every call starts with
    return ShardResult(question_ids, {"scores": pd.DataFrame(
        [{"run_id": run_id, "question_id": q, "metric": "mrr", "value": 1.0} for q in question_ids])})


def test_a_shard_that_fails_every_try_is_error_rows_for_each_metric_and_the_rest_commit(tmp_path):
    """The driver's side of a failed step, with Ray replaced by a stand-in whose get raises for
    one shard (a real worker failure cannot be arranged deterministically)."""
    from ragkit.experiments.ray_executor import RayExecutor

    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS), chunkers=["document"],
                                   retrievers=["bm25"], judges={}))
    plan, derived_dir = prepare(config)
    executor = RayExecutor(derived_dir, ResultStore(tmp_path / "out"))
    work = executor.start(plan)

    def answer(ref):
        if ref.name == "answer_shard":
            if ref.args[2][0] == "q3":
                raise RuntimeError("worker died\nOOM")
            return shard_rows(ref)
        return {"built": True, "windows": 1} if ref.name == "build_chunkset" else {"built": True, "embedded": 0}

    fake = FakeRay(answer)
    report = ExecutionReport()
    executor._run_tasks(fake, plan, work, work, report, lambda event, n: None)
    assert all(options["max_restarts"] >= 1 for options in fake.options)  # a dead worker comes back
    tries = [ref for ref in fake.submitted if ref.name == "answer_shard" and ref.args[2][0] == "q3"]
    assert len(tries) == 3  # tried again twice, then error rows
    scores = ResultStore(tmp_path / "out").read("scores")
    failed = scores[scores["question_id"].isin(["q3", "q4", "q5"])]
    assert len(failed) > 3 and failed["value"].isna().all()
    assert failed["error"].str.contains("failed after 3 tries: RuntimeError: OOM").all()
    assert set(failed["metric"]) >= {"mrr", "recall@3", "ndcg@3"}
    assert set(scores["question_id"]) == set(QUESTIONS)
    assert report.questions_computed == 8 and len(report.errors) == 1
    assert len(fake.killed) == 2  # the workers end with the execution


def test_shards_commit_as_they_finish_so_a_failed_build_keeps_the_other_indexes_rows(tmp_path):
    """With a stand-in for Ray that finishes one index's build last and fails it: every shard of
    the other index is committed before the run stops naming the failed build (the driver used to
    wait for every build before committing any shard, so a kill during a slow build lost them)."""
    from ragkit.experiments.ray_executor import RayExecutor

    config = config_from_dict(grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS), retrievers=["bm25"], judges={}))
    plan, derived_dir = prepare(config)
    executor = RayExecutor(derived_dir, ResultStore(tmp_path / "out"))
    work = executor.start(plan)
    slow = plan.index_steps[1].index_id

    def answer(ref):
        if ref.name == "build_index" and ref.args[1] == slow:
            raise RuntimeError("embedding server died")
        if ref.name == "answer_shard":
            return shard_rows(ref)
        return {"built": True, "windows": 1} if ref.name == "build_chunkset" else {"built": True, "embedded": 0}

    def slow_last(refs):  # the slow index finishes last, whatever else is running
        return sorted(refs, key=lambda ref: ref.name == "build_index" and ref.args[1] == slow)

    fake = FakeRay(answer, slow_last)
    with pytest.raises(RuntimeError, match=f"building index {slow} failed after 3 tries: RuntimeError: embedding"):
        executor._run_tasks(fake, plan, work, work, ExecutionReport(), lambda event, n: None)
    scores = ResultStore(tmp_path / "out").read("scores")
    fast_runs = {run.run_id for run in plan.runs if run.index_id != slow}
    assert set(scores["run_id"]) == fast_runs and len(fast_runs) == 1
    assert set(scores["question_id"]) == set(QUESTIONS)  # all 3 shards of the other index's run
    assert len(fake.killed) == 2  # what was left of the stopped run


def test_a_ray_run_killed_midway_resumes_with_no_lost_or_duplicated_rows(tmp_path, monkeypatch):
    config = grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS), chunkers=["document"], shard_size=1)
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    out = tmp_path / "out"
    argv = ["run", str(path), "--out", str(out), "--quiet", "--executor", "ray", "--num-cpus", "2"]
    held = tmp_path / "held"
    # Killed midway at a known point: after 5 of the 3 runs x 8 one-question shards.
    process = start_held_run(argv, 5, held, {**os.environ, "RAY_AUTH_MODE": "disabled"})
    wait_until_held(held, process_alive(process), process_stderr(process))
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert len(list((out / "_commits").glob("*.json"))) == 5

    assert main(["run", str(path), "--out", str(out), "--quiet", "--executor", "ray", "--num-cpus", "2"]) == 0
    scores = ResultStore(out).read("scores")
    assert not scores.duplicated(["run_id", "question_id", "metric"]).any()
    assert scores.groupby("run_id")["question_id"].nunique().tolist() == [8] * 3
    fresh_data_dir(monkeypatch, tmp_path / "local-data")
    run_experiment(config_from_dict(config), tmp_path / "local")
    for name in KEYS:
        pd.testing.assert_frame_equal(table(out, name), table(tmp_path / "local", name))


def test_without_ray_the_ray_executor_is_one_line_naming_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray raises ImportError
    config = grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS))
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--executor", "ray"]) == 2
    err = capsys.readouterr().err
    assert err == "error: the ray executor needs Ray: pip install 'ragkit[ray]' (or run with --executor local)\n"
    assert not (tmp_path / "out").exists()


def test_a_ray_that_does_not_start_is_a_backend_down_that_resumes_not_a_bug(tmp_path, monkeypatch, capsys):
    """A local node that times out starting (seen on a loaded 2-core machine): exit 3 with one line
    naming Ray and how to resume, Ray shut down, its temp folder gone, nothing written as done."""
    fresh_data_dir(monkeypatch, tmp_path / "data")
    shutdowns, temp_dirs = [], []

    def timed_out(*args, **kwargs):
        temp_dirs.append(kwargs["_temp_dir"])
        # Ray raises this plain type, with this text.
        raise Exception("The current node timed out during startup. This could happen because some of "
                        "the raylet failed to startup or the GCS has become overloaded.\nsecond line")

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", timed_out)
    monkeypatch.setattr(ray, "shutdown", lambda: shutdowns.append(True))
    config = grid(write_beir(tmp_path / "beir", DOCS, QUESTIONS), chunkers=["document"], retrievers=["bm25"])
    path = tmp_path / "grid.yaml"
    path.write_text(json.dumps(config), encoding="utf-8")
    assert main(["run", str(path), "--out", str(tmp_path / "out"), "--quiet", "--executor", "ray"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("error: Ray did not start (a local Ray on 127.0.0.1): The current node timed out during "
                          "startup."), err
    assert "run the same command again to resume" in err and "--executor local" in err
    assert "bug in ragkit" not in err and "second line" not in err and err.count("\n") == 1
    assert shutdowns and temp_dirs and not Path(temp_dirs[0]).exists()
    scores = tmp_path / "out" / "scores"
    assert not scores.exists() or ResultStore(tmp_path / "out").read("scores").empty
