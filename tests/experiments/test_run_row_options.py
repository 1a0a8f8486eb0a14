"""The runs table shows a generator option added later only on runs that set it away from its
default (``plan.run_row``), so every other run's row is the one it always had."""

from __future__ import annotations

import pytest

from ragkit.corpus.model import Corpus, make_document
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.plan import make_plan, run_row
from ragkit.llms.base import llms
from ragkit.questions import Question, QuestionSet

pytestmark = pytest.mark.unit


def rows(generator: dict) -> list[dict]:
    corpus = Corpus.from_documents("c", [make_document("d1", "Cats purr when content. " * 5)])
    questions = QuestionSet(name="q", format="jsonl", questions=[
        Question(id="q1", text="why do cats purr", relevant_docs={"d1": 1.0})])
    config = config_from_dict({"name": "x", "dataset": {"path": "q.jsonl"}, "retrievers": ["bm25"],
                               "generator": generator})
    plan = make_plan(config, corpus, questions, {"generator": llms.resolve({"type": "local"})})
    return [run_row(plan, step) for step in plan.runs]


def test_a_generator_option_set_is_a_column_and_at_its_default_is_not():
    (plain,) = rows({"params": {"max_tokens": 80}})
    (explicit_default,) = rows({"params": {"max_tokens": 80, "show_file_name": False, "abstain_text": None}})
    (shown,) = rows({"params": {"max_tokens": 80, "show_file_name": True, "abstain_text": "not found"}})
    assert not [c for c in plain if c.startswith("generator.")]
    assert explicit_default == plain
    assert shown["generator.show_file_name"] is True and shown["generator.abstain_text"] == "not found"
    assert shown["run_id"] != plain["run_id"]
    # The generator's older params (max_tokens) stay out of the row, as before.
    assert "generator.max_tokens" not in shown
