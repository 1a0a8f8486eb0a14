"""Results are keyed per (run, question content): a question set that grows, shrinks or has a
question edited recomputes exactly the questions that are new at their content, and reading
the folder shows each run's current set only, with no row twice."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.analysis.loading import load_results
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.runner import run_experiment
from ragkit.results import ResultStore
from tests.factories import tiny_experiment, write_beir

pytestmark = pytest.mark.integration

ANIMALS = ["cat", "dog", "cow", "owl", "fox", "bee", "ant", "elk", "emu", "yak", "ram", "hen", "eel", "bat"]
DOCS = {f"d{i}": f"The {name} is an animal number {i}." for i, name in enumerate(ANIMALS)}


def questions(ids: range, edited: dict[int, str] | None = None) -> dict[str, tuple[str, str]]:
    edited = edited or {}
    return {f"q{i}": (edited.get(i, f"which animal is {ANIMALS[i]}"), f"d{i}") for i in ids}


def experiment(tmp_path: Path, name: str, qs: dict[str, tuple[str, str]]) -> object:
    """Two runs (bm25 top 1 and 3) over a BEIR folder of its own, same corpus every time."""
    dataset = write_beir(tmp_path / name, DOCS, qs)
    return config_from_dict(tiny_experiment(dataset, "grow", shard_size=3))


def scored(out: Path) -> dict[str, list[str]]:
    results = load_results(out)
    mrr = results.scores_of(["mrr"])
    return {run: sorted(mrr.loc[mrr["run_id"] == run, "question_id"].astype(str))
            for run in results.runs["run_id"].astype(str)}


def test_adding_removing_and_editing_questions_computes_only_what_is_new(tmp_path, isolated_data_dir):
    out = tmp_path / "out"
    first = run_experiment(experiment(tmp_path, "four", questions(range(4))), out)
    assert first.runs_total == 2 and first.questions_computed == 8

    # Ten questions added: exactly ten per run are answered, and the run ids do not change.
    grown = run_experiment(experiment(tmp_path, "fourteen", questions(range(14))), out)
    assert grown.runs_total == 2 and grown.questions_computed == 20
    runs = scored(out)
    assert len(runs) == 2 and all(ids == sorted(f"q{i}" for i in range(14)) for ids in runs.values())
    assert len(load_results(out).questions) == 14

    # Three removed: nothing is computed, and the folder reads as the smaller set.
    shrunk = run_experiment(experiment(tmp_path, "eleven", questions(range(11))), out)
    assert shrunk.questions_computed == 0
    assert all(ids == sorted(f"q{i}" for i in range(11)) for ids in scored(out).values())
    assert sorted(load_results(out).questions["question_id"]) == sorted(f"q{i}" for i in range(11))

    # One question's text edited: that one is answered again, and read once, at its new content.
    edited = run_experiment(experiment(tmp_path, "edited", questions(range(11), {2: "which animal is a cow"})), out)
    assert edited.questions_computed == 2
    mrr = load_results(out).scores_of(["mrr"])
    assert len(mrr) == 22 and not mrr.duplicated(["run_id", "question_id"]).any()
    answers = ResultStore(out).read("retrievals")
    assert not answers.duplicated(["run_id", "question_id", "rank"]).any()

    # The removed questions and q2's original text come back: every row is reused, read once.
    back = run_experiment(experiment(tmp_path, "fourteen-again", questions(range(14))), out)
    assert back.questions_computed == 0
    assert all(ids == sorted(f"q{i}" for i in range(14)) for ids in scored(out).values())
    texts = load_results(out).questions.set_index("question_id")["text"]
    assert texts["q2"] == "which animal is cow"


def test_rows_carry_their_question_key_and_run_level_rows_have_none(tmp_path, isolated_data_dir):
    out = tmp_path / "out"
    run_experiment(experiment(tmp_path, "two", questions(range(2))), out)
    assert not (out / "_merged").exists()  # two runs: below MERGE_MIN_PARTS, parts are read directly
    store = ResultStore(out)
    scores = store.read("scores")
    keys = store.read("questions").set_index("question_id")["question_key"]
    assert (scores["question_key"] == scores["question_id"].map(keys)).all()
    stages = store.read("stages")
    assert stages.loc[stages["question_id"].isna(), "question_key"].isna().all()
    assert stages.loc[stages["question_id"].notna(), "question_key"].notna().all()


def test_a_set_whose_first_unanswerable_question_comes_later_scores_abstention_as_a_whole_run(
        tmp_path, isolated_data_dir):
    """Abstention rows depend on the question alone: answerable questions answered before the set
    had an unanswerable one still have their ``abstention_wrong`` row, as a run of the whole set."""
    from tests.llms.fake_ollama import FakeOllama

    server = FakeOllama().start()
    try:
        def grown(name: str, ids: range, unanswerable: bool) -> object:
            folder = tmp_path / name
            folder.mkdir()
            (folder / "corpus.jsonl").write_text(
                "".join(json.dumps({"_id": k, "text": v}) + "\n" for k, v in DOCS.items()), encoding="utf-8")
            rows = [{"id": f"q{i}", "question": f"which animal is {ANIMALS[i]}", "relevant_doc_ids": [f"d{i}"]}
                    for i in ids]
            if unanswerable:
                rows.append({"id": "u1", "question": "which animal is a unicorn", "answerable": False})
            (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
            llm = {"type": "ollama", "params": {"base_url": server.url, "model": "fake-model", "max_retries": 0}}
            return config_from_dict({
                "name": "abstain", "dataset": {"path": str(folder / "questions.jsonl"), "format": "jsonl"},
                "embedders": [], "retrievers": ["bm25"], "chunkers": ["document"], "top_k": [1], "generator": True,
                "llm": {"default": llm}})

        def abstention(out: Path) -> set[tuple[str, str, float]]:
            scores = load_results(out).scores_of(["abstention_wrong", "abstention_correct"])
            return set(zip(scores["question_id"].astype(str), scores["metric"], scores["value"]))

        grown_out, whole_out = tmp_path / "grown", tmp_path / "whole"
        run_experiment(grown("answerable", range(2), unanswerable=False), grown_out)
        assert run_experiment(grown("plus-one", range(2), unanswerable=True), grown_out).questions_computed == 1
        run_experiment(grown("whole", range(2), unanswerable=True), whole_out)
    finally:
        server.stop()
    expected = {("q0", "abstention_wrong", 0.0), ("q1", "abstention_wrong", 0.0), ("u1", "abstention_correct", 0.0)}
    assert abstention(grown_out) == abstention(whole_out) == expected


def test_a_plan_leaves_merged_copies_and_a_copy_it_cannot_write_does_not_fail_it(tmp_path, isolated_data_dir,
                                                                                 monkeypatch):
    from ragkit.results.copies import merged_copy

    monkeypatch.setattr("ragkit.experiments.executor.MERGE_MIN_PARTS", 2)  # this folder's two runs suffice
    out = tmp_path / "out"
    run_experiment(experiment(tmp_path, "two", questions(range(2))), out)
    store = ResultStore(out)
    copy = merged_copy(store, "scores")
    assert copy is not None and set(copy.parts) == {entry.stem for entry in store.committed_entries("scores")}

    def full_disk(self, min_parts=1):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ResultStore, "merge", full_disk)
    report = run_experiment(experiment(tmp_path, "four", questions(range(4))), out)
    assert report.questions_computed == 4 and any("merged read copies not written" in e for e in report.errors)
    assert scored(out) == {run: [f"q{i}" for i in range(4)] for run in scored(out)}  # read from the parts
