"""A set's review state for the New experiment page (``review.review_state``) and the corpus a
generated set defaults to (``catalogue.generated_from``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.questions.catalogue import generated_from
from ragkit.questions.review import Review, decide, review_state, save_review

pytestmark = pytest.mark.unit


def _generated(folder: Path, n: int, corpus: str = "reports", own_corpus: bool = False) -> Path:
    folder.mkdir(parents=True)
    rows = [{"id": f"g{i}", "question": f"What is {i}?", "doc_id": "d1", "answer": "x", "answer_start": 0,
             "answer_end": 1, "type": "factoid", "answerable": True} for i in range(n)]
    (folder / "questions.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    (folder / "generation.json").write_text(json.dumps({"corpus": corpus, "kept": n}))
    if own_corpus:
        (folder / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "x"}) + "\n")
    return folder


def test_an_unreviewed_set_is_warned_about(tmp_path):
    state = review_state(_generated(tmp_path / "set", 10))
    assert (state.total, state.accepted, state.pending, state.rejected) == (10, 0, 10, 0)
    assert state.warning is not None and "10 pending, 0 rejected of 10" in state.warning


def test_a_mostly_accepted_set_is_not_and_the_counts_add_up(tmp_path):
    folder = _generated(tmp_path / "set", 10)
    review = Review()
    for i in range(6):
        review = decide(review, f"g{i}", "accepted")
    review = decide(review, "g6", "rejected")
    save_review(folder, review)
    state = review_state(folder)
    assert (state.accepted, state.rejected, state.pending) == (6, 1, 3)
    assert state.warning is None
    assert state.summary == "6 accepted (0 edited), 3 pending, 1 rejected of 10"
    # Rejected count as not usable: 6 rejected and 4 accepted is a warning.
    for i in range(6):
        review = decide(review, f"g{i}", "rejected")
    save_review(folder, review)
    assert review_state(folder).warning is not None


def test_a_human_dataset_has_no_review_state():
    sample = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
    assert review_state(sample) is None
    assert generated_from(sample) is None  # it ships its corpus.jsonl


def test_a_generated_set_defaults_to_the_corpus_it_was_generated_from(tmp_path):
    assert generated_from(_generated(tmp_path / "a", 2, corpus="reports")) == "reports"
    # A set that ships its own corpus.jsonl uses it.
    assert generated_from(_generated(tmp_path / "b", 2, own_corpus=True)) is None
    # A frozen copy: the corpus of the set it was frozen from.
    frozen = tmp_path / "frozen"
    frozen.mkdir()
    (frozen / "questions.jsonl").write_text("")
    (frozen / "frozen.json").write_text(json.dumps({"source": str(tmp_path / "a")}))
    assert generated_from(frozen) == "reports"
