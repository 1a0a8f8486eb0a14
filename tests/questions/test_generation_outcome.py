"""The outcome of a generation run: kept of asked, a poor-yield verdict with the top drop reasons
and what to do next, on the CLI's last line, in generation.json and a job's status; and
``--min-kept`` failing the command (exit 1, the set still written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ragkit.app.jobs import JobInfo
from ragkit.cli import main
from ragkit.questions.generation.outcome import EMBEDDED_MODEL, min_kept_failure, model_notice, yield_outcome
from tests.conftest import SAMPLE_DATASET

pytestmark = pytest.mark.unit

REPORTED = {"duplicate": 15, "not_a_question": 10, "answer_not_found": 7, "invalid_reply": 3}  # the issue's run


def test_the_issues_run_is_a_poor_yield_naming_its_top_reasons_and_the_alternatives():
    outcome = yield_outcome(40, 5, REPORTED, model=EMBEDDED_MODEL)
    assert outcome["poor"] and outcome["keep_rate"] == 0.125
    assert outcome["summary"] == ("kept 5 of 40 (12%): poor yield (under half kept); top drop reasons duplicate 15, "
                                  "not_a_question 10, answer_not_found 7")
    assert "--method extractive" in outcome["advice"] and "RAGKIT_OLLAMA_URL" in outcome["advice"]


@pytest.mark.parametrize(("asked", "kept", "poor", "why"), [
    (100, 60, False, ""),
    (40, 30, False, ""),            # 75% and exactly enough for a comparison
    (60, 29, True, "under half"),   # 48%
    (40, 20, True, "fewer than 30"),  # half kept is not under half, but too few
    (40, 25, True, "fewer than 30"),
])
def test_the_thresholds(asked: int, kept: int, poor: bool, why: str):
    outcome = yield_outcome(asked, kept, {})
    assert outcome["poor"] is poor
    assert why in outcome["summary"]
    assert outcome["summary"].startswith(f"kept {kept} of {asked} ")


def test_a_good_rate_with_too_few_questions_advises_asking_for_more():
    assert "--n 48" in yield_outcome(40, 25, {})["advice"]  # 62.5% keeps 30 of 48


def test_min_kept():
    outcome = yield_outcome(40, 5, REPORTED)
    assert min_kept_failure(outcome, None) is None and min_kept_failure(outcome, 5) is None
    assert min_kept_failure(outcome, 6).startswith("kept 5 questions, fewer than --min-kept 6")


def test_the_embedded_model_is_named_with_what_it_can_do():
    notice = model_notice("llm", EMBEDDED_MODEL)
    assert notice.startswith(f"model {EMBEDDED_MODEL} writes the questions; this embedded 135M model keeps about")
    assert "--method extractive" in notice and "--llm openai" in notice
    assert model_notice("llm", "llama3.1:8b") == "model llama3.1:8b writes the questions"


def test_cli_last_line_record_status_and_min_kept_exit_code(tmp_path: Path, capsys):
    out = tmp_path / "set"
    status = tmp_path / "status.json"
    argv = ["questions", "generate", str(SAMPLE_DATASET), "--method", "extractive", "--n", "20", "--out", str(out),
            "--no-embeddings", "--status-file", str(status)]
    assert main([*argv, "--min-kept", "1000"]) == 1
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    record = json.loads((out / "generation.json").read_text(encoding="utf-8"))
    kept = record["kept"]
    assert lines[0].startswith("method extractive")
    assert lines[-1] == f"warning: {record['outcome']['summary']}" and record["outcome"]["poor"]
    assert lines[-1].startswith(f"warning: kept {kept} of 20 ")
    assert "fewer than --min-kept 1000" in captured.err
    assert (out / "questions.jsonl").is_file()  # the set is written all the same
    written = json.loads(status.read_text(encoding="utf-8"))
    assert written["state"] == "failed" and written["outcome"]["summary"] == record["outcome"]["summary"]
    assert (written["done"], written["total"], written["unit"]) == (20, 20, "questions")  # extractive: no LLM calls
    info = JobInfo(job_id="j", experiment="set", out_dir=str(out), created="2026-01-01T00:00:00Z", state="done",
                   kind="questions", outcome=written["outcome"])
    assert info.state_text() == f"done · {record['outcome']['summary']}"

    again = ["questions", "generate", str(SAMPLE_DATASET), "--method", "extractive", "--n", "20", "--out",
             str(tmp_path / "again"), "--no-embeddings", "--min-kept", str(kept)]
    assert main(again) == 0
