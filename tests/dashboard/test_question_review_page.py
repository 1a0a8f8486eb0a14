"""The question-sets page's quality report and review: accept, edit, reject, freeze."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from tests.dashboard.test_pages import DASHBOARD, TIMEOUT, assert_ok

pytestmark = pytest.mark.integration


@pytest.fixture
def generated_set(tmp_path: Path, isolated_data_dir) -> Path:
    from ragkit.llms import LLMClient
    from ragkit.questions import catalogue
    from ragkit.questions.generation import GenerationParams, generate_questions, write_set
    from tests.questions.generation_helpers import distinct_question, english_documents, reply_copying, rule_llm

    documents = english_documents(count=3)
    result = generate_questions(documents, GenerationParams(n=4, types=["factoid"]),
                                LLMClient(rule_llm(reply_copying(distinct_question)), None))
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": d.id_, "text": d.text}) + "\n" for d in documents), encoding="utf-8")
    out = write_set(tmp_path / "gen", result.rows, result.record, corpus).parent
    catalogue.register_question_set("gen", out, "squad")
    return out


def test_quality_review_and_freeze(generated_set: Path):
    app = AppTest.from_file(str(DASHBOARD / "views" / "2_question_sets.py"), default_timeout=TIMEOUT).run()
    app.selectbox(key="preview_set").select("gen").run()
    assert_ok(app)
    values = {m.label: m.value for m in app.metric}
    assert values["Answer locatable"] == "100%" and values["Duplicates"] == "0"
    assert any("<mark>" in m.value for m in app.markdown)  # the answer highlighted in its passage

    first = app.selectbox(key="review_question").value
    app.button(key="review_accept").click().run()
    assert_ok(app)
    review = json.loads((generated_set / "review.json").read_text(encoding="utf-8"))
    assert review["decisions"][first]["status"] == "accepted"

    app.selectbox(key="review_question").select_index(1).run()
    second = app.selectbox(key="review_question").value
    app.text_input(key=f"edit_a_{second}").set_value("a sentence no document holds").run()
    app.button(key="review_edit").click().run()
    assert "not in document" in app.error[0].value  # the span is re-verified; nothing recorded
    app.button(key="review_reject").click().run()

    app.checkbox(key="freeze_pending").check().run()
    app.button(key="review_freeze").click().run()
    assert_ok(app)
    assert "1 questions" in app.success[0].value
    from ragkit.questions import catalogue

    frozen = [name for name in catalogue.question_sets() if name.startswith("gen-")]
    assert len(frozen) == 1


def test_generation_estimate_counts_the_calls_a_run_makes(isolated_data_dir):
    from ragkit.experiments.plan import component_key
    from ragkit.experiments.throughput import record_throughput
    from ragkit.llms import llms
    from ragkit.questions import load_dataset_corpus
    from ragkit.questions.generation import GenerationParams, dry_run_counts, plan_generation
    from ragkit.questions.sources import llm_spec
    from ragkit.settings import get_settings
    from tests.conftest import SAMPLE_DATASET

    # This machine measured the default backend at 2 s a call (so nothing is calibrated here).
    record_throughput(get_settings().resolved_data_dir(), "llms", component_key(llms, llm_spec(None, None)), "m",
                      10, 20.0)
    app = AppTest.from_file(str(DASHBOARD / "views" / "2_question_sets.py"), default_timeout=TIMEOUT).run()
    app.number_input(key="gen_n").set_value(30)
    app.button(key="gen_estimate").click().run()
    assert_ok(app)
    values = {m.label: m.value for m in app.metric}
    params = GenerationParams(n=30)
    expected = dry_run_counts(plan_generation(load_dataset_corpus(SAMPLE_DATASET) or [], params), params)
    assert values["LLM calls"] == str(expected["calls"]) == "30"
    assert values["Time (estimate)"] == "~60 s"
    assert "ragkit questions generate" in app.code[0].value and "--n 30" in app.code[0].value


def test_the_generate_button_starts_a_job_whose_set_is_registered_when_done(isolated_data_dir, monkeypatch):
    """The button hands the page's values to a background `ragkit questions generate` (a scripted
    Ollama-speaking server is the default backend); once done, the set is in the page's list."""
    import time

    from dashboard import state
    from ragkit.questions import catalogue
    from tests.questions.generation_helpers import scripted_ollama_server

    with scripted_ollama_server(monkeypatch) as fake:
        app = AppTest.from_file(str(DASHBOARD / "views" / "2_question_sets.py"), default_timeout=TIMEOUT).run()
        app.number_input(key="gen_n").set_value(2)
        app.multiselect(key="gen_types").set_value(["factoid"])
        app.checkbox(key="gen_embeddings").uncheck()
        app.button(key="gen_start").click().run()
        assert_ok(app)
        assert "Started generation job" in app.success[0].value
        [job] = state.job_manager().list()
        command = state.job_manager()._record(job.job_id).command
        assert command[command.index("--n") + 1] == "2" and command[command.index("--types") + 1] == "factoid"
        assert "--no-embeddings" in command and "--llm" not in command
        deadline = time.monotonic() + 60
        while state.job_manager().get(job.job_id).state in ("queued", "running"):
            assert time.monotonic() < deadline, state.job_manager().get(job.job_id).log_tail
            time.sleep(0.1)
        assert state.job_manager().get(job.job_id).state == "done"
        assert Path(job.out_dir).name not in catalogue.question_sets()

        app.run()
        assert_ok(app)
        assert catalogue.question_sets()[Path(job.out_dir).name]["format"] == "squad"
        assert fake.chats == 2
        # The outcome, not only "done": kept of asked, and a poor yield (2 < 30) as a warning.
        assert any("done · kept" in str(bar.proto.text) and "of 2" in str(bar.proto.text)
                   for bar in app.get("progress"))
        assert any("poor yield" in warning.value for warning in app.warning)


def test_the_extractive_method_runs_without_an_llm(isolated_data_dir):
    import time

    from dashboard import state

    app = AppTest.from_file(str(DASHBOARD / "views" / "2_question_sets.py"), default_timeout=TIMEOUT).run()
    app.radio(key="gen_method").set_value(next(o for o in app.radio(key="gen_method").options
                                              if o.startswith("Extractive"))).run()
    assert any("no LLM" in caption.value for caption in app.caption)
    app.number_input(key="gen_n").set_value(5)
    app.checkbox(key="gen_embeddings").uncheck()
    app.button(key="gen_start").click().run()
    assert_ok(app)
    [job] = state.job_manager().list()
    command = state.job_manager()._record(job.job_id).command
    assert command[command.index("--method") + 1] == "extractive" and "--llm" not in command
    deadline = time.monotonic() + 120
    while state.job_manager().get(job.job_id).state in ("queued", "running"):
        assert time.monotonic() < deadline, state.job_manager().get(job.job_id).log_tail
        time.sleep(0.2)
    info = state.job_manager().get(job.job_id)
    assert info.state == "done", info.log_tail
    assert info.state_text().startswith("done · kept 5 of 5 (100%): poor yield (fewer than 30 questions)")


@pytest.fixture
def ingested_set(tmp_path: Path, isolated_data_dir) -> Path:
    """A set generated from an ingested corpus: no corpus.jsonl, its generation.json names the corpus."""
    from ragkit.corpus.store import CorpusStore
    from ragkit.llms import LLMClient
    from ragkit.questions import catalogue
    from ragkit.questions.generation import GenerationParams, generate_questions, write_set
    from tests.questions.generation_helpers import distinct_question, english_documents, reply_copying, rule_llm

    folder = tmp_path / "notes"
    folder.mkdir()
    for document in english_documents(count=3):
        (folder / f"{document.id_}.txt").write_text(document.text, encoding="utf-8")
    store = CorpusStore()
    store.ingest([folder], name="notes")
    documents = list(store.load("notes").documents)
    result = generate_questions(documents, GenerationParams(n=4, types=["factoid", "unanswerable"]),
                                LLMClient(rule_llm(reply_copying(distinct_question)), None), corpus="notes")
    out = write_set(tmp_path / "from-ingested", result.rows, result.record).parent
    assert not (out / "corpus.jsonl").exists()
    catalogue.register_question_set("from-ingested", out, "squad")
    return out


def test_a_set_from_an_ingested_corpus_gets_its_quality_report_and_an_unanswerable_made_answerable(ingested_set):
    app = AppTest.from_file(str(DASHBOARD / "views" / "2_question_sets.py"), default_timeout=TIMEOUT).run()
    app.selectbox(key="preview_set").select("from-ingested").run()
    assert_ok(app)
    values = {m.label: m.value for m in app.metric}
    assert values["Answer locatable"] == "100%" and values["Documents without questions"] == "0%"
    assert any("<mark>" in m.value for m in app.markdown)  # the passage, its answer highlighted

    rows = [json.loads(line) for line in (ingested_set / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    unanswerable = next(row for row in rows if row.get("answerable") is False)
    app.selectbox(key="review_question").select(unanswerable["id"]).run()
    assert "makes this unanswerable question answerable" in app.text_input(key=f"edit_a_{unanswerable['id']}").label
    app.text_input(key=f"edit_a_{unanswerable['id']}").set_value("room 5").run()
    app.button(key="review_edit").click().run()
    assert_ok(app)
    part = json.loads((ingested_set / "review.json").read_text(encoding="utf-8"))["decisions"][unanswerable["id"]]
    assert part["status"] == "edited" and part["parts"][0]["answer"] == "room 5"
    assert part["parts"][0]["doc_id"] == unanswerable["doc_id"]
