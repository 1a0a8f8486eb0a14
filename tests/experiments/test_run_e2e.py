"""End to end on the bundled sample: real chunkers, real MiniLM, real LanceDB, real results.

The data directory is shared within this module so the sample is embedded once.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from tests.factories import write_beir

pytestmark = pytest.mark.integration

SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"

SMALL = {
    "name": "small",
    "dataset": {"path": str(SAMPLE_DATASET), "format": "squad", "limit": 24},
    "chunkers": [{"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 32}}, "recursive"],
    "retrievers": ["bm25", "dense"],
    "top_k": [5],
    "shard_size": 8,
}


@pytest.fixture(scope="module")
def shared_data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("shared-data")


@pytest.fixture(autouse=True)
def use_shared_data_dir(shared_data_dir, monkeypatch):
    from ragkit.settings import get_settings

    monkeypatch.setenv("RAGKIT_DATA_DIR", str(shared_data_dir))
    get_settings.cache_clear()


def _sorted(frame: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    return frame.sort_values(keys).reset_index(drop=True)


def test_run_then_rerun_computes_nothing(tmp_path, monkeypatch):
    from ragkit.settings import get_settings

    # Its own data directory: it asserts that a first run embeds, which the module's shared one
    # cannot promise once another test (any order) has embedded the same chunks there.
    monkeypatch.setenv("RAGKIT_DATA_DIR", str(tmp_path / "data"))
    get_settings.cache_clear()
    config = config_from_dict(SMALL)
    first = run_experiment(config, tmp_path / "out")
    assert first.runs_total == 4 and first.runs_computed == 4
    assert first.chunks_embedded > 0
    store = ResultStore(tmp_path / "out")
    scores = store.read("scores")
    assert scores.groupby("run_id")["question_id"].nunique().tolist() == [24] * 4
    assert {"recall@5", "ndcg@5", "mrr", "span_recall@5", "span_mrr"} <= set(scores["metric"])
    assert scores["error"].isna().all()
    # every retrieved chunk is an exact span of its document: offsets inside the document
    retrievals = store.read("retrievals")
    assert (retrievals["end_char"] > retrievals["start_char"]).all()
    assert retrievals.groupby(["run_id", "question_id"])["rank"].max().max() == 5

    second = run_experiment(config, tmp_path / "out")
    assert second.nothing_to_do and second.chunks_embedded == 0 and second.questions_computed == 0
    pd.testing.assert_frame_equal(
        _sorted(store.read("scores"), ["run_id", "question_id", "metric"]),
        _sorted(scores, ["run_id", "question_id", "metric"]),
    )


def test_same_chunks_are_not_embedded_again_in_another_experiment(tmp_path):
    run_experiment(config_from_dict(SMALL), tmp_path / "a")
    other = config_from_dict({**SMALL, "name": "other", "retrievers": ["hybrid"], "top_k": [3]})
    report = run_experiment(other, tmp_path / "b")
    assert report.runs_computed == 2 and report.chunks_embedded == 0


# RAGKIT_KILL_SEED replays the kill test with other kill moments (and another dataset) to hunt windows.
KILL_SEED = int(os.environ.get("RAGKIT_KILL_SEED", "20261123"))
KILLS_PER_ROUND = 4
KILL_WORDS = """river mountain copper violin harbour lantern orchard glacier falcon meadow compass thunder
    velvet canyon ember willow quartz saddle beacon tundra marble pepper anchor blossom cobalt""".split()


def _kill_dataset(folder: Path) -> Path:
    """40 short documents and 60 questions: building takes a moment, answering many small shards."""
    rng = random.Random(KILL_SEED)
    docs = {f"d{i:02}": " ".join(" ".join(rng.choices(KILL_WORDS, k=9)) + "." for _ in range(6)) for i in range(40)}
    questions = {f"q{i:02}": (" ".join(rng.sample(docs[f"d{i % 40:02}"].replace(".", "").split(), 4)), f"d{i % 40:02}")
                 for i in range(60)}
    return write_beir(folder, docs, questions)


def _committed_questions(out: Path) -> int:
    """(run, question) pairs the folder has committed, from its markers: shard markers come and go
    as a finished run's parts are compacted into one, so their number says nothing by itself."""
    pairs = set()
    for marker in (out / "_commits").glob("*.json"):
        record = json.loads(marker.read_text())
        pairs.update((record["run_id"], question_id) for question_id in record["question_ids"])
    return len(pairs)


def _kill_phase(data_dir: Path, out: Path, questions_total: int) -> str:
    """Where a kill landed, from what was on disk just after it."""
    if list(data_dir.glob("derived/*/lancedb/.building/*")):
        return "building an index"
    committed = _committed_questions(out) if (out / "_commits").exists() else 0
    if committed:
        return "between commits" if committed < questions_total else "after the last commit"
    if list(data_dir.glob("derived/*/lancedb/*.ready")):
        return "index built, no commit yet"
    return "chunking" if (data_dir / "derived").exists() else "before chunking"


def _assert_same_rows(table: str, resumed: pd.DataFrame, uninterrupted: pd.DataFrame, keys: list[str],
                      phases: list[str]) -> None:
    """Equal tables; else the rows only one side has, and where this round's kills landed."""
    resumed, uninterrupted = _sorted(resumed, keys), _sorted(uninterrupted, keys)
    try:
        pd.testing.assert_frame_equal(resumed, uninterrupted)
    except AssertionError:
        sides = resumed[keys].merge(uninterrupted[keys], how="outer", indicator=True)
        side = {"left_only": "resumed only", "right_only": "uninterrupted only", "both": "both"}
        sides["_merge"] = sides["_merge"].astype(str).map(side)
        differ = sides[sides["_merge"] != "both"]
        raise AssertionError(f"{table}: {len(resumed)} rows resumed, {len(uninterrupted)} uninterrupted; kills of this "
                             f"round landed {phases}; rows on one side only:\n{differ.to_string()}") from None


def _assert_caches_whole(data_dir: Path, reference_data: Path) -> None:
    """Every chunk set and index on disk is complete: equal to the uninterrupted run's."""
    import lancedb

    def chunksets(root: Path) -> dict[str, pd.DataFrame]:
        return {p.name: pd.read_parquet(p) for p in root.glob("derived/*/chunksets/*.parquet")}

    got, want = chunksets(data_dir), chunksets(reference_data)
    assert got.keys() == want.keys()
    for name in got:
        pd.testing.assert_frame_equal(got[name], want[name])
    for lance_dir in data_dir.glob("derived/*/lancedb"):
        tables = sorted(p.name.removesuffix(".lance") for p in lance_dir.glob("chunks_*.lance"))
        assert tables == sorted(p.name.removesuffix(".ready") for p in lance_dir.glob("chunks_*.ready"))
        db = lancedb.connect(lance_dir)
        for name in tables:
            marker = json.loads((lance_dir / f"{name}.ready").read_text())
            assert db.open_table(name).count_rows() == marker["rows"]
        assert not list(lance_dir.glob(".building/*")), "a staging leftover outlived its rebuild"
    for record in data_dir.glob("derived/*/steps/*.json"):
        json.loads(record.read_text())


# A warm parent that forks one `ragkit run` per attempt: importing ragkit, LlamaIndex and LanceDB
# costs seconds of CPU, 20 times over in a fresh interpreter each; a forked child starts at once
# and is killed exactly like a CLI process. It answers, one line per command on stdin:
#   start DATA_DIR OUT LOG -> the child's pid    poll PID -> "running" or its exit code
#   wait PID -> its exit code (negative: the signal that ended it)
FORKING_RUNNER = r"""
import os, sys, traceback, warnings
# LanceDB resets its runtime in a forked child and warns; nothing runs in this parent to be reset.
warnings.filterwarnings("ignore", message="lancedb fork support is experimental")
import lancedb, lancedb.index, pandas, pyarrow.dataset, tqdm  # noqa: F401 - warm imports for every child
import ragkit.analysis.failures, ragkit.analysis.summary, ragkit.cli, ragkit.experiments.runner  # noqa: F401
from ragkit.chunkers.token import cl100k_encoding
from ragkit.settings import get_settings

cl100k_encoding()
config, status = sys.argv[1:]
print("ready", flush=True)
for line in sys.stdin:
    verb, *args = line.split()
    if verb == "start":
        data_dir, out, log = args
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(fd, 1)
                os.dup2(fd, 2)
                os.environ["RAGKIT_DATA_DIR"] = data_dir
                get_settings.cache_clear()
                code = ragkit.cli.main(["run", config, "--out", out, "--quiet", "--status-file", status])
            except BaseException:
                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        print(pid, flush=True)
    else:
        pid, status_code = os.waitpid(int(args[0]), os.WNOHANG if verb == "poll" else 0)
        print(os.waitstatus_to_exitcode(status_code) if pid else "running", flush=True)
"""


class ForkingRunner:
    def __init__(self, config: Path, status: Path, log: Path) -> None:
        self.status, self.log = status, log
        self._process = subprocess.Popen([sys.executable, "-c", FORKING_RUNNER, str(config), str(status)],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert self._ask("") == "ready"

    def _ask(self, command: str) -> str:
        if command:
            self._process.stdin.write(command + "\n")
            self._process.stdin.flush()
        return self._process.stdout.readline().strip()

    def start(self, data_dir: Path, out: Path) -> int:
        self.status.unlink(missing_ok=True)
        return int(self._ask(f"start {data_dir} {out} {self.log}"))

    def working(self, pid: int) -> None:
        """Wait for ``pid``'s status file: its config is loaded and the executor about to start."""
        deadline = time.monotonic() + 120
        while not self.status.exists():
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.005)

    def running(self, pid: int) -> bool:
        answer = self._ask(f"poll {pid}")
        assert answer in ("running", "0"), self.log.read_text()[-3000:]
        return answer == "running"

    def wait(self, pid: int) -> int:
        return int(self._ask(f"wait {pid}"))

    def finish(self, pid: int, timeout_s: float) -> int:
        """Its exit code once it ends; a run still going after ``timeout_s`` is killed and fails the
        test with its log, rather than hanging it."""
        deadline = time.monotonic() + timeout_s
        while self.running(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                self.wait(pid)
                log = self.log.read_text()[-3000:]
                raise AssertionError(f"a resumed run still going after {timeout_s:.0f} s:\n{log}")
            time.sleep(0.05)
        return 0

    def close(self) -> None:
        self._process.stdin.close()
        self._process.wait(30)


@pytest.mark.parametrize("kills", [1, pytest.param(20, marks=pytest.mark.slow)])
def test_kill_minus_9_at_random_points_then_resume_equals_an_uninterrupted_run(kills, tmp_path):
    """SIGKILL `ragkit run` at random moments (seeded) while it works, and resume each time. A round
    (a fresh data directory and results folder) ends after a few kills, or sooner when an attempt
    finishes first, so kills land while chunk sets and indexes are built as well as between
    shards. Each round ends with tables equal to an uninterrupted run's and whole caches."""
    config = {"name": "killed", "dataset": {"path": str(_kill_dataset(tmp_path / "beir")), "format": "beir"},
              "chunkers": [{"type": "token", "params": {"chunk_size": 48, "chunk_overlap": 8}}, "sentence"],
              "embedders": [], "retrievers": ["bm25"], "top_k": [5], "shard_size": 2}
    config_path = tmp_path / "e.yaml"
    config_path.write_text(yaml.safe_dump(config))
    runner = ForkingRunner(config_path, tmp_path / "status.json", tmp_path / "attempt.log")

    # The uninterrupted run, timed from the status file to its first commit (building) and to its
    # end (working): the windows kills fall in. The first commit is seen while it runs: a finished
    # run's shard markers are compacted into one, whose time is the run's end, not its first commit.
    pid = runner.start(tmp_path / "reference-data", tmp_path / "reference")
    runner.working(pid)
    began = time.time()
    first_commit = None
    while runner.running(pid):
        if first_commit is None and any((tmp_path / "reference" / "_commits").glob("*.json")):
            first_commit = time.time()
        time.sleep(0.01)
    working_s = time.time() - began
    building_s = (first_commit or time.time()) - began
    questions_total = _committed_questions(tmp_path / "reference")
    reference_commits = sorted(p.name for p in (tmp_path / "reference" / "_commits").glob("*.json"))

    rng = random.Random(KILL_SEED)
    phases: list[str] = []
    rounds = 0
    while len(phases) < kills:
        rounds += 1
        # A round ends early when an attempt finishes before its kill (the machine got faster than
        # the reference run): bounded, so a run of such rounds fails instead of looping for ever.
        assert rounds <= 3 * kills, f"{rounds - 1} rounds for {len(phases)} of {kills} kills: {phases}"
        round_phases: list[str] = []
        data_dir, out = tmp_path / f"round{rounds}" / "data", tmp_path / f"round{rounds}" / "out"
        round_kills = 0
        while True:
            pid = runner.start(data_dir, out)
            if len(phases) == kills or round_kills == KILLS_PER_ROUND:
                code = runner.finish(pid, 10 * working_s + 120)  # the round's last attempt runs to the end
                break
            runner.working(pid)
            # A round's first kill falls before the first commit, while chunk sets and indexes are built.
            time.sleep(rng.uniform(0, working_s if round_kills else building_s))
            if not runner.running(pid):
                code = 0  # it finished before its kill: this round is complete
                break
            os.kill(pid, signal.SIGKILL)
            code = runner.wait(pid)
            if code == 0:
                break  # it finished just before the kill
            assert code == -signal.SIGKILL, runner.log.read_text()[-3000:]
            round_phases.append(_kill_phase(data_dir, out, questions_total))
            phases.append(round_phases[-1])
            round_kills += 1
        assert code == 0, runner.log.read_text()[-3000:]

        for table, keys in (("scores", ["run_id", "question_id", "metric"]),
                            ("retrievals", ["run_id", "question_id", "rank"]),
                            ("stages", ["run_id", "question_id", "stage"])):
            resumed, uninterrupted = ResultStore(out).read(table), ResultStore(tmp_path / "reference").read(table)
            assert not resumed.duplicated(keys).any(), f"duplicated {table} rows"
            if table == "stages":  # seconds differ from run to run: the same rows, no lost or extra ones
                resumed, uninterrupted = resumed[keys], uninterrupted[keys]
            _assert_same_rows(table, resumed, uninterrupted, keys, round_phases)
        # The same committed parts: each finished run compacted into one, as the uninterrupted run's.
        assert sorted(p.name for p in (out / "_commits").glob("*.json")) == reference_commits, round_phases
        _assert_caches_whole(data_dir, tmp_path / "reference-data")
    runner.close()
    print(f"{len(phases)} kills in {rounds} round(s): {dict(Counter(phases))}")
