"""A human-labelled pool end to end, as a researcher walks it: two real COVID-QA runs (bm25, dense;
fixtures/covidqa_two_runs.json) pooled at k=5 by the labels `ragkit summary` prints, the sheet
filled from the dataset's answer spans (the people), a relevance judge (scripted: grade 3 where
the passage holds the answer text, 0 elsewhere, one unreadable reply), then `labels agreement`
and `labels metrics`. Every figure is recomputed here from the spans and grades alone, with
scikit-learn for kappa."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ragkit.cli import main
from ragkit.labels.store import LabelStore
from ragkit.results import ResultStore
from tests.scripted_llm import ScriptedLLM

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
DATASET = ROOT / "datasets" / "covidqa_sample"
FIXTURE = Path(__file__).parent / "fixtures" / "covidqa_two_runs.json"
K = 5
JUDGE_TO_HUMAN = {0: 0, 1: 0, 2: 1, 3: 2}  # the rubric's mapping, restated: the test must not import it


def _questions() -> dict[str, dict]:
    rows = [json.loads(line) for line in (DATASET / "questions.jsonl").read_text(encoding="utf-8").splitlines()]
    return {str(row["id"]): row for row in rows}


def _human_grade(question: dict, doc_id: str, start: int, end: int) -> int:
    """relevant (2) when the chunk covers the answer span, partly (1) when it covers part of it."""
    if doc_id != str(question["doc_id"]):
        return 0
    low, high = int(question["answer_start"]), int(question["answer_end"])
    if start <= low and high <= end:
        return 2
    return 1 if start < high and low < end else 0


class AnswerSpotter(ScriptedLLM):
    """3 where the passage holds the question's answer text, else 0; an unreadable reply for
    the passages holding ``unreadable``."""

    def __init__(self, answers: dict[str, str], unreadable: str) -> None:
        super().__init__(["unused"])
        self.answers, self.unreadable = answers, unreadable

    def _chat(self, messages, *, json_schema, max_tokens):
        reply = super()._chat(messages, json_schema=json_schema, max_tokens=max_tokens)
        prompt = messages[-1]["content"]
        question = prompt.split("\n", 1)[0].removeprefix("Question: ").strip()
        passage = prompt.split('"""', 2)[1]
        if self.unreadable in passage:
            return reply.__class__(text="The passage is relevant.", prompt_tokens=1, completion_tokens=1)
        grade = 3 if self.answers[question] in passage else 0
        return reply.__class__(text=json.dumps({"grade": grade, "reason": "seen"}), prompt_tokens=1,
                               completion_tokens=1)


@pytest.fixture
def walked(tmp_path, monkeypatch, capsys):
    fixture = json.loads(FIXTURE.read_text(encoding="utf-8"))
    questions = _questions()
    retrievals = pd.DataFrame(fixture["retrievals"], columns=["run_id", "question_id", "rank", "doc_id",
                                                              "start_char", "end_char"])
    asked = sorted(set(retrievals["question_id"]))
    store = ResultStore(tmp_path / "results")
    store.write_questions("covidqa", pd.DataFrame([{"question_id": q, "text": questions[q]["question"],
                                                   "document": str(questions[q]["doc_id"])} for q in asked]))
    for run in fixture["runs"]:
        mine = retrievals[retrievals["run_id"] == run["run_id"]].assign(
            chunk_id=lambda f: f["doc_id"] + ":" + f["start_char"].astype(str), score=1.0)
        store.write_run(run["run_id"], run)
        store.commit_shard(run["run_id"], asked, {"retrievals": mine})
    results = str(tmp_path / "results")
    assert main(["summary", results]) == 0
    summary = capsys.readouterr().out.splitlines()
    labels = [line.split(run["run_id"])[0].strip() for run in fixture["runs"] for line in summary
              if run["run_id"] in line]
    assert main(["labels", "pool", results, "--runs", ",".join(labels), "--k", str(K), "--corpus",
                 str(DATASET)]) == 0
    pool = LabelStore(results).latest_pool()
    assert pool is not None
    sheet = tmp_path / "sheet.csv"
    assert main(["labels", "sheet", results, "--out", str(sheet)]) == 0
    with sheet.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:  # the people: answer spans
        row["relevance"] = str(_human_grade(questions[row["question_id"]], row["doc_id"], int(row["start_char"]),
                                            int(row["end_char"])))
    with sheet.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert main(["labels", "add", results, str(sheet), "--annotator", "spans"]) == 0
    # One unreadable reply, on a chunk one run found and the other did not
    texts = {(q.question_id, c.item_id): c for q in pool.questions for c in q.chunks}
    lonely = next(c for c in texts.values() if len(c.runs) == 1 and c.text)
    spotter = AnswerSpotter({q["question"].strip(): q["answer"] for q in questions.values()}, str(lonely.text)[:200])
    from ragkit.llms import base

    monkeypatch.setattr(base.llms, "build", lambda spec: spotter)
    assert main(["labels", "judge", results, "--llm", "local", "--quiet"]) == 0
    capsys.readouterr()
    return results, pool, questions, rows, lonely, fixture


def _table(out: str, title: str | None = None) -> list[dict[str, str]]:
    text = out.split(f"## {title}", 1)[1] if title else out
    lines = [line for line in text.splitlines() if line.startswith("|")]
    lines = lines[: next((i for i, line in enumerate(lines[1:], 1) if not line.startswith("|")), len(lines))]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    return [dict(zip(header, [cell.strip() for cell in line.strip("|").split("|")])) for line in lines[2:]]


def test_agreement_and_metrics_equal_an_independent_computation(walked, capsys):
    from sklearn.metrics import cohen_kappa_score

    results, pool, questions, rows, lonely, fixture = walked
    human = {row["item_id"]: int(row["relevance"]) for row in rows}
    judge = {}
    for question in pool.questions:
        answer = questions[question.question_id]["answer"]
        for chunk in question.chunks:
            if chunk.item_id != lonely.item_id:
                judge[chunk.item_id] = 3 if answer in str(chunk.text) else 0
    items = sorted(judge)
    people = np.array([human[i] for i in items])
    mapped = np.array([JUDGE_TO_HUMAN[judge[i]] for i in items])

    assert main(["labels", "agreement", results, "--resamples", "200"]) == 0
    out = capsys.readouterr().out
    (row,) = [r for r in _table(out, "Judges against people") if r["decision"].startswith("relevance judge")]
    documents = len({q.document for q in pool.questions})
    assert row["items / documents"] == f"{len(items)} / {documents}"
    assert float(row["accuracy"]) == pytest.approx(np.mean(people == mapped), abs=5e-4)
    assert float(row["kappa [95% CI]"].split()[0]) == pytest.approx(cohen_kappa_score(people, mapped), abs=5e-4)
    assert float(row["bias [95% CI]"].split()[0]) == pytest.approx(mapped.mean() - people.mean(), abs=5e-4)
    assert row["invalid left out"] == "1"
    counts = dict(pair.split(":") for pair in row["people's grades"].split())
    assert {name: int(n) for name, n in counts.items()} == {
        "not": int((people == 0).sum()), "partly": int((people == 1).sum()), "relevant": int((people == 2).sum())}
    judged = dict(pair.split(":") for pair in row["judge's grades"].split())
    assert int(judged["3"]) == sum(g == 3 for g in judge.values()) and int(judged["0"]) == sum(
        g == 0 for g in judge.values())
    assert documents < 10 and f"CIs rough ({documents} < 10 documents)" in row["reading"]
    assert "1 invalid judge reply on labelled chunks left out" in out

    assert main(["labels", "metrics", results, "--grades", "judge"]) == 0
    out = capsys.readouterr().out
    table = {r["run"]: r for r in _table(out)}
    retrievals = pd.DataFrame(fixture["retrievals"], columns=["run_id", "question_id", "rank", "doc_id",
                                                              "start_char", "end_char"])
    item_of = {(q.question_id, c.doc_id, c.start_char, c.end_char): c.item_id for q in pool.questions
               for c in q.chunks}
    for run_id, group in retrievals[retrievals["rank"] <= K].groupby("run_id"):
        per_question = []
        for _, top in group.groupby("question_id"):
            ids = [item_of[(q, d, s, e)] for q, d, s, e in
                   top[["question_id", "doc_id", "start_char", "end_char"]].itertuples(index=False)]
            if lonely.item_id in ids:
                continue  # a chunk without a grade: the question is not scored for this run
            per_question.append(np.mean([JUDGE_TO_HUMAN[judge[i]] >= 1 for i in ids]))
        asked = group["question_id"].nunique()
        shown = table[run_id]
        assert float(shown["mean"]) == pytest.approx(np.mean(per_question), abs=5e-4)
        assert shown["questions"] == f"{len(per_question)} of {asked}"
        assert shown["invalid replies"] == ("1" if run_id in lonely.runs else "0")
    short, full = sorted(table.values(), key=lambda r: int(r["questions"].split()[0]))
    assert short["run"] in lonely.runs and re.fullmatch(r"fewer questions \(\d+ vs \d+\)", short["flag"])
    assert full["flag"] == ""
