"""A finished results folder with damaged parts heals: the report names them, `ragkit run`
recomputes exactly their questions, the tables equal an undamaged run's, and `ragkit check
--repair` leaves no orphan (issue 29, item 1). bm25 only: no model, no LLM."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest
import yaml

from ragkit.analysis.report import render_report
from ragkit.cli import main
from ragkit.results import ResultStore
from ragkit.results.check import check_folder, orphans
from ragkit.results.schema import COMMITS, DAMAGED

pytestmark = pytest.mark.integration

SAMPLE_DATASET = Path(__file__).resolve().parents[2] / "datasets" / "covidqa_sample"
QUESTIONS = 6
CONFIG = {
    "name": "heal",
    "dataset": {"path": str(SAMPLE_DATASET), "format": "squad", "limit": QUESTIONS},
    "chunkers": ["recursive"], "embedders": [], "retrievers": ["bm25"],
    "top_k": [1, 2, 3, 4],  # four runs, one part per table each once finished
}
# What each table's rows are compared on: the times of a second run differ, and its index is cached.
STAGE_KEYS = ["run_id", "question_id", "stage"]


def _tables(store: ResultStore) -> dict[str, pd.DataFrame]:
    tables = {name: store.read(name).drop(columns=["question_key"]) for name in
              ("scores", "retrievals", "answers", "judgements")}
    tables["stages"] = store.read("stages")[STAGE_KEYS]
    return {name: frame.astype(str).sort_values(list(frame.columns)).reset_index(drop=True)
            for name, frame in tables.items()}


def test_damaged_parts_are_named_recomputed_exactly_and_repaired(tmp_path, capsys):
    config_file = tmp_path / "heal.yaml"
    config_file.write_text(yaml.safe_dump(CONFIG), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", str(config_file), "--out", str(out), "--quiet"]) == 0
    store = ResultStore(out)
    reference = _tables(store)
    store.merge()  # merged read copies, as a folder of 32 parts or more has
    part_of = {record["run_id"]: part for part, record in store.committed_markers()}
    runs = list(store.read("runs").sort_values("top_k")["run_id"])
    truncated, random, missing, intact = (part_of[run] for run in runs)
    capsys.readouterr()

    scores = out / "scores"
    data = (scores / f"{truncated}.parquet").read_bytes()
    (scores / f"{truncated}.parquet").write_bytes(data[: len(data) // 2])
    (scores / f"{random}.parquet").write_bytes(os.urandom(100))
    (scores / f"{missing}.parquet").unlink()
    copy = out / "_merged" / "scores.parquet"
    copy.write_bytes(copy.read_bytes()[:-100])  # the derived copy too: ignored, the parts are read
    (scores / f"{intact[:-12]}0123456789ab.parquet").write_bytes(data)  # written, never committed
    intact_tag = (scores / f"{intact}.parquet").stat().st_mtime_ns

    # The report shows what it could read (the intact run) and names what it could not.
    text = render_report(out)
    for part in (truncated, random, missing):
        assert f"scores/{part}.parquet could not be read" in text
    assert "(missing)" in text and "_merged/scores.parquet could not be read" in text
    rows = {run: next(line for line in text.splitlines() if line.startswith("| recursive") and f"| {run} |" in line)
            for run in runs}
    # The intact run's mrr: 1.000 on all 6 questions (no spread, so no interval: statistics' zero-SE rule).
    assert "| 1.000 - (6/0) |" in rows[runs[3]]
    assert all("| - | - |" in rows[run] for run in runs[:3])

    assert main(["export", str(out), "--format", "csv", "--out", str(tmp_path / "heal.zip")]) == 0
    assert f"scores/{random}.parquet could not be read" in capsys.readouterr().err
    assert main(["check", str(out)]) == 1
    listed = capsys.readouterr().out
    assert "3 damaged part(s)" in listed and "1 orphan file(s)" in listed

    # The run sets the three damaged parts aside and recomputes exactly their runs' questions.
    assert main(["run", str(config_file), "--out", str(out), "--quiet"]) == 0
    said = capsys.readouterr().out
    for part in (truncated, random, missing):
        assert f"damaged: {part} ({QUESTIONS} question(s) of run " in said
    assert f"computed {3 * QUESTIONS} question(s) in 3 run(s)" in said
    assert (scores / f"{intact}.parquet").stat().st_mtime_ns == intact_tag  # untouched
    assert len(list((out / DAMAGED).iterdir())) == 3
    assert _tables(ResultStore(out)).keys() == reference.keys()
    for name, frame in _tables(ResultStore(out)).items():
        pd.testing.assert_frame_equal(frame, reference[name], obj=name)

    # What is left: the orphan and the merged copies that no longer copy the committed parts.
    assert main(["check", str(out), "--repair"]) == 0
    assert f"removed: scores/{intact[:-12]}0123456789ab.parquet" in capsys.readouterr().out
    assert orphans(ResultStore(out)) == [] and check_folder(ResultStore(out)).clean
    assert main(["check", str(out)]) == 0
    assert len(list((out / COMMITS).glob("*.json"))) == len(runs)
