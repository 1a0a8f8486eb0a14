"""The New experiment page starts from the question set's own corpus (the ingested corpus a
generated set names, so Estimate works), and shows the set's review state with a warning when most
questions are unreviewed or rejected."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

pytestmark = pytest.mark.integration

PAGE = Path(__file__).resolve().parents[2] / "dashboard" / "views" / "3_new_experiment.py"


def test_a_generated_set_defaults_to_its_corpus_estimates_and_shows_its_review(tmp_path):
    from ragkit.corpus.store import CorpusStore
    from ragkit.questions import catalogue

    files = tmp_path / "files"
    files.mkdir()
    text = "The index holds chunks. Revenue was 60,274 in 2023."
    (files / "report.txt").write_text(text)
    CorpusStore().ingest([files], "reports")
    generated = tmp_path / "generated"
    generated.mkdir()
    row = {"id": "g0", "question": "What was revenue in 2023?", "doc_id": "report.txt", "answer": "60,274",
           "answer_start": text.index("60,274"), "answer_end": text.index("60,274") + 6, "type": "factoid",
           "answerable": True}
    (generated / "questions.jsonl").write_text(json.dumps(row) + "\n")
    (generated / "generation.json").write_text(json.dumps({"corpus": "reports"}))
    catalogue.register_question_set("generated", generated, "squad")

    app = AppTest.from_file(str(PAGE), default_timeout=120).run()
    question_set = next(s for s in app.selectbox if s.label == "Question set")
    question_set.select("generated").run()
    assert not app.exception, [e.value for e in app.exception]
    corpus = next(s for s in app.selectbox if s.label == "Corpus")
    assert corpus.value == "reports"
    assert any("most questions of this set are unreviewed" in w.value for w in app.warning)
    assert any("Review: 0 accepted (0 edited), 1 pending, 0 rejected of 1" in c.value for c in app.caption)
    next(b for b in app.button if b.label == "Estimate (dry run)").click().run()
    assert not app.error, [e.value for e in app.error]
    assert any("dry run: nothing is computed" in block.value for block in app.code)
