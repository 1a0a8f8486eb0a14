"""The windows of one chunk set embedded by several Ray workers at once (``embed`` steps,
``ragkit.artefacts.window_embedding``): the same index table, vectors byte for byte, and the same scores as
the in-process streamed build; the steps' wiring; nothing added for a chunk set of one window."""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from ragkit.artefacts.index import AnnParams
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import prepare, run_experiment
from ragkit.results import ResultStore
from ragkit.settings import get_settings

ray = pytest.importorskip("ray", reason="the test extra installs ray; without it the Ray executor cannot be tested")

SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
WINDOW_ROWS = 64


@pytest.fixture(scope="module")
def windowed_ray():
    """A local Ray as test_ray_executor starts it, its workers started with windows of 64 rows:
    a worker reads its settings from its own environment, which is the one Ray started with."""
    with pytest.MonkeyPatch.context() as env:
        env.setenv("RAY_AUTH_MODE", "disabled")
        env.setenv("RAGKIT_BUILD_WINDOW_ROWS", str(WINDOW_ROWS))
        temp_dir = tempfile.mkdtemp(prefix="ray", dir="/tmp")
        ray.init(num_cpus=2, _node_ip_address="127.0.0.1", _temp_dir=temp_dir, include_dashboard=False,
                 log_to_driver=False)
        yield ray
        ray.shutdown()
    shutil.rmtree(temp_dir, ignore_errors=True)


def sample_config(**extra) -> dict:
    """The sample's first 20 questions, token chunks of 128: several hundred chunks, several windows of 64."""
    return {"name": "windows", "dataset": {"path": str(SAMPLE_DATASET), "format": "beir", "limit": 20},
            "chunkers": [{"type": "token", "params": {"chunk_size": 128, "chunk_overlap": 16}}],
            "embedders": ["minilm"], "retrievers": ["dense"], "top_k": [5], "shard_size": 10, **extra}


def index_tables(derived: Path) -> dict[str, object]:
    import lancedb

    db = lancedb.connect(derived / "lancedb")
    return {marker.name.removesuffix(".ready"): db.open_table(marker.name.removesuffix(".ready")).to_arrow()
            for marker in sorted((derived / "lancedb").glob("chunks_*.ready"))}


def scores(out: Path) -> pd.DataFrame:
    columns = ["run_id", "question_id", "metric", "value", "error"]
    return ResultStore(out).read("scores")[columns].sort_values(columns[:3]).reset_index(drop=True)


@pytest.mark.integration
@pytest.mark.slow  # about 30 s of CPU: MiniLM embeds several hundred chunks twice, and Ray starts
def test_windows_embedded_on_several_workers_make_the_in_process_index(tmp_path, monkeypatch, windowed_ray):
    """A chunk set of several windows: its windows are embed steps spread over both workers, the
    index step embeds nothing, and the index table (vectors byte for byte), the scores and the
    count of chunks embedded are the in-process streamed build's. Both sides embed on one thread:
    a Ray actor has OMP_NUM_THREADS=1, and torch on 2 threads sums in another order."""
    import pyarrow.parquet as pq
    import torch

    from ragkit.experiments.ray_executor import RayExecutor

    monkeypatch.setenv("RAGKIT_BUILD_WINDOW_ROWS", str(WINDOW_ROWS))
    config = config_from_dict(sample_config())

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "local-data"))
    get_settings.cache_clear()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = run_experiment(config, tmp_path / "local")
    finally:
        torch.set_num_threads(threads)
    local_derived = next((tmp_path / "local-data" / "derived").iterdir())

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "ray-data"))  # nothing cached: the workers embed
    get_settings.cache_clear()
    plan, derived = prepare(config)
    executor = RayExecutor(derived, ResultStore(tmp_path / "ray"))
    report = executor.execute(plan)
    assert not report.errors and not local.errors

    [chunkset] = (derived / "chunksets").glob("*.parquet")
    windows = -(-pq.ParquetFile(chunkset).metadata.num_rows // WINDOW_ROWS)
    assert windows >= 3
    embedded_where = [worker["windows"] for worker in executor.worker_stats]
    assert sorted(number for numbers in embedded_where for _, number in numbers) == list(range(windows))
    assert sum(1 for numbers in embedded_where if numbers) == 2  # both workers embedded windows

    assert report.chunks_embedded == local.chunks_embedded > 0
    ray_tables, local_tables = index_tables(derived), index_tables(local_derived)
    assert ray_tables.keys() == local_tables.keys() and len(ray_tables) == 1
    for name, table in ray_tables.items():
        assert table.equals(local_tables[name], check_metadata=True), name  # the vectors byte for byte
    pd.testing.assert_frame_equal(scores(tmp_path / "ray"), scores(tmp_path / "local"))

    # The index's "embed" stage row counts its window steps' seconds (each window recorded its own
    # in the throughput measurement: the index step itself embedded nothing), not only its lookups.
    from ragkit.experiments.throughput import read_throughput

    [measured] = read_throughput(tmp_path / "ray-data")["embedders"].values()
    [step] = plan.index_steps
    timings = json.loads((derived / "steps" / f"{step.index_id}.json").read_text())
    assert timings["embed"] >= measured.seconds > 0


class ReadyIndexes:
    def __init__(self, ready=()):
        self.ready = set(ready)

    def is_ready(self, index_id: str) -> bool:
        return index_id in self.ready


def wiring(tmp_path):
    """Index steps of two chunk sets with one embedder, plus an ANN twin of the first chunk set's
    index (exact and ANN share chunk set and embedder), as the driver queues them."""
    from ragkit.experiments.ray_schedule import Step

    config = config_from_dict(sample_config(chunkers=["document", "sentence"], dataset={
        "path": str(SAMPLE_DATASET), "format": "beir", "limit": 2}))
    plan, _ = prepare(config)
    exact = plan.index_steps[0]
    twin = dataclasses.replace(exact, index_id=exact.index_id + "-ann", ann=AnnParams(kind="ivf_pq"))
    index_steps = [*plan.index_steps, twin]
    steps = [Step(("chunkset", s.chunkset_id), "build_chunkset", (s.chunkset_id, WINDOW_ROWS))
             for s in plan.index_steps]
    steps += [Step(("index", s.index_id), "build_index", (s.index_id,), (("chunkset", s.chunkset_id),))
              for s in index_steps]
    return SimpleNamespace(index_steps=index_steps), steps, exact, twin


@pytest.mark.unit
def test_each_window_is_one_step_that_every_index_of_the_pair_waits_for(tmp_path, monkeypatch):
    from ragkit.embedders.base import embedders
    from ragkit.experiments.plan import component_key
    from ragkit.experiments.ray_executor import WindowSteps

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    plan, steps, exact, twin = wiring(tmp_path)
    expand = WindowSteps(plan, steps, ReadyIndexes())
    chunkset_step = steps[0]
    added = expand(chunkset_step, {"built": True, "windows": 3})

    key = component_key(embedders, exact.embedder)
    window_keys = [("embed", exact.chunkset_id, key, number) for number in range(3)]
    assert [step.key for step in added] == window_keys  # once for the pair, not once per index
    assert all(step.method == "embed_window" and step.needs == (chunkset_step.key,) for step in added)
    assert [step.args[1:] for step in added] == [(0, WINDOW_ROWS), (1, WINDOW_ROWS), (2, WINDOW_ROWS)]
    by_index = {step.args[0]: step for step in steps if step.method == "build_index"}
    for index_id in (exact.index_id, twin.index_id):
        assert set(window_keys) <= set(by_index[index_id].needs)
        assert by_index[index_id].args == (index_id, True, 0.0)  # compacts the windows' commits first
    other = next(s for s in plan.index_steps if s.chunkset_id != exact.chunkset_id)
    assert by_index[other.index_id].needs == (("chunkset", other.chunkset_id),)  # another chunk set: untouched


@pytest.mark.unit
def test_index_steps_go_out_with_their_windows_seconds_summed(tmp_path, monkeypatch):
    """Each window step's seconds are added to every index step waiting for it (exact and ANN),
    so the index's "embed" stage row counts the embedding done on other workers."""
    from ragkit.experiments.ray_executor import WindowSteps

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    plan, steps, exact, twin = wiring(tmp_path)
    expand = WindowSteps(plan, steps, ReadyIndexes())
    added = expand(steps[0], {"built": True, "windows": 3})
    for window, seconds in zip(added, (1.5, 0.25, 2.0)):
        assert expand(window, {"embedded": 7, "seconds": seconds}) == []
    assert expand(added[0], {"embedded": 0, "seconds": 9.0}) == []  # a step given back once counts once
    by_index = {step.args[0]: step for step in steps if step.method == "build_index"}
    assert by_index[exact.index_id].args == (exact.index_id, True, 3.75)
    assert by_index[twin.index_id].args == (twin.index_id, True, 3.75)


@pytest.mark.unit
def test_one_window_or_built_indexes_add_no_step(tmp_path, monkeypatch):
    from ragkit.experiments.ray_executor import WindowSteps

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    plan, steps, exact, twin = wiring(tmp_path)
    before = [(step.needs, step.args) for step in steps]
    assert WindowSteps(plan, steps, ReadyIndexes())(steps[0], {"built": True, "windows": 1}) == []
    built = ReadyIndexes({exact.index_id, twin.index_id})
    assert WindowSteps(plan, steps, built)(steps[0], {"built": False, "windows": 5}) == []
    assert [(step.needs, step.args) for step in steps] == before


@pytest.mark.unit
def test_a_worker_cuts_the_drivers_windows_whatever_its_own_environment_says(tmp_path, monkeypatch):
    """The window size comes with the steps: a worker whose environment says windows of 1,000
    rows (a Ray started before the variable was set, a remote cluster) counts and embeds the
    driver's windows of 64."""
    import pyarrow.parquet as pq

    from ragkit.experiments import ray_worker
    from ragkit.experiments.executor import PendingRun
    from ragkit.experiments.ray_executor import plan_steps

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAGKIT_BUILD_WINDOW_ROWS", str(WINDOW_ROWS))  # the driver's setting
    get_settings.cache_clear()
    plan, derived = prepare(config_from_dict(sample_config()))
    todo = [PendingRun(run, list(plan.questions.questions), 0, True) for run in plan.runs]
    steps = plan_steps(plan, todo, {}, get_settings().build_window_rows)
    [chunkset_step] = [step for step in steps if step.method == "build_chunkset"]

    monkeypatch.setenv("RAGKIT_BUILD_WINDOW_ROWS", "1000")  # the worker's own environment
    get_settings.cache_clear()
    monkeypatch.setattr(ray, "get", lambda ref: plan)  # the plan "from the object store"
    worker = ray_worker.PlanWorker(str(derived), str(tmp_path / "data"))
    outcome = worker.build_chunkset([None], *chunkset_step.args)
    [path] = (derived / "chunksets").glob("*.parquet")
    rows = pq.ParquetFile(path).metadata.num_rows
    assert rows <= 1000  # one window by the worker's own setting
    assert outcome["windows"] == -(-rows // WINDOW_ROWS) > 1

    cut: list[int] = []
    monkeypatch.setattr(ray_worker, "embed_window", lambda *args: (cut.append(args[2]), (0, 0.0))[1])
    monkeypatch.setattr(worker.executor.components, "embedder", lambda spec: object())
    [index_step] = plan.index_steps
    worker.embed_window([None], index_step.index_id, 1, chunkset_step.args[1])
    assert cut == [WINDOW_ROWS]
