"""Latency per stage and pipeline LLM usage, computed on integer codes, give what pandas'
group-bys give (the reference below, written the plain way) on random stage tables: plain
strings and categories, missing run or question ids, NaN seconds, nullable counts, evaluation
stages left out or kept."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragkit.analysis import latency
from ragkit.analysis.latency import latency_by_stage, llm_usage, pipeline_stages
from ragkit.results.schema import USAGE_FIELDS

pytestmark = pytest.mark.unit


def reference_latency(stages: pd.DataFrame) -> pd.DataFrame:
    per_question = stages["question_id"].notna()
    asked = stages[per_question]
    answered = asked.groupby("run_id", observed=True)["question_id"].nunique()
    totals = asked.groupby(["run_id", "stage"], observed=True)["seconds"].sum().reset_index()
    question_level = totals.assign(seconds=totals["seconds"] / totals["run_id"].map(answered).astype(float),
                                   per_question=True)
    build_level = (stages[~per_question].groupby(["run_id", "stage"], observed=True)["seconds"].sum()
                   .reset_index().assign(per_question=False))
    table = pd.concat([question_level, build_level], ignore_index=True)[["run_id", "stage", "seconds", "per_question"]]
    return table.astype({"run_id": object, "stage": object})


def reference_usage(stages: pd.DataFrame) -> pd.DataFrame:
    usage = pipeline_stages(stages)[["run_id", *USAGE_FIELDS]].fillna(dict.fromkeys(USAGE_FIELDS, 0))
    if not usage[list(USAGE_FIELDS)].to_numpy().any():
        return pd.DataFrame()
    return usage.groupby("run_id", observed=True).sum().astype("int64").reset_index().astype({"run_id": object})


def random_stages(seed: int, rows: int = 4000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    seconds = rng.gamma(2.0, 0.05, rows)
    seconds[rng.uniform(size=rows) < 0.05] = np.nan
    return pd.DataFrame({
        "run_id": rng.choice(["r2", "r0", "r1", None], rows, p=[0.3, 0.3, 0.38, 0.02]),
        "question_id": rng.choice(["q3", "q1", "q2", "q0", None], rows),
        "stage": rng.choice(["retrieve", "generate", "eval", "eval:faithfulness", "chunk", "judge:rerank"], rows),
        "seconds": seconds, "cached": False,
        **{field: rng.integers(0, 40, rows) for field in USAGE_FIELDS},
    })


FORMS = {
    "strings": lambda frame: frame,
    "categories": lambda frame: frame.astype({"run_id": "category", "question_id": "category", "stage": "category"}),
    "string dtype": lambda frame: frame.astype({"run_id": "string", "question_id": "string", "stage": "string"}),
}


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("form", list(FORMS))
@pytest.mark.parametrize("grid", ["runs x questions marks", "sorted cells"])
def test_latency_by_stage_equals_the_group_by(monkeypatch, seed, form, grid):
    if grid == "sorted cells":  # the count of questions answered for grids too large to mark
        monkeypatch.setattr(latency, "DISTINCT_CELLS", 1)
    stages = FORMS[form](random_stages(seed))
    pd.testing.assert_frame_equal(latency_by_stage(stages), reference_latency(stages), rtol=1e-12)
    pd.testing.assert_frame_equal(latency_by_stage(stages, pipeline_only=True),
                                  reference_latency(pipeline_stages(stages)), rtol=1e-12)


def test_a_missing_time_in_a_nullable_column_is_skipped_as_the_group_by_skips_it():
    stages = random_stages(3).astype({"seconds": "Float64"})
    stages.loc[::9, "seconds"] = pd.NA
    expected = reference_latency(stages).astype({"seconds": "float64"})
    pd.testing.assert_frame_equal(latency_by_stage(stages), expected, rtol=1e-12)


def test_latency_of_no_stage_rows_is_an_empty_table():
    empty = random_stages(0).iloc[:0]
    assert latency_by_stage(empty).empty and latency_by_stage(empty, pipeline_only=True).empty
    assert list(latency_by_stage(empty).columns) == ["run_id", "stage", "seconds", "per_question"]


@pytest.mark.parametrize("form", list(FORMS))
def test_llm_usage_equals_the_group_by(form):
    stages = FORMS[form](random_stages(2))
    pd.testing.assert_frame_equal(llm_usage(stages), reference_usage(stages))
    counts = stages.astype(dict.fromkeys(USAGE_FIELDS, "Int64"))
    counts.loc[::5, "prompt_tokens"] = pd.NA  # a count not recorded is no call, not an error
    pd.testing.assert_frame_equal(llm_usage(counts), reference_usage(counts))


def test_llm_usage_by_hand_and_empty_without_pipeline_calls():
    stages = pd.DataFrame({
        "run_id": ["b", "a", "a", "b"], "question_id": "q1", "stage": ["generate", "generate", "eval:x", "retrieve"],
        "seconds": 1.0, "cached": False, "llm_calls": [1, 2, 7, 0], "backend_calls": [1, 0, 7, 0],
        "invalid_replies": [0, 1, 0, 0], "prompt_tokens": [100, 250, 900, 0], "completion_tokens": [10, 20, 90, 0],
    })
    usage = llm_usage(stages).set_index("run_id")
    assert usage.loc["a"].tolist() == [2, 0, 1, 250, 20]  # the evaluation's call is not the pipeline's
    assert usage.loc["b"].tolist() == [1, 1, 0, 100, 10]
    assert llm_usage(stages[stages["stage"] != "generate"]).empty  # only evaluation called an LLM
