"""A run killed between two writes a resumed run depends on, replayed deterministically: the kill
is an exception raised at the second write (as tests/artefacts/test_index_scale.py does for the full-text
marker). Each resumed folder must read as an uninterrupted run's (same rows; ``cached`` flags and
seconds may differ) and hold the same committed parts. The random kill -9 test
(test_run_e2e.py) finds windows; these pin the ones it found or the audit did."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from ragkit.storage.folders import LocalFolder
from tests.factories import tiny_experiment, write_beir

pytestmark = pytest.mark.integration

WORDS = ["cat", "dog", "cow", "owl", "fox", "bee", "ant", "elk", "emu", "yak", "ram", "hen"]
DOCS = {f"d{i}": f"The {name} is an animal number {i}. It lives with the {WORDS[i - 1]}."
        for i, name in enumerate(WORDS)}
QUESTIONS = {f"q{i}": (f"which animal is {name}", f"d{i}") for i, name in enumerate(WORDS)}
KEYS = {"scores": ["run_id", "question_id", "metric"], "retrievals": ["run_id", "question_id", "rank"],
        "stages": ["run_id", "question_id", "stage"], "judgements": ["run_id", "question_id", "doc_id"]}


class Killed(BaseException):
    """The process dies here (a BaseException, as KeyboardInterrupt: nothing catches it)."""


@pytest.fixture
def config(tmp_path):
    dataset = write_beir(tmp_path / "beir", DOCS, QUESTIONS)
    return config_from_dict(tiny_experiment(dataset, "windows", chunkers=["document", "sentence"], top_k=[3],
                                            shard_size=4))


def _rows(out: Path, table: str) -> pd.DataFrame:
    frame = ResultStore(out).read(table)
    keys = [key for key in KEYS[table] if key in frame.columns]
    if table in ("stages", "judgements"):  # seconds and cached flags differ between runs
        frame = frame[keys]
    return frame.sort_values(keys).reset_index(drop=True)


def _commits(out: Path) -> dict[str, int]:
    """Committed marker files per run (a finished run has one: its compacted part)."""
    counts: dict[str, int] = {}
    for marker in (out / "_commits").glob("*.json"):
        run_id = marker.stem.rsplit("-", 1)[0]
        counts[run_id] = counts.get(run_id, 0) + 1
    return counts


def _assert_as_uninterrupted(out: Path, reference: Path) -> None:
    for table in KEYS:
        pd.testing.assert_frame_equal(_rows(out, table), _rows(reference, table), obj=table)
    assert _commits(out) == _commits(reference)
    for table in KEYS:  # no part file outlives its marker (what a compaction replaced is removed)
        assert {p.stem for p in (out / table).glob("*.parquet")} == {p.stem for p in (out / "_commits").glob("*.json")}


def test_a_run_killed_after_its_last_commit_is_compacted_by_the_resumed_run(config, tmp_path, isolated_data_dir,
                                                                             monkeypatch):
    reference = tmp_path / "reference"
    run_experiment(config, reference)
    assert set(_commits(reference).values()) == {1}

    def killed(self, run_id):
        raise Killed

    with monkeypatch.context() as patched:
        patched.setattr(ResultStore, "compact_run", killed)
        with pytest.raises(Killed):
            run_experiment(config, tmp_path / "out")
    assert max(_commits(tmp_path / "out").values()) == 3  # the first run's three shards, uncompacted
    resumed = run_experiment(config, tmp_path / "out")
    assert resumed.questions_computed == len(QUESTIONS)  # the second run only
    _assert_as_uninterrupted(tmp_path / "out", reference)


def test_a_compaction_killed_while_removing_the_replaced_parts_is_finished_by_the_resumed_run(
        config, tmp_path, isolated_data_dir, monkeypatch):
    reference = tmp_path / "reference"
    run_experiment(config, reference)
    deleted = []
    delete = LocalFolder.delete

    def killed_on_the_second_delete(self, relative):
        if deleted:
            raise Killed
        deleted.append(relative)
        delete(self, relative)

    with monkeypatch.context() as patched:
        patched.setattr(LocalFolder, "delete", killed_on_the_second_delete)
        with pytest.raises(Killed):
            run_experiment(config, tmp_path / "out")
    assert len(deleted) == 1 and max(_commits(tmp_path / "out").values()) == 3  # compacted + 2 replaced markers
    resumed = run_experiment(config, tmp_path / "out")
    assert resumed.questions_computed == len(QUESTIONS)
    _assert_as_uninterrupted(tmp_path / "out", reference)


def test_run_level_rows_come_back_when_the_part_that_carried_them_is_set_aside(config, tmp_path, isolated_data_dir,
                                                                                monkeypatch):
    """A run's build stage rows go with its first committed shard only. A run stopped midway whose
    first part is then found damaged (and set aside) must carry them again with its next commit."""
    reference = tmp_path / "reference"
    run_experiment(config, reference)
    out = tmp_path / "out"
    commits = []
    commit_shard = ResultStore.commit_shard

    def killed_on_the_third_commit(self, *args, **kwargs):
        if len(commits) == 2:
            raise Killed
        commits.append(args[0])
        commit_shard(self, *args, **kwargs)

    with monkeypatch.context() as patched:
        patched.setattr(ResultStore, "commit_shard", killed_on_the_third_commit)
        with pytest.raises(Killed):
            run_experiment(config, out)
    first = next(p for p in (out / "stages").glob("*.parquet") if pd.read_parquet(p)["question_id"].isna().any())
    (out / "scores" / first.name).write_bytes(b"not parquet")  # damaged: set aside by the next run
    resumed = run_experiment(config, out)
    assert [item.part for item in resumed.set_aside] == [first.stem]
    _assert_as_uninterrupted(out, reference)
