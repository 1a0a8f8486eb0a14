"""Dashboard pages rendered with Streamlit's AppTest, on an empty data dir and with results."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from streamlit.testing.v1 import AppTest

from tests.factories import write_beir

DASHBOARD = Path(__file__).resolve().parents[2] / "dashboard"
PAGES = sorted((DASHBOARD / "views").glob("*.py"))
TIMEOUT = 30
TINY_TEXT = "Cats are small furry animals that purr."

pytestmark = pytest.mark.integration


def page(name: str, **query: str) -> AppTest:
    """A page as a link with these query parameters opens it (e.g. ``section``: the Compare tab)."""
    app = AppTest.from_file(str(DASHBOARD / "views" / name), default_timeout=TIMEOUT)
    app.query_params.update(query)
    return app


def assert_ok(app: AppTest) -> None:
    assert not app.exception, [e.value for e in app.exception]
    assert not app.error, [e.value for e in app.error]


@pytest.fixture
def with_results(tmp_path, isolated_data_dir) -> Path:
    """A tiny bm25-only experiment 'tiny' (2 runs: top_k 1 and 3) and its question set registered."""
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment
    from ragkit.questions import catalogue
    from ragkit.settings import get_settings

    beir = write_beir(tmp_path / "beir")
    config = config_from_dict({
        "name": "tiny", "dataset": {"path": str(beir), "format": "beir"},
        "chunkers": ["document"], "retrievers": ["bm25"], "top_k": [1, 3],
    })
    out = get_settings().results_root() / "tiny"
    report = run_experiment(config, out)
    assert not report.errors
    catalogue.register_question_set("tiny-beir", beir, "beir")
    return out


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_every_page_renders_on_an_empty_data_dir(path):
    app = AppTest.from_file(str(path), default_timeout=TIMEOUT).run()
    assert_ok(app)


@pytest.mark.parametrize("path", PAGES, ids=lambda p: p.stem)
def test_every_page_renders_with_results(path, with_results):
    app = AppTest.from_file(str(path), default_timeout=TIMEOUT).run()
    assert_ok(app)


def test_app_entry_point_renders(with_results):
    app = AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=TIMEOUT).run()
    assert_ok(app)
    sidebar = " ".join(c.value for c in app.sidebar.caption)
    assert "Data directory" in sidebar and "LLM backend (auto)" in sidebar and "Ollama" in sidebar
    assert app.title[0].value == "Corpora"


def _chart(app: AppTest, title_part: str) -> dict:
    specs = [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]
    return next(spec for spec in specs if title_part in spec["layout"].get("title", {}).get("text", ""))


def test_compare_metric_choice_changes_chart_and_link(with_results):
    app = page("5_compare.py", chart="true", pickers="true").run()
    assert_ok(app)
    metrics = app.multiselect(key="metrics.tiny")
    metrics.set_value(["recall@1"]).run()
    assert_ok(app)
    # the factor answers lead; the means are a tab of their own
    factors = _chart(app, "level - reference")
    assert [a["text"] for a in factors["layout"]["annotations"]] == ["Δ recall@1"]
    assert app.query_params["metrics"] == ["recall@1"] or app.query_params["metrics"] == "recall@1"

    app = page("5_compare.py", metrics="recall@1", section="Means", pickers="true").run()
    assert_ok(app)
    first = _chart(app, "recall@1 (95% CI)")
    assert {trace["name"] for trace in first["data"]} == {"recall@1"}
    app.multiselect(key="metrics.tiny").set_value(["mrr"]).run()
    assert_ok(app)
    second = _chart(app, "mrr (95% CI)")
    assert {trace["name"] for trace in second["data"]} == {"mrr"}


def test_compare_selection_is_read_from_the_link(with_results):
    app = page("5_compare.py", pickers="true")
    app.query_params["metrics"] = "ndcg@1"
    app.run()
    assert_ok(app)
    assert app.multiselect(key="metrics.tiny").value == ["ndcg@1"]
    # the two runs differ only in top_k: the factor answer leads (3 vs the reference 1, its first
    # level), and the one single-factor pair is in the detail
    answer = table_with(app, "level vs reference")
    assert answer[["factor", "level vs reference", "metric"]].values.tolist() == [["top_k", "3 vs 1", "ndcg@1"]]
    # the caption names the reference and the Holm family (the question asked, how many tests): the
    # first chunk is the same at top_k 1 and 3, so ndcg@1 is identical by construction, not tested
    caption = next(c.value for c in app.caption if c.value.startswith("Reference levels"))
    assert "top_k: 1 (first level" in caption and "factor table on ndcg@1: 0 tests over 1 rows" in caption
    assert "ndcg@1" in caption and "each failure scored 0" in caption
    pairs = table_with(page("5_compare.py", metrics="ndcg@1", section="Single-factor pairs").run(), "a -> b", "W/T/L")
    assert pairs[["factor", "a -> b"]].values.tolist() == [["top_k", "1 -> 3"]]

    # ndcg@3 is not scored by the top_k 1 run: nothing to compare, and the page says why
    app.multiselect(key="metrics.tiny").set_value(["ndcg@3"]).run()
    assert_ok(app)
    assert any("could be compared on" in c.value for c in app.caption)


def test_second_retriever_doubles_the_grid(with_results):
    app = page("3_new_experiment.py").run()
    assert_ok(app)
    grid = app.metric[0]
    assert grid.label == "Runs in the grid"
    before = int(grid.value)
    app.checkbox(key="use.retrievers.bm25").check().run()
    assert_ok(app)
    assert int(app.metric[0].value) == 2 * before
    assert "bm25" in app.code[0].value  # the YAML shown follows the form


def test_the_estimate_button_shows_the_dry_run(with_results):
    app = page("3_new_experiment.py").run()
    # The first estimate calibrates the embedder (loads MiniLM, embeds a few dozen chunks).
    next(b for b in app.button if b.label == "Estimate (dry run)").click().run(timeout=180)
    assert_ok(app)
    shown = [block.value for block in app.code if "dry run: nothing is computed" in block.value]
    assert shown and "chunk sets:" in shown[0] and "time (embedding + LLM calls" in shown[0]


def test_question_sets_page_counts_the_registered_set(with_results):
    app = page("2_question_sets.py").run()
    app.selectbox(key="preview_set").select("tiny-beir").run()
    assert_ok(app)
    values = {m.label: m.value for m in app.metric}
    assert values["Questions"] == "3" and values["Relevance judgements"] == "3"


def test_question_set_import_from_a_path(tmp_path):
    beir = write_beir(tmp_path / "mine")
    app = page("2_question_sets.py").run()
    app.radio[0].set_value("Path on this machine").run()
    app.text_input[0].set_value("mine")
    app.text_input[1].set_value(str(beir))
    app.button[0].click().run()
    assert_ok(app)
    assert "Imported 'mine': 3 questions" in app.success[0].value
    from ragkit.questions import catalogue
    assert catalogue.question_sets()["mine"]["path"] == str(beir.resolve())


def test_drilldown_shows_runs_side_by_side(with_results):
    app = page("6_drilldown.py").run()
    assert_ok(app)
    markdown = " ".join(m.value for m in app.markdown)
    assert "what animal purrs" in markdown or "which animal barks" in markdown or "what is the sun" in markdown
    assert "#1" in markdown and "score" in markdown


def test_corpora_page_lists_and_previews_an_ingested_corpus(tmp_path):
    from ragkit.corpus.store import CorpusStore

    files = tmp_path / "files"
    files.mkdir()
    (files / "notes.md").write_text("# Title\n\n## Part one\n\nSome text here.\n\n## Part two\n\nMore text.\n")
    CorpusStore().ingest([files], "notes")
    app = page("1_corpora.py").run()
    assert_ok(app)
    assert app.dataframe[0].value["name"].tolist() == ["notes"]
    app.selectbox(key="preview_doc").select("notes.md")
    chunker = next(s for s in app.selectbox if s.label == "Chunker")
    chunker.select("markdown").run()
    assert_ok(app)
    chunks = app.dataframe[-1].value
    assert {"start_char", "end_char", "breadcrumb", "tokens"} <= set(chunks.columns)
    assert any("Part two" in str(crumb) for crumb in chunks["breadcrumb"])


def test_export_offers_a_download(with_results):
    app = page("7_export.py").run()
    assert_ok(app)
    app.radio[0].set_value("json").run()
    assert_ok(app)
    assert "tiny.json" in app.caption[0].value or any("tiny.json" in str(b.proto) for b in app.get("download_button"))


def test_params_form_uses_field_bounds_and_descriptions():
    def script():
        import streamlit as st

        from dashboard import forms
        from ragkit.retrievers import retrievers

        st.session_state["params"] = forms.params_form(retrievers.params_model("mmr"), key="mmr")

    app = AppTest.from_function(script, default_timeout=TIMEOUT).run()
    assert_ok(app)
    top_k = app.number_input(key="mmr.top_k")
    assert (top_k.min, top_k.max, top_k.value) == (1, 1000, 10)
    assert "top" in (top_k.help or "").lower() or top_k.help
    mmr_lambda = app.number_input(key="mmr.mmr_lambda")
    assert (mmr_lambda.min, mmr_lambda.max) == (0.0, 1.0)
    threshold = app.number_input(key="mmr.score_threshold")
    assert threshold.value is None  # Optional -> may stay empty
    assert app.session_state["params"]["score_threshold"] is None
    mmr_lambda.set_value(0.25).run()
    assert app.session_state["params"]["mmr_lambda"] == 0.25


def test_the_run_button_can_start_the_job_on_ray(with_results, monkeypatch):
    pytest.importorskip("ray", reason="the test extra installs ray")
    from dashboard import state

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    app = page("3_new_experiment.py").run()
    app.text_input[0].set_value("on-ray")
    next(s for s in app.selectbox if s.label == "Question set").select("tiny-beir")
    app.checkbox(key="use.chunkers.recursive").uncheck()
    app.checkbox(key="use.chunkers.document").check()
    app.checkbox(key="use.retrievers.dense").uncheck()
    app.checkbox(key="use.retrievers.bm25").check()
    app.radio(key="executor").set_value("ray").run()
    next(b for b in app.button if b.label == "Run").click().run()
    assert_ok(app)
    (job,) = state.job_manager().list()
    import time

    deadline = time.monotonic() + 240
    while state.job_manager().get(job.job_id).state in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.5)
    info = state.job_manager().get(job.job_id)
    assert info.state == "done" and info.done == info.total > 0, info.log_tail
    record = state.job_manager()._record(job.job_id)
    assert record.command[-2:] == ["--executor", "ray"]


def test_run_button_starts_a_job_that_the_runs_page_follows(with_results):
    from dashboard import state

    app = page("3_new_experiment.py").run()
    app.text_input[0].set_value("from-dashboard")
    next(s for s in app.selectbox if s.label == "Question set").select("tiny-beir")
    app.checkbox(key="use.chunkers.recursive").uncheck()
    app.checkbox(key="use.chunkers.document").check()
    app.checkbox(key="use.retrievers.dense").uncheck()
    app.checkbox(key="use.retrievers.bm25").check().run()
    assert_ok(app)
    assert app.metric[0].value == "2"
    next(b for b in app.button if b.label == "Run").click().run()
    assert_ok(app)
    assert "Started job" in app.success[0].value

    manager = state.job_manager()
    (job,) = manager.list()
    runs = page("4_runs.py").run()
    assert_ok(runs)
    assert runs.dataframe[0].value["job"].tolist() == [job.job_id]
    import time

    deadline = time.monotonic() + 120
    while manager.get(job.job_id).state in ("queued", "running") and time.monotonic() < deadline:
        time.sleep(0.5)
    assert manager.get(job.job_id).state == "done", manager.get(job.job_id).log_tail
    # the drill-down finds the job's dataset by itself
    drill = page("6_drilldown.py")
    drill.query_params["exp"] = "from-dashboard"
    drill.run()
    assert_ok(drill)
    assert drill.selectbox(key="pick_experiment").value == "from-dashboard"


def test_uploads_are_sanitised_and_stay_in_the_data_dir(isolated_data_dir):
    from ragkit.app.uploads import save_uploads

    class Upload:
        def __init__(self, name: str, data: bytes) -> None:
            self.name, self._data = name, data

        def getvalue(self) -> bytes:
            return self._data

    paths = save_uploads([Upload("../../evil.txt", b"x"), Upload("a/b/report.md", b"# hi")], "../batch", "x/../y")
    root = (isolated_data_dir / "uploads").resolve()
    assert all(root in p.parents for p in paths)
    assert [p.read_bytes() for p in paths] == [b"x", b"# hi"]


def test_drilldown_highlights_the_answer_span_of_the_bundled_sample(isolated_data_dir):
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment
    from ragkit.questions import catalogue
    from ragkit.settings import get_settings

    config = config_from_dict({
        "name": "covid", "dataset": {"path": str(catalogue.SAMPLE_QUESTION_SET), "format": "squad", "limit": 10},
        "chunkers": [{"type": "recursive", "params": {"chunk_size": 400, "chunk_overlap": 0}}],
        "retrievers": ["bm25"], "top_k": [5, 10],
    })
    out = get_settings().results_root() / "covid"
    run_experiment(config, out)
    from ragkit.analysis import load_results

    scores = load_results(out).scores
    hits = scores[(scores["metric"] == "span_recall@10") & (scores["value"] > 0)]["question_id"].tolist()
    assert hits, "bm25 found no answer span on the first questions"
    app = page("6_drilldown.py")
    app.query_params["q"] = hits[0]
    app.run()
    assert_ok(app)
    assert app.selectbox[1].value == "covidqa_sample (bundled)"  # matched through the corpus name
    html_blocks = [m.value for m in app.markdown if "white-space" in m.value]
    assert html_blocks and any("<mark>" in block for block in html_blocks)
    assert any("answer span" in m.value for m in app.markdown)


def test_navigation_reaches_every_page(with_results):
    app = AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=TIMEOUT).run()
    titles = []
    for path in PAGES:
        app.switch_page(str(path.relative_to(DASHBOARD))).run()
        assert_ok(app)
        titles.append(app.title[0].value)
    assert titles == ["Corpora", "Question sets", "New experiment", "Runs", "Compare runs",
                      "Question drill-down", "Export", "Label"]


def test_params_form_covers_every_field_kind():
    def script():
        import enum
        from typing import Literal

        import streamlit as st
        from pydantic import BaseModel, Field

        from dashboard import forms

        class Mode(enum.Enum):
            fast = "fast"
            exact = "exact"

        class Params(BaseModel):
            size: int = Field(default=8, ge=2, le=64, description="How big.")
            ratio: float = Field(default=0.5, gt=0.0, lt=1.0)
            strict: bool = True
            kind: Literal["a", "b"] = "b"
            mode: Mode = Mode.exact
            label: str = "x"
            note: str | None = None
            seps: list[str] = Field(default_factory=lambda: ["\n\n", " "])
            path: str = Field(description="Required.")

        st.session_state["params"] = forms.params_form(Params, key="p")

    app = AppTest.from_function(script, default_timeout=TIMEOUT).run()
    assert_ok(app)
    size = app.number_input(key="p.size")
    assert (size.min, size.max, size.value, size.help) == (2, 64, 8, "How big.")
    assert app.selectbox(key="p.kind").options == ["a", "b"] and app.selectbox(key="p.kind").value == "b"
    assert app.selectbox(key="p.mode").value == "exact"
    assert app.checkbox(key="p.strict").value is True
    params = app.session_state["params"]
    assert params == {"size": 8, "ratio": 0.5, "strict": True, "kind": "b", "mode": "exact", "label": "x",
                      "note": None, "seps": ["\n\n", " "]}  # the empty required field is left to validation
    app.text_input(key="p.path").set_value("/data").run()
    app.text_input(key="p.note").set_value("hello").run()
    assert app.session_state["params"]["path"] == "/data" and app.session_state["params"]["note"] == "hello"


def test_corpus_delete_needs_confirmation(tmp_path):
    from ragkit.corpus.store import CorpusStore

    (tmp_path / "a.txt").write_text("some words to ingest")
    CorpusStore().ingest([tmp_path / "a.txt"], "doomed")
    app = page("1_corpora.py").run()
    delete = next(b for b in app.button if b.label == "Delete")
    assert delete.disabled
    app.checkbox(key="delete_confirm").check().run()
    next(b for b in app.button if b.label == "Delete").click().run()
    assert_ok(app)
    assert CorpusStore().list() == []
    assert any("No corpus yet" in i.value for i in app.info)



def test_corpora_page_lists_documents_and_deletes_the_chosen_after_confirmation(tmp_path):
    from ragkit.corpus.store import CorpusStore

    for name, text in [("a.txt", "alpacas and llamas"), ("b.txt", "camels in the desert"), ("c.txt", "vicunas")]:
        (tmp_path / name).write_text(text)
    old_id = CorpusStore().ingest([tmp_path / n for n in ("a.txt", "b.txt", "c.txt")], "camelids").corpus_id
    app = page("1_corpora.py").run()
    assert_ok(app)
    documents = app.dataframe[1].value
    assert documents["doc_id"].tolist() == ["a.txt", "b.txt", "c.txt"]
    assert documents["chars"].tolist() == [18, 20, 7]
    app.multiselect(key="delete_docs").select("a.txt").select("c.txt").run()
    delete = next(b for b in app.button if b.label == "Delete documents")
    assert delete.disabled  # not before the confirmation
    app.checkbox(key="delete_docs_confirm").check().run()
    next(b for b in app.button if b.label == "Delete documents").click().run()
    assert_ok(app)
    assert [d.id_ for d in CorpusStore().load("camelids").documents] == ["b.txt"]
    assert CorpusStore().list()[0].corpus_id != old_id
    assert app.dataframe[1].value["doc_id"].tolist() == ["b.txt"]


# --- judges, answers and the LLM backend ---------------------------------------------------------


def radio(app: AppTest, key: str):
    return next(r for r in app.radio if r.key == key)


def form_config(app: AppTest):
    """The experiment the form shows as YAML, read back the way `ragkit run` reads it."""
    from ragkit.experiments.config import config_from_dict

    return config_from_dict(yaml.safe_load(app.code[0].value))


def test_judge_selectors_offer_only_each_judges_modes():
    from ragkit.experiments.config import judge_names
    from ragkit.stages.base import STAGES

    app = page("3_new_experiment.py").run()
    assert_ok(app)
    keys = {r.key for r in app.radio}
    assert {f"judges.{name}.mode" for name in judge_names()} <= keys
    assert "judges.generator.mode" not in keys  # the generator is the "Generate answers" box
    rerank, retrieval = radio(app, "judges.rerank.mode"), radio(app, "judges.retrieval.mode")
    assert rerank.options[:3] == ["off", "heuristic", "llm"] and rerank.options[3].startswith("both (off + llm")
    assert retrieval.options == ["off", "llm", "both (off + llm)"]
    # Model modes (a local folder to set) come after "both" and "all", and "all" never includes them.
    assert rerank.options[-1] == "cross_encoder" and "cross_encoder" not in rerank.options[4]
    for name in judge_names():
        offered = radio(app, f"judges.{name}.mode").options
        assert [o for o in offered if o in STAGES.get(name).modes] == list(STAGES.get(name).modes)
        assert radio(app, f"judges.{name}.mode").value == "off"
    assert "judges" not in form_config(app).model_dump(exclude_defaults=True)


def test_the_judges_are_listed_by_role_in_pipeline_order():
    from ragkit.experiments.config import judge_names
    from ragkit.stages.catalogue import stage_groups

    app = page("3_new_experiment.py").run()
    assert_ok(app)
    titles = [group.title for group in stage_groups(judge_names())]
    assert titles == ["Chunking", "Query: routing and rewriting", "Retrieval and its judges",
                      "Context: reranking, enrichment and compression", "Answer: generation and its checks"]
    shown = [element.value.strip("*") for element in app.markdown if element.value.strip("*") in titles]
    assert shown == titles
    # Reading each group's two columns row by row gives the pipeline's order, not the alphabet's.
    assert [stage.name for group in stage_groups(judge_names()) for stage in group.stages] == [
        "chunking", "router", "condense", "profile", "strategy", "hyde", "multi_query", "quality_gate", "retrieval",
        "rerank", "enrichment", "compression", "groundedness", "answer_check"]


def test_judge_toggles_multiply_the_grid_and_the_config_round_trips(with_results):
    from ragkit.experiments.config import expand_grid

    app = page("3_new_experiment.py").run()
    before = int(app.metric[0].value)
    radio(app, "judges.retrieval.mode").set_value("both").run()
    radio(app, "judges.rerank.mode").set_value("all").run()
    assert_ok(app)
    app.number_input(key="judges.rerank.params.top_n").set_value(3).run()
    assert_ok(app)
    assert int(app.metric[0].value) == before * 2 * 3
    # In pipeline order, as the form lists them: the Retrieval Judge runs before rerank.
    assert any("retrieval (off, llm) × rerank (off, heuristic, llm)" in c.value for c in app.caption)

    config = form_config(app)
    assert len(expand_grid(config)) == before * 6
    assert config.judges["rerank"].params["top_n"] == 3
    modes = {(spec.type, spec.params["mode"]) for point in expand_grid(config) for spec in point.judges}
    assert modes == {("retrieval", "off"), ("retrieval", "llm"),
                     ("rerank", "off"), ("rerank", "heuristic"), ("rerank", "llm")}

    radio(app, "judges.retrieval.mode").set_value("off").run()
    assert int(app.metric[0].value) == before * 3


def test_groundedness_needs_generated_answers_and_the_backend_choice_is_written(with_results):
    from ragkit.settings import get_settings

    app = page("3_new_experiment.py").run()
    radio(app, "judges.groundedness.mode").set_value("llm").run()
    assert app.error and "generator" in app.error[0].value
    app.checkbox(key="generator.on").check().run()
    app.number_input(key="generator.params.max_chunks").set_value(3).run()
    radio(app, "llm.default").set_value("ollama").run()
    assert_ok(app)
    settings = get_settings()
    assert app.text_input(key="llm.default.ollama.model").value == settings.ollama_model
    assert app.text_input(key="llm.default.ollama.base_url").value == settings.ollama_url
    config = form_config(app)
    assert config.generator is not None and config.generator.params["max_chunks"] == 3
    assert config.llm.default.type == "ollama" and config.llm.default.params["base_url"] == settings.ollama_url

    radio(app, "llm.default").set_value("openai").run()
    assert app.error and "model" in app.error[0].value  # an OpenAI-compatible server needs a model name
    app.text_input(key="llm.default.openai.model").set_value("qwen2.5").run()
    assert_ok(app)
    assert form_config(app).llm.default.params["model"] == "qwen2.5"


@pytest.fixture
def judged_results(tmp_path, isolated_data_dir) -> Path:
    """A hand-written results folder 'judged': runs r1 (rerank judge in llm mode) and r2 (rerank
    off), both with the Retrieval Judge and generated answers, for question q1."""
    from ragkit.questions import catalogue
    from ragkit.results import ResultStore
    from ragkit.settings import get_settings

    beir = write_beir(tmp_path / "beir")
    catalogue.register_question_set("tiny-beir", beir, "beir")
    out = get_settings().results_root() / "judged"
    store = ResultStore(out)
    for run_id, rerank in (("r1", "llm"), ("r2", "off")):
        store.write_run(run_id, {
            "run_id": run_id, "experiment": "judged", "corpus": "beir", "corpus_id": "c", "chunkset_id": "cs",
            "index_id": "ix", "chunker": "document", "embedder": None, "retriever": "bm25", "top_k": 2,
            "retriever.top_k": 2, "judge.retrieval": "llm", "judge.rerank": rerank, "generator": True,
        })
        retrievals = pd.DataFrame([
            {"run_id": run_id, "question_id": "q1", "rank": 1, "chunk_id": "c-d1", "doc_id": "d1", "start_char": 0,
             "end_char": 40, "score": 2.0},
            {"run_id": run_id, "question_id": "q1", "rank": 2, "chunk_id": "c-d2", "doc_id": "d2", "start_char": 0,
             "end_char": 30, "score": 1.0},
        ])
        answers = pd.DataFrame([{
            "run_id": run_id, "question_id": "q1", "answer": "Cats purr when content [1].",
            "citations": json.dumps(["c-d1"]), "contexts": json.dumps([TINY_TEXT]),
            "prompt": "Answer from the sources.",
            "valid": True, "error": None,
        }])
        judgements = [
            {"run_id": run_id, "question_id": "q1", "judge": "retrieval",
             "input_summary": "what animal purrs | 2 chunks",
             "decision": json.dumps({"relevant": ["c-d1"], "request_more": False}), "raw_reply": '{"relevant": [1]}',
             "valid": True, "error": None, "fell_back": False, "seconds": 0.42, "cache_hit": False},
            {"run_id": run_id, "question_id": None, "judge": "chunking", "input_summary": "d1",
             "decision": json.dumps({"chunker": "document"}), "raw_reply": None,
             "valid": True, "error": None, "fell_back": False, "seconds": 0.01, "cache_hit": False},
        ]
        stages = [
            {"run_id": run_id, "question_id": "q1", "stage": "retrieve", "seconds": 0.01, "cached": False},
            {"run_id": run_id, "question_id": "q1", "stage": "judge:retrieval", "seconds": 0.42, "cached": False,
             "llm_calls": 1, "backend_calls": 1, "prompt_tokens": 120, "completion_tokens": 12},
            {"run_id": run_id, "question_id": "q1", "stage": "generate", "seconds": 0.9, "cached": False,
             "llm_calls": 1, "backend_calls": 1, "prompt_tokens": 200, "completion_tokens": 20},
        ]
        if rerank == "llm":
            judgements.insert(1, {
                "run_id": run_id, "question_id": "q1", "judge": "rerank",
                "input_summary": "what animal purrs | 1 chunk",
                "decision": json.dumps({"kept": ["c-d1"]}), "raw_reply": "I think the first one", "valid": False,
                "error": "no JSON object in the reply", "fell_back": True, "seconds": 0.2, "cache_hit": False,
            })
            stages.append({"run_id": run_id, "question_id": "q1", "stage": "judge:rerank", "seconds": 0.2,
                           "cached": False, "llm_calls": 1, "backend_calls": 1, "invalid_replies": 1,
                           "prompt_tokens": 80, "completion_tokens": 6})
        scores = pd.DataFrame([{"run_id": run_id, "question_id": "q1", "metric": "recall@1", "value": 1.0,
                                "error": None}])
        store.commit_shard(run_id, ["q1"], {"scores": scores, "retrievals": retrievals, "stages": pd.DataFrame(stages),
                                            "answers": answers, "judgements": pd.DataFrame(judgements)})
    return out


def test_drilldown_shows_the_answer_and_each_judge_decision(judged_results):
    app = page("6_drilldown.py")
    app.query_params["runs"] = "r1"
    app.run()
    assert_ok(app)
    markdown = [m.value for m in app.markdown]
    assert "what animal purrs" in " ".join(markdown)
    assert "Cats purr when content [1]." in markdown
    assert any("Cites: #1" in c.value for c in app.caption)
    # decisions in the order the judges made them, each with its validity
    judged = [m for m in markdown if m.startswith("**retrieval**") or m.startswith("**rerank**")]
    assert judged[0].startswith("**retrieval**") and ":green[valid]" in judged[0] and "0.42 s" in judged[0]
    assert judged[1].startswith("**rerank**") and ":red[invalid]" in judged[1] and "fell back" in judged[1]
    assert json.loads(app.json[0].value) == {"relevant": ["c-d1"], "request_more": False}
    codes = [c.value for c in app.code]
    assert "I think the first one" in codes  # the raw reply
    assert any("chunker" in j.value for j in app.json)  # the per-document chunking decision
    assert any(":blue[cited]" in m and "#1" in m for m in markdown)


def test_compare_shows_llm_calls_tokens_and_invalid_replies(judged_results):
    app = page("5_compare.py", section="LLM usage").run()
    assert_ok(app)
    tables = [d.value for d in app.dataframe]
    usage = next(t for t in tables if "prompt_tokens" in t.columns).set_index("run")
    columns = ["llm_calls", "invalid_replies", "prompt_tokens", "completion_tokens"]
    assert sorted(usage[columns].values.tolist()) == [[2, 0, 320, 32], [3, 1, 400, 38]]
    replies = next(t for t in tables if "invalid_share" in t.columns).set_index("judge")
    assert replies.loc["rerank", "invalid_share"] == 1.0 and replies.loc["retrieval", "invalid_share"] == 0.0
    assert replies.loc["retrieval", "decisions"] == 2


def test_sidebar_says_when_ollama_is_not_reachable(monkeypatch):
    from ragkit.settings import get_settings

    with socket.socket() as probe:  # a port nothing listens on once closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv("RAGKIT_OLLAMA_URL", f"http://127.0.0.1:{port}")
    get_settings.cache_clear()
    app = AppTest.from_file(str(DASHBOARD / "app.py"), default_timeout=TIMEOUT).run()
    assert_ok(app)
    sidebar = [c.value for c in app.sidebar.caption]
    assert f"Ollama: not reachable at http://127.0.0.1:{port}" in sidebar
    assert any(c.startswith("LLM backend (auto): local · ") for c in sidebar)


# --- answer quality, judge on/off and evaluation cost ---------------------------------------------

QUESTION_COUNT = 12
FAITHFULNESS_SHIFT = 0.25
TIMEOUT_REASON = "timeout after 60 s"
PARSE_REASON = "ragas faithfulness failed: OutputParserException: no JSON in 'I think so'"


def _judge_pair_question(run_id: str, index: int, rerank: str) -> dict[str, list[dict]]:
    """One question's rows for a run of the judge_pair fixture (see there)."""
    question_id = f"q{index}"
    keys = {"run_id": run_id, "question_id": question_id}
    on = rerank == "llm"
    # The judge's shift varies by question (+-0.02 about 0.25): an exactly constant shift has a zero
    # standard error, which gives no p at all (statistics.ZERO_SE_RULE), not the p of this test.
    shift = FAITHFULNESS_SHIFT + (0.02 if index % 2 else -0.02)
    faithfulness, error = 0.3 + 0.04 * index + (shift if on else 0.0), None
    if index == QUESTION_COUNT or (on and index == QUESTION_COUNT - 1):
        faithfulness, error = float("nan"), TIMEOUT_REASON if on else PARSE_REASON
    scores = [
        {**keys, "metric": "recall@1", "value": 1.0, "error": None},
        {**keys, "metric": "faithfulness", "value": faithfulness, "error": error},
        {**keys, "metric": "embedding_groundedness", "value": 0.6, "error": None},
    ]
    if index == 1:
        scores.append({**keys, "metric": "faithfulness.judge_sd", "value": 0.05, "error": None})
    stages = [
        {**keys, "stage": "retrieve", "seconds": 0.01, "cached": False},
        {**keys, "stage": "generate", "seconds": 0.9, "cached": False, "llm_calls": 1, "backend_calls": 1,
         "prompt_tokens": 200, "completion_tokens": 20},
        # evaluation: slower and dearer for the judged run, so counting it would show in the costs
        {**keys, "stage": "eval:faithfulness", "seconds": 5.0 if on else 3.0, "cached": False, "llm_calls": 2,
         "backend_calls": 2, "prompt_tokens": 700 if on else 500, "completion_tokens": 50},
        {**keys, "stage": "eval", "seconds": 0.5, "cached": False},
    ]
    if on:
        stages.append({**keys, "stage": "judge:rerank", "seconds": 0.2, "cached": False, "llm_calls": 1,
                       "backend_calls": 1, "prompt_tokens": 80, "completion_tokens": 6})
    return {
        "scores": scores, "stages": stages,
        "retrievals": [{**keys, "rank": 1, "chunk_id": "c-d1", "doc_id": "d1", "start_char": 0, "end_char": 40,
                        "score": 1.0}],
        "answers": [{**keys, "answer": f"Cats purr, answer {index} [1].", "citations": json.dumps(["c-d1"]),
                     "contexts": json.dumps([TINY_TEXT]), "prompt": "Answer from the sources.", "valid": True,
                     "error": None}],
    }


@pytest.fixture
def judge_pair_results(tmp_path, isolated_data_dir) -> Path:
    """A hand-written results folder 'judge_pair' over 12 questions q1..q12: runs 'off' and 'on'
    differ only in the rerank judge (off -> llm); 'off-k3' is 'off' with top_k 3.

    faithfulness of 'on' is that of 'off' + 0.25 +- 0.02 on q1..q10; it is NaN on q11 for 'on' (timeout)
    and on q12 for every run (timeout for 'on', an unparseable judge reply for the others).
    embedding_groundedness and recall@1 are the same everywhere. Per question the judge adds
    0.2 s and 86 tokens to the pipeline; evaluation (eval:faithfulness, and 0.5 s of eval) costs
    3.5 s / 550 tokens off and 5.5 s / 750 tokens on, which the pipeline costs must not include.
    """
    from ragkit.questions import catalogue
    from ragkit.results import ResultStore
    from ragkit.settings import get_settings

    questions = {f"q{i}": (f"does the cat purr, case {i}", "d1") for i in range(1, QUESTION_COUNT + 1)}
    beir = write_beir(tmp_path / "beir", questions=questions)
    catalogue.register_question_set("pair-beir", beir, "beir")
    out = get_settings().results_root() / "judge_pair"
    store = ResultStore(out)
    for run_id, rerank, top_k in (("off", "off", 1), ("on", "llm", 1), ("off-k3", "off", 3)):
        store.write_run(run_id, {
            "run_id": run_id, "experiment": "judge_pair", "corpus": "beir", "corpus_id": "c", "chunkset_id": "cs",
            "index_id": "ix", "chunker": "document", "embedder": None, "retriever": "bm25", "top_k": top_k,
            "retriever.top_k": top_k, "judge.rerank": rerank, "llm.rerank": "local:smollm" if rerank == "llm" else None,
            "generator": True, "llm.generator": "local:smollm",
        })
        rows: dict[str, list[dict]] = {}
        for index in range(1, QUESTION_COUNT + 1):
            for name, table in _judge_pair_question(run_id, index, rerank).items():
                rows.setdefault(name, []).extend(table)
        store.commit_shard(run_id, list(questions), {name: pd.DataFrame(table) for name, table in rows.items()})
    return out


def plotted(values) -> list:
    """A trace's values from a chart spec: plotly writes numpy arrays as base64 typed arrays."""
    if isinstance(values, dict):
        import base64

        import numpy as np

        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def table_with(app: AppTest, *columns: str) -> pd.DataFrame:
    return next(d.value for d in app.dataframe if set(columns) <= set(d.value.columns))


def test_results_read_judgements_and_answers_on_first_use(judge_pair_results):
    from ragkit.analysis import Results, load_results

    results = load_results(judge_pair_results)
    assert "answers" not in vars(results) and "judgements" not in vars(results)  # nothing read yet
    assert len(results.answers) == 3 * QUESTION_COUNT and results.judgements.empty
    assert "answers" in vars(results)  # read once, then kept
    assert set(results.subset(["on"]).answers["run_id"]) == {"on"}
    assert Results(results.runs, results.scores).answers.empty


def test_compare_charts_answer_quality_and_counts_scored_and_failed(judge_pair_results):
    app = page("5_compare.py", runs="off,on", section="Answer quality")
    app.run()
    assert_ok(app)
    charts = {chart.proto.id: json.loads(chart.proto.spec) for chart in app.get("plotly_chart")}
    quality = next(spec for spec in charts.values()
                   if any(a.get("text") == "answer quality (95% CI)" for a in spec["layout"].get("annotations", [])))
    panels = [a["text"] for a in quality["layout"]["annotations"]]
    assert panels == ["answer quality (95% CI)", "recall@1 (95% CI)", "pipeline ms/question (95% CI)"]
    latency = next(trace for trace in quality["data"] if trace["name"] == "ms/question")
    # the pipeline only: 0.91 s per question off, 1.11 s on (evaluation's 3-5 s left out)
    assert sorted(round(x) for x in plotted(latency["x"])) == [910, 1110]

    counts = table_with(app, "scored", "failed").set_index("metric")
    assert (counts.loc["faithfulness", "scored"], counts.loc["faithfulness", "failed"]) == (21, 3)
    assert counts.loc["faithfulness", "runs_with_failures"] == 2
    assert counts.loc["faithfulness", "judge_sd"] == pytest.approx(0.05)
    assert (counts.loc["embedding_groundedness", "scored"], counts.loc["embedding_groundedness", "failed"]) == (24, 0)
    reasons = table_with(app, "reason", "count")
    assert reasons[["metric", "reason", "count"]].values.tolist() == [
        ["faithfulness", TIMEOUT_REASON, 2], ["faithfulness", "ragas faithfulness failed", 1]]
    assert PARSE_REASON in reasons["example"].tolist()


def test_judge_view_shows_the_pair_its_p_value_and_wins_ties_losses(judge_pair_results):
    app = page("5_compare.py", section="Judges on/off").run()
    assert_ok(app)
    metrics = app.multiselect(key="judge_metrics.judge_pair")
    assert metrics.value == ["recall@1", "faithfulness", "embedding_groundedness"]
    judged = table_with(app, "p (adj.)", "W/T/L").set_index("metric")
    # only the judge pair, though off and off-k3 also differ in one factor
    assert set(judged["judge pair"]) == {"rerank: off → llm"} and len(judged) == 3
    shifted = judged.loc["faithfulness"]
    assert shifted["Δ mean"] == pytest.approx(FAITHFULNESS_SHIFT)
    assert 0 < shifted["CI low"] <= shifted["CI high"] and shifted["n"] == 10
    assert shifted["W/T/L"] == "10/0/0"
    assert shifted["p"] < 0.01
    # one family per metric (its difference and strict difference), whatever other metrics are shown
    assert shifted["p"] <= shifted["p (adj.)"] <= 2 * shifted["p"]
    same = judged.loc["embedding_groundedness"]
    # identical on every question: nothing to test (no p), the interval [0, 0]
    assert np.isnan(same["p"]) and same["W/T/L"] == "0/12/0" and same["CI low"] == 0 == same["CI high"]
    # what turning the judge on cost the pipeline per question, evaluation left out
    assert shifted["Δ ms/question"] == pytest.approx(200.0)
    assert shifted["Δ LLM tokens/question"] == pytest.approx(86.0)
    captions = " ".join(c.value for c in app.caption)
    assert "pairs on faithfulness: " in captions and "pairs on recall@1: " in captions
    assert "strict Δ: over every question both were asked, each failure scored 0" in captions
    forest = [json.loads(chart.proto.spec) for chart in app.get("plotly_chart")]
    assert any([a["text"] for a in spec["layout"].get("annotations", [])][:3]
               == ["Δ recall@1", "Δ faithfulness", "Δ embedding_groundedness"] for spec in forest)

    app.multiselect(key="judge_metrics.judge_pair").set_value(["faithfulness"]).run()
    assert_ok(app)
    alone = table_with(app, "p (adj.)", "W/T/L")
    assert alone["p (adj.)"].tolist() == pytest.approx([shifted["p (adj.)"]])  # the same family alone
    assert app.query_params["judge_metrics"] in (["faithfulness"], "faithfulness")


def test_compare_separates_evaluation_cost_from_pipeline_usage(judge_pair_results):
    app = page("5_compare.py", runs="off,on", section="LLM usage")
    app.run()
    assert_ok(app)
    pipeline = next(d.value for d in app.dataframe
                    if "prompt_tokens" in d.value.columns and "stage" not in d.value.columns).set_index("run")
    assert sorted(pipeline[["llm_calls", "prompt_tokens", "completion_tokens"]].values.tolist()) == [
        [12, 2400, 240], [24, 3360, 312]]
    evaluation = table_with(app, "stage", "prompt_tokens")
    assert sorted(evaluation[["stage", "seconds", "llm_calls", "prompt_tokens"]].values.tolist()) == [
        ["eval", 6.0, 0, 0], ["eval", 6.0, 0, 0], ["eval:faithfulness", 36.0, 24, 6000],
        ["eval:faithfulness", 60.0, 24, 8400]]


def test_drilldown_shows_each_generation_metric_and_why_it_failed(judge_pair_results):
    app = page("6_drilldown.py")
    app.query_params["runs"] = "off,on"
    app.query_params["q"] = f"q{QUESTION_COUNT - 1}"
    app.run()
    assert_ok(app)
    markdown = [m.value for m in app.markdown]
    assert "Cats purr, answer 11 [1]." in markdown
    assert "`faithfulness` **not scored**" in markdown  # 'on' timed out on q11
    assert f"`faithfulness` **{0.3 + 0.04 * 11:.3f}**" in markdown  # 'off' scored it
    assert "`embedding_groundedness` **0.600**" in markdown
    assert f"faithfulness: {TIMEOUT_REASON}" in [c.value for c in app.caption]

    app.query_params["q"] = "q1"
    app.selectbox[-1].select("q1").run()
    assert_ok(app)
    assert any(m.startswith("`faithfulness` **") and "judge sd 0.050" in m for m in (x.value for x in app.markdown))


def test_compare_computes_many_single_factor_pairs_only_when_asked(with_results, monkeypatch):
    from ragkit.analysis import views

    monkeypatch.setattr(views, "PAIRS_SHOWN_UNASKED", 0)  # the tiny experiment's one pair counts as many
    app = page("5_compare.py", section="Single-factor pairs").run()
    assert_ok(app)
    assert not [frame for frame in app.dataframe if {"a -> b", "W/T/L"} <= set(frame.value.columns)]
    assert any("compared only when asked" in caption.value for caption in app.caption)
    app.toggle(key="pair_detail.tiny").set_value(True).run()
    assert_ok(app)
    pairs = table_with(app, "a -> b", "W/T/L")
    assert pairs[["factor", "a -> b"]].values.tolist() == [["top_k", "1 -> 3"]]


def test_compare_recommends_a_run_and_charts_why_questions_fail(with_results):
    app = page("5_compare.py", section="Best configuration").run()
    assert_ok(app)
    texts = " ".join(t.value for t in app.text)
    assert "ranked on" in texts and "not significantly worse" in texts and "Pareto front" in texts
    app = page("5_compare.py", section="Why questions fail").run()
    assert_ok(app)
    assert _chart(app, "Failure class per question")["data"]


def test_drilldown_names_each_runs_failure_class(with_results):
    app = page("6_drilldown.py").run()
    assert_ok(app)
    assert any(m.value.startswith("Class: :") for m in app.markdown)


@pytest.mark.parametrize("case", ["alias structure", "10 MB name"])
def test_hostile_experiment_yaml_on_the_runs_page_is_one_short_error(case):
    from tests.test_bounded_input import BIG, laughs

    good = "name: tiny\ndataset: {path: x}\n"
    text = {"alias structure": good + laughs(), "10 MB name": f"name: {'n' * BIG}\ndataset: {{path: x}}\n"}[case]
    app = page("4_runs.py").run()
    app.text_area[0].set_value(text).run()
    next(b for b in app.button if b.label == "Start").click().run()
    assert not app.exception
    (error,) = app.error
    assert len(error.value) <= 1000 and "\n" not in error.value, error.value[:2000]
    assert {"alias structure": "more than 10,000 values", "10 MB name": "'name'"}[case] in error.value
    assert not app.success


def test_a_10_mb_experiment_name_in_the_form_is_one_short_error():
    from tests.test_bounded_input import BIG

    app = page("3_new_experiment.py").run()
    app.text_input[0].set_value("e" * BIG).run()
    assert not app.exception
    (error,) = app.error
    assert len(error.value) <= 1000 and "'name': String should have at most 100 characters" in error.value


def test_pages_show_what_they_could_read_and_name_a_damaged_part(with_results):
    """A scores part overwritten with 100 random bytes (issue 29): Compare and Export still
    render, with one warning naming the part; the other run is still shown."""
    import os

    from ragkit.results import ResultStore

    store = ResultStore(with_results)
    damaged = store.committed_entries("scores")[0]
    Path(damaged.path).write_bytes(os.urandom(100))
    for name in ("5_compare.py", "7_export.py"):
        app = page(name).run()
        assert not app.exception, [e.value for e in app.exception]
        (warning,) = app.warning
        assert f"scores/{damaged.stem}.parquet could not be read" in warning.value
    assert len(page("5_compare.py", section="Means").run().get("plotly_chart")) > 0  # the readable run


def test_question_sets_page_shows_an_imported_sets_report(tmp_path):
    from ragkit.cli import main
    from ragkit.questions import catalogue
    from tests.conftest import SAMPLE_DATASET

    text = json.loads((SAMPLE_DATASET / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[0])["text"]
    rows = [{"user_input": "What is said first?", "reference": "Free text.", "reference_contexts": [text[300:900]]},
            {"user_input": "And this?", "reference": "More free text.",
             "reference_contexts": ["Bananas grow on large herbaceous flowering plants in the tropics."]}]
    (tmp_path / "testset.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert main(["questions", "import", str(tmp_path / "testset.jsonl"), "--from", "ragas", "--corpus",
                 str(SAMPLE_DATASET), "--out", str(tmp_path / "imported"), "--allow-partial"]) == 0
    catalogue.register_question_set("imported", tmp_path / "imported", "auto")
    app = page("2_question_sets.py").run()
    app.selectbox(key="preview_set").select("imported").run()
    assert not app.exception, [e.value for e in app.exception]
    values = {m.label: m.value for m in app.metric}
    assert values["Located share"] == "50%" and values["Without ground truth"] == "1"
    assert values["Contexts located"] == "1 of 2"
    assert any("no document shares a run of words" in warning.value for warning in app.warning)
