"""What answering costs: latency per stage, LLM calls and tokens, and what evaluation cost apart.

- Per-question stages (retrieve, judges, generate) are averaged over a run's questions. Run-level
  stages (question_id empty: chunk, embed, index) are one-off build costs shared by the runs that
  reuse a chunk set or index: reported as totals (`per_question` False), never amortised.
- Evaluation stages (``eval:<metric>``, the evaluation's LLM calls, and ``eval``, its other work)
  measure the answer after the fact: latency, the Pareto front and pipeline LLM usage leave them
  out; evaluation_cost shows them on their own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ragkit.analysis.means import valid_mask
from ragkit.results.schema import USAGE_FIELDS, is_evaluation_stage

if TYPE_CHECKING:
    from ragkit.analysis.loading import Results

LATENCY_METRIC = "ms/question"


def pipeline_stages(stages: pd.DataFrame) -> pd.DataFrame:
    """The stages a question costs when the pipeline serves it: every stage but ``eval`` and ``eval:*``."""
    return stages[~is_evaluation_stage(stages["stage"])]


def latency_by_stage(stages: pd.DataFrame, pipeline_only: bool = False) -> pd.DataFrame:
    """[run_id, stage, seconds, per_question]: per-question stages as a mean per question,
    run-level build stages (no question id) as their total seconds with per_question False;
    ``pipeline_only``: of the pipeline's stages alone (``pipeline_stages``, without a copy of
    the table).

    A stage's mean is its total over the run's questions divided by the number of questions the
    run answered, so a stage that runs twice in a question (a correction round) counts twice and
    one that only some questions need (a correction at all) is not inflated by the others.
    Rows in the order of a group-by over (run_id, stage); computed on integer codes, as a page of
    a thousand runs has a million stage rows."""
    runs, run_names = _codes(stages["run_id"])
    kinds, stage_names = _codes(stages["stage"])
    questions, _ = _codes(stages["question_id"])
    keep = (runs >= 0) & (kinds >= 0)
    if pipeline_only:
        keep &= ~is_evaluation_stage(stages["stage"]).to_numpy()
    per_question = questions >= 0
    # A group-by's sum skips a missing time.
    seconds = np.nan_to_num(stages["seconds"].to_numpy(dtype="float64", na_value=np.nan))
    asked = keep & per_question
    answered = _distinct_per_run(runs[asked], questions[asked], len(run_names))
    parts = []
    for level, rows in ((True, asked), (False, keep & ~per_question)):
        cell = runs[rows].astype("int64") * len(stage_names) + kinds[rows]
        present = np.flatnonzero(np.bincount(cell, minlength=len(run_names) * len(stage_names)))
        totals = np.bincount(cell, weights=seconds[rows], minlength=len(run_names) * len(stage_names))[present]
        run_at, stage_at = present // len(stage_names), present % len(stage_names)
        parts.append(pd.DataFrame({
            "run_id": run_names[run_at], "stage": stage_names[stage_at],
            "seconds": totals / answered[run_at] if level else totals, "per_question": level,
        }))
    return pd.concat(parts, ignore_index=True).astype({"seconds": "float64", "per_question": bool})


# Above this many (run, question) cells, distinct questions are counted by sorting instead.
DISTINCT_CELLS = 1 << 26


def _distinct_per_run(runs: np.ndarray, questions: np.ndarray, n_runs: int) -> np.ndarray:
    """Per run code, how many distinct question codes its rows have (as floats): marks in a runs
    x questions grid when it is small enough, where np.unique hashed a million pairs in 0.3 s."""
    n_questions = int(questions.max(initial=0)) + 1
    cell = runs.astype("int64") * n_questions + questions
    if n_runs * n_questions <= DISTINCT_CELLS:
        seen = np.zeros(n_runs * n_questions, dtype=bool)
        seen[cell] = True
        return seen.reshape(n_runs, n_questions).sum(axis=1).astype(float)
    cell = np.sort(cell)
    distinct = cell[np.append(True, cell[1:] != cell[:-1])] if len(cell) else cell
    return np.bincount(distinct // n_questions, minlength=n_runs).astype(float)


def _codes(column: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(each row's code, -1 for missing; the distinct values as plain objects) in a group-by's
    order: a categorical's category order, else sorted."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(), column.cat.categories.to_numpy(dtype=object)
    codes, distinct = pd.factorize(column, sort=True, use_na_sentinel=True)
    return codes, np.asarray(distinct, dtype=object)


def run_latency(stages: pd.DataFrame) -> pd.Series:
    """Mean pipeline seconds per question per run: the sum of the per-question stage means of
    the pipeline's stages (a stage's mean over the questions the pipeline answered)."""
    return latency_per_run(latency_by_stage(stages, pipeline_only=True))


def shared_stage_latency(results: Results) -> pd.DataFrame:
    """``latency_by_stage`` of these runs' pipeline stages, computed once for every view of the
    same runs (``Results.derived``): the latency chart, and the per-run latency of the
    comparisons and the Pareto scatter (``latency_per_run``)."""
    return results.derived("stage_latency", lambda: latency_by_stage(results.stages, pipeline_only=True))


def latency_per_run(latency: pd.DataFrame) -> pd.Series:
    """``run_latency`` from the pipeline's ``latency_by_stage`` table."""
    return latency[latency["per_question"]].groupby("run_id", observed=True)["seconds"].sum()


def latency_scores(stages: pd.DataFrame) -> pd.DataFrame:
    """Each question's pipeline time in ms as score rows (metric ``ms/question``), so that
    metric_means gives latency an interval like any metric. Build stages are left out."""
    served = pipeline_stages(stages)
    served = served[served["question_id"].notna()]
    totals = served.groupby(["run_id", "question_id"], observed=True)["seconds"].sum() * 1000
    return totals.rename("value").reset_index().assign(metric=LATENCY_METRIC, error=pd.NA)


def llm_usage(stages: pd.DataFrame) -> pd.DataFrame:
    """Per run: the pipeline's LLM calls, invalid replies and tokens (evaluation left out); empty
    when the runs made no pipeline LLM call. Summed on run codes, in a group-by's order (a
    million stage rows: a filtered copy of the table cost more than the sums)."""
    runs, run_names = _codes(stages["run_id"])
    keep = (runs >= 0) & ~is_evaluation_stage(stages["stage"]).to_numpy()
    mine = runs[keep]
    counts = {field: np.nan_to_num(stages[field].to_numpy(dtype="float64", na_value=np.nan)[keep])
              for field in USAGE_FIELDS}
    if not any(values.any() for values in counts.values()):
        return pd.DataFrame()
    present = np.flatnonzero(np.bincount(mine, minlength=len(run_names)))
    return pd.DataFrame({"run_id": run_names[present], **{
        field: np.bincount(mine, weights=values, minlength=len(run_names))[present].round().astype("int64")
        for field, values in counts.items()}})


def evaluation_cost(stages: pd.DataFrame) -> pd.DataFrame:
    """Per run and evaluation stage: seconds, LLM calls, invalid replies and tokens; empty when
    these runs were not evaluated."""
    columns = ["seconds", *USAGE_FIELDS]
    evaluated = stages[is_evaluation_stage(stages["stage"])].fillna(dict.fromkeys(columns, 0))
    if evaluated.empty:
        return pd.DataFrame()
    cost = evaluated.astype({"stage": "string"}).groupby(["run_id", "stage"], observed=True)[columns].sum()
    return cost.astype(dict.fromkeys(USAGE_FIELDS, "int64")).reset_index().astype({"run_id": object})


def llm_tokens_per_question(stages: pd.DataFrame) -> pd.Series:
    """Per run: prompt + completion tokens of the pipeline's per-question stages, per question."""
    served = pipeline_stages(stages)
    served = served[served["question_id"].notna()]
    tokens = served["prompt_tokens"].fillna(0) + served["completion_tokens"].fillna(0)
    per_run = served.assign(tokens=tokens).groupby("run_id", observed=True)
    return per_run["tokens"].sum() / per_run["question_id"].nunique()


def pareto_front(frame: pd.DataFrame, quality: str, cost: str | list[str]) -> pd.Series:
    """True for rows no other row beats: at least as good on quality (higher) and on every cost
    column (lower) and strictly better on one. Rows with a missing value are never on the front."""
    q = frame[quality].to_numpy(dtype="float64")
    costs = [frame[name].to_numpy(dtype="float64") for name in ([cost] if isinstance(cost, str) else cost)]
    known = ~np.isnan(q)
    at_least_as_good = q[:, None] >= q[None, :]
    strictly_better = q[:, None] > q[None, :]
    for c in costs:
        known &= ~np.isnan(c)
        at_least_as_good &= c[:, None] <= c[None, :]
        strictly_better |= c[:, None] < c[None, :]
    dominates = at_least_as_good & strictly_better & known[:, None]
    dominated = dominates.any(axis=0)
    return pd.Series(known & ~dominated, index=frame.index, name="pareto")


def quality_vs_latency(scores: pd.DataFrame, stages: pd.DataFrame, metric: str) -> pd.DataFrame:
    """[run_id, quality, latency_ms, pareto] for the quality-vs-latency scatter."""
    valid = scores[valid_mask(scores) & (scores["metric"] == metric)]
    quality = valid.groupby("run_id", observed=True)["value"].mean()
    return quality_front(quality, run_latency(stages))


def quality_front(quality: pd.Series, latency_s: pd.Series) -> pd.DataFrame:
    """[run_id, quality, latency_ms, pareto] from per-run quality and pipeline seconds per question."""
    quality = quality.rename("quality").set_axis(quality.index.astype(str))
    latency = (latency_s * 1000).rename("latency_ms").set_axis(latency_s.index.astype(str))
    frame = pd.concat([quality, latency], axis=1).rename_axis("run_id").reset_index()
    frame["pareto"] = pareto_front(frame, "quality", "latency_ms")
    return frame
