"""Processes sharing one data directory (issue 11, item 5).

Two experiments that share a corpus, its chunk sets and an embedder run at the same time (two CLI
runs, or a dashboard job and a CLI run) and finish with the results of running them one after the
other, each chunk set and index built once; two ingests into one corpus lose no document; a
second writer of a results folder is refused at once, naming the first.
"""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragkit.app.jobs import JobManager, _process_alive
from ragkit.corpus.store import CorpusStore
from ragkit.embedders.base import embedders
from ragkit.errors import LockTimeout
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import component_key
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from ragkit.settings import get_settings
from ragkit.storage.locks import content_lock
from tests.factories import tiny_experiment, write_beir
from tests.held_run import child_env

VOCABULARY = """river mountain copper violin harbour lantern orchard glacier falcon meadow
    compass thunder velvet canyon ember willow quartz saddle beacon tundra marble pepper
    anchor blossom cobalt desert feather granite horizon island jasmine kettle ladder""".split()
SHARED = {
    "chunkers": [{"type": "token", "params": {"chunk_size": 24, "chunk_overlap": 4}},
                 {"type": "sentence", "params": {"chunk_size": 24, "chunk_overlap": 0}}],
    "embedders": ["minilm"],
    "shard_size": 5,
}
# Both need the same two chunk sets and the same two dense indexes; the first also builds bm25's.
EXPERIMENTS = {
    "first": {"retrievers": ["bm25", "dense"], "top_k": [5]},
    "second": {"retrievers": ["dense", "hybrid"], "top_k": [3]},
}
RUN_TIMEOUT_S = 240


def _dataset(folder: Path, n_docs: int = 20, n_questions: int = 10) -> Path:
    rng = random.Random(11)
    docs = {f"d{i:03}": " ".join(" ".join(rng.choices(VOCABULARY, k=8)) + "." for _ in range(4))
            for i in range(n_docs)}
    questions = {f"q{i:02}": (" ".join(rng.sample(docs[doc_id].replace(".", "").split(), 4)), doc_id)
                 for i, doc_id in enumerate(list(docs)[:n_questions])}
    return write_beir(folder, docs, questions)


def experiments(dataset: Path) -> dict[str, dict]:
    """name -> the experiment's config over ``dataset``."""
    source = {"path": str(dataset), "format": "beir"}
    return {name: tiny_experiment(source, name, **SHARED, **fields) for name, fields in EXPERIMENTS.items()}


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


def _assert_same_results(folder: Path, reference: Path) -> None:
    got, want = ResultStore(folder), ResultStore(reference)
    for table, keys in (("scores", ["run_id", "question_id", "metric"]),
                        ("retrievals", ["run_id", "question_id", "rank"])):
        # Vectors come from batches of another composition: equal up to float rounding.
        pd.testing.assert_frame_equal(_sorted(got.read(table), keys), _sorted(want.read(table), keys))
    keys = ["run_id", "question_id", "stage"]
    stages = got.read("stages")
    assert not stages.duplicated(keys).any()
    pd.testing.assert_frame_equal(_sorted(stages[keys], keys), _sorted(want.read("stages")[keys], keys))


@pytest.fixture(scope="module")
def sequential(tmp_path_factory) -> dict:
    """The two experiments run one after the other in a fresh data directory."""
    root = tmp_path_factory.mktemp("sequential")
    dataset = _dataset(root / "beir")
    reports = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAGKIT_DATA_DIR", str(root / "data"))
        get_settings.cache_clear()
        for name in EXPERIMENTS:
            reports[name] = run_experiment(config_from_dict(experiments(dataset)[name]), root / name)
    get_settings.cache_clear()
    return {"root": root, "reports": reports}


def _cli(config: dict, out: Path, log: Path) -> subprocess.Popen:
    config_path = out.with_suffix(".yaml")
    config_path.write_text(yaml.safe_dump(config))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log.open("wb") as handle:
        return subprocess.Popen([sys.executable, "-m", "ragkit.cli", "run", str(config_path), "--out", str(out),
                                 "--quiet"], stdout=handle, stderr=subprocess.STDOUT, env=env)


def _wait_for_line(log: Path, text: str, process_alive) -> None:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while text not in (log.read_text(errors="replace") if log.exists() else ""):
        assert process_alive(), log.read_text(errors="replace")
        assert time.monotonic() < deadline, f"no {text!r} in {log}"
        time.sleep(0.05)


def _wait_for_waiters(trace: Path, count: int, alive, logs: dict[str, Path]) -> set[str]:
    """The processes that logged a lock wait, once there are ``count`` of them."""
    def waiting() -> set[str]:
        return {line.split()[0] for line in (trace.read_text() if trace.exists() else "").splitlines()}

    deadline = time.monotonic() + RUN_TIMEOUT_S
    while len(waiters := waiting()) < count:
        assert alive(), {name: log.read_text(errors="replace")[-2000:] for name, log in logs.items() if log.exists()}
        assert time.monotonic() < deadline, f"only {waiters} waited for a lock"
        time.sleep(0.05)
    return waiters


def _built(log: Path) -> tuple[int, int, int]:
    """(chunk sets built, indexes built, chunks embedded) from `ragkit run`'s closing line."""
    match = re.search(r"built (\d+) chunk set\(s\), (\d+) index\(es\); chunks embedded: (\d+)", log.read_text())
    assert match, log.read_text()
    return int(match[1]), int(match[2]), int(match[3])


@pytest.mark.integration
@pytest.mark.parametrize("first_by", ["dashboard job", pytest.param("cli", marks=pytest.mark.slow)])
def test_two_experiments_sharing_chunk_sets_and_an_embedder_at_once_equal_one_after_the_other(
        first_by, sequential, tmp_path, isolated_data_dir, monkeypatch):
    dataset = sequential["root"] / "beir"
    outs = {name: tmp_path / name for name in EXPERIMENTS}
    logs = {name: tmp_path / f"{name}.log" for name in EXPERIMENTS}
    # Hold the embedder's lock until both runs wait for a lock, so both want the same chunk sets and
    # indexes at the same moment rather than one finishing before the other starts. Each child logs
    # the locks it had to wait for (tests/child_hooks/sitecustomize.py): the proof they overlapped.
    trace = tmp_path / "lock-waits.log"
    for name, value in child_env(RAGKIT_TEST_LOCK_LOG=str(trace)).items():
        monkeypatch.setenv(name, value)  # for both children: the CLI run and the dashboard's job
    embedder_key = component_key(embedders, embedders.resolve("minilm"))
    with content_lock(isolated_data_dir, "embedder", embedder_key):
        second = _cli(experiments(dataset)["second"], outs["second"], logs["second"])
        if first_by == "cli":
            first = _cli(experiments(dataset)["first"], outs["first"], logs["first"])
            first_alive, wait_first = (lambda: first.poll() is None), (lambda: first.wait(RUN_TIMEOUT_S))
        else:
            manager = JobManager()
            job = manager.start(experiments(dataset)["first"], out_dir=outs["first"])
            logs["first"] = manager.jobs_dir / job.job_id / "log.txt"
            first_alive = lambda: manager.get(job.job_id).state in ("queued", "running")  # noqa: E731
            wait_first = lambda: _wait_for_job(manager, job)  # noqa: E731
        alive = {"first": first_alive, "second": lambda: second.poll() is None}
        waiters = _wait_for_waiters(trace, 2, lambda: all(check() for check in alive.values()), logs)
    # Both runs were blocked on a lock at once; neither could finish, as both need the embedder held here.
    assert len(waiters) == 2 and f"embedder/{embedder_key}.lock" in trace.read_text()

    assert second.wait(RUN_TIMEOUT_S) == 0, logs["second"].read_text()
    assert wait_first() == 0, logs["first"].read_text()
    for name in EXPERIMENTS:
        _assert_same_results(outs[name], sequential["root"] / name)
    # Each chunk set and index was built once, each chunk embedded once, across both processes.
    reports = sequential["reports"].values()
    assert [sum(counts) for counts in zip(*(_built(log) for log in logs.values()))] == [
        sum(r.chunksets_built for r in reports), sum(r.indexes_built for r in reports),
        sum(r.chunks_embedded for r in reports)]
    assert not list(isolated_data_dir.glob("**/.building/*"))  # no staging leftover


def _wait_for_job(manager: JobManager, job) -> int:
    deadline = time.monotonic() + RUN_TIMEOUT_S
    while (info := manager.get(job.job_id)).state in ("queued", "running") or _process_alive(job.pid):
        # "done" is written just before the child prints its closing line: wait for it to exit
        assert time.monotonic() < deadline, info.log_tail
        time.sleep(0.1)
    return 0 if info.state == "done" else 1


INGEST = """
import sys, time
from pathlib import Path
from ragkit.corpus.store import CorpusStore
folder, ready, go = map(Path, sys.argv[1:])
store = CorpusStore()
ready.touch()
while not go.exists():
    time.sleep(0.002)
print(store.ingest([folder], name="shared").ingested_count)
"""


@pytest.mark.integration
def test_two_ingests_into_one_corpus_at_once_lose_no_document(tmp_path):
    batches = []
    for batch in ("a", "b"):
        folder = tmp_path / batch
        folder.mkdir()
        for i in range(40):
            (folder / f"{batch}{i:02}.txt").write_text(f"document {i} of batch {batch}: " + "words " * 50)
        batches.append(folder)
    go = tmp_path / "go"
    # Both import first and start ingesting on the same signal, so they overlap.
    children = [subprocess.Popen([sys.executable, "-c", INGEST, str(folder), str(tmp_path / f"{folder.name}.ready"),
                                  str(go)], stdout=subprocess.PIPE, text=True) for folder in batches]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"{folder.name}.ready").exists() for folder in batches):
        assert time.monotonic() < deadline and all(child.poll() is None for child in children)
        time.sleep(0.01)
    go.touch()
    assert [child.communicate(timeout=120)[0].strip() for child in children] == ["40", "40"]

    corpus = CorpusStore().load("shared")
    assert sorted(document.id_ for document in corpus.documents) == sorted(
        f"{batch}{i:02}.txt" for batch in ("a", "b") for i in range(40))


@pytest.mark.integration
def test_a_second_run_into_a_busy_results_folder_is_refused_naming_the_first(tmp_path):
    dataset = _dataset(tmp_path / "beir", n_docs=5, n_questions=3)
    config = tmp_path / "e.yaml"
    config.write_text(yaml.safe_dump({"name": "busy", "dataset": {"path": str(dataset), "format": "beir"},
                                      "retrievers": ["bm25"], "embedders": []}))
    out = tmp_path / "out"
    with ResultStore(out).writer_lock():
        result = subprocess.run([sys.executable, "-m", "ragkit.cli", "run", str(config), "--out", str(out), "--quiet"],
                                capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr
    assert lines[0].startswith(f"error: results folder {out} is in use by process {os.getpid()} (")
    assert "wait for that run to finish or write to another folder" in lines[0]
    assert not (out / "runs").exists()
    assert "waited" not in lines[0]  # refused at once: a lock taken with a timeout says how long it waited

    # Once the first writer is gone the folder is free again.
    run_experiment(config_from_dict(yaml.safe_load(config.read_text())), out)
    assert not ResultStore(out).read("scores").empty


@pytest.mark.unit
def test_a_waiter_that_gives_up_names_what_it_waited_for_and_who_holds_it(tmp_path):
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with content_lock(tmp_path, "index", "abc123"):
            held.set()
            release.wait(10)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        held.wait(10)
        with pytest.raises(LockTimeout) as caught:
            with content_lock(tmp_path, "index", "abc123", timeout=0.2):
                pass
    finally:
        release.set()
        thread.join()
    message = str(caught.value)
    assert message.startswith(f"index abc123 is in use by process {os.getpid()} (")
    assert message.endswith("(waited 0.2 s)")
    with content_lock(tmp_path, "index", "abc123", timeout=0):  # released with its holder
        pass


HOLD = """
import sys, time
from pathlib import Path
from ragkit.storage.locks import content_lock
with content_lock(Path(sys.argv[1]), "chunkset", "k"):
    print("held", flush=True)
    time.sleep(600)
"""


@pytest.mark.unit
def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "held"
    with pytest.raises(LockTimeout, match=f"chunkset k is in use by process {child.pid}"):
        with content_lock(tmp_path, "chunkset", "k", timeout=0):
            pass
    child.send_signal(signal.SIGKILL)
    child.wait()
    with content_lock(tmp_path, "chunkset", "k", timeout=1):
        pass
