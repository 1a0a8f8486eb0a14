"""Every LLM decision or LLM-scored metric that has people's labels, measured against them.

Decisions and metrics covered:

- ``relevance judge``: the pool's LLM relevance grades (0-3, mapped to 0-2) against people's
  chunk grades (0-2), ordinal.
- LLM-scored answer metrics in the ``scores`` table against people's answer labels
  (``ANSWER_METRICS``): ``faithfulness`` and ``groundedness`` against grounded yes/no (the judge
  says grounded at a value >= 0.5); ``answer_accuracy`` and ``answer_completeness`` against
  correct / partly / wrong (the judge's value read as the nearest of 0, 0.5, 1). The bias is
  on the 0-1 scale: the judge's value minus the person's (wrong 0, partly 0.5, correct 1; not
  grounded 0, grounded 1).
- ``pool_precision@k`` (``pool_metrics``): the share of a run's top-k chunks graded relevant
  or partly (grade >= 1), per question, from the judge's grades and from people's.

``prediction_powered`` gives, for each run and metric with judge values on every question and
people's on a subset, the judge-only, human-only, PPI and PPI++ means (ragkit.labels.ppi).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragkit.labels.agreement import DEFAULT_RESAMPLES, Agreement, measure
from ragkit.labels.grades import GradeSource, chunk_grades, human_consensus, judge_grades
from ragkit.labels.pooling import Pool
from ragkit.labels.ppi import prediction_powered_means
from ragkit.labels.store import CORRECT_NAMES, HUMAN, JUDGE, JUDGE_RELEVANCE_MAX, RELEVANCE_NAMES

# metric -> the answer label it is measured against
ANSWER_METRICS = {"faithfulness": "grounded", "groundedness": "grounded", "answer_accuracy": "correct",
                  "answer_completeness": "correct"}
GROUNDED_NAMES = ("not grounded", "grounded")
POOL_METRIC = "pool_precision"
RELEVANT_FROM = 1  # a chunk graded partly or relevant counts in pool_precision


def _ratings(labels: pd.DataFrame, items: pd.DataFrame, field: str, judge_classes: np.ndarray | None):
    """people (one row each) [+ the judge] x items, NaN where a coder gave no label."""
    people = labels[(labels["source"] == HUMAN) & labels[field].notna()]
    annotators = sorted(people["annotator"].unique())
    keys = list(zip(items["question_id"], items["item_id"]))
    rows = []
    for annotator in annotators:
        given = people[people["annotator"] == annotator]
        lookup = dict(zip(zip(given["question_id"], given["item_id"]), given[field].astype(float)))
        rows.append([lookup.get(key, np.nan) for key in keys])
    human = np.array(rows, dtype=float).reshape(len(annotators), len(keys))
    if judge_classes is None:
        return human, human
    return np.vstack([human, judge_classes[None, :].astype(float)]), human


def relevance_agreements(labels: pd.DataFrame, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> list[Agreement]:
    """Each relevance judge (one per judge annotator, i.e. model) against people on the chunks both
    graded, with the judge's own 0-3 grade counts and its invalid replies on people's chunks counted
    (left out: no grade). A judge whose every reply on people's chunks was invalid still has a row,
    with no items, so its invalid count shows."""
    chunks = labels[labels["item_kind"] == "chunk"]
    human = human_consensus(chunks, "relevance")
    judges = chunks[chunks["source"] == JUDGE]
    if human.empty or judges.empty:
        return []
    units = chunks.drop_duplicates(["question_id"]).set_index("question_id")["document"]
    people_items = set(zip(human["question_id"], human["item_id"]))
    several = judges["annotator"].nunique() > 1
    found = []
    for annotator, mine in judges.groupby("annotator", sort=True):
        graded = judge_grades(mine)
        invalid = mine[~mine["valid"].fillna(False).astype(bool)]
        left_out = sum(key in people_items for key in zip(invalid["question_id"], invalid["item_id"]))
        items = human.merge(graded.rename(columns={"relevance": "judge_class"}), on=["question_id", "item_id"])
        if items.empty and not left_out:
            continue
        items = items.assign(unit=items["question_id"].map(units), human_class=items["relevance"].astype(int),
                             judge_class=items["judge_class"].astype(int))
        items = items.assign(human_value=items["human_class"].astype(float),
                             judge_value=items["judge_class"].astype(float))
        ratings, human_ratings = _ratings(chunks, items, "relevance", items["judge_class"].to_numpy())
        model = f" {str(annotator).removeprefix(f'{JUDGE}:')}" if several else ""
        result = measure(f"relevance judge{model} (chunk grade 0-2)", items, list(RELEVANCE_NAMES), "ordinal",
                         ratings, human_ratings, resamples, seed)
        result.item, result.left_out = "chunk", int(left_out)
        result.judge_scale = {str(grade): int((items["judge_grade"] == grade).sum())
                              for grade in range(JUDGE_RELEVANCE_MAX + 1)}
        found.append(result)
    return found


def _judge_class(values: pd.Series, field: str) -> pd.Series:
    if field == "grounded":
        return (values >= 0.5).astype(int)
    return np.clip(np.floor(values * 2 + 0.5), 0, 2).astype(int)


def _answer_items(labels: pd.DataFrame, scores: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Per labelled answer with a valid value of ``metric``: unit, classes and values."""
    field = ANSWER_METRICS[metric]
    answers = labels[labels["item_kind"] == "answer"]
    human = human_consensus(answers, field)
    if human.empty:
        return pd.DataFrame()
    keys = answers.drop_duplicates("item_id").set_index("item_id")[["run_id", "document"]]
    human = human.join(keys, on="item_id")
    valid = scores[(scores["metric"] == metric) & scores["value"].notna()]
    if "error" in valid.columns:
        valid = valid[valid["error"].isna()]
    items = human.merge(valid[["run_id", "question_id", "value"]], on=["run_id", "question_id"])
    if items.empty:
        return items
    top = len(CORRECT_NAMES) - 1 if field == "correct" else 1
    return items.assign(unit=items["document"], human_class=items[field].astype(int),
                        judge_class=_judge_class(items["value"], field), human_value=items[field] / top,
                        judge_value=items["value"].astype(float))


def answer_agreements(labels: pd.DataFrame, scores: pd.DataFrame, resamples: int = DEFAULT_RESAMPLES,
                      seed: int = 0) -> list[Agreement]:
    found = []
    answers = labels[labels["item_kind"] == "answer"]
    for metric, field in ANSWER_METRICS.items():
        items = _answer_items(labels, scores, metric)
        if items.empty:
            continue
        names = list(CORRECT_NAMES) if field == "correct" else list(GROUNDED_NAMES)
        ratings, human_ratings = _ratings(answers, items, field, items["judge_class"].to_numpy())
        result = measure(f"{metric} vs {field}", items, names, "ordinal" if field == "correct" else "nominal",
                         ratings, human_ratings, resamples, seed)
        result.item, result.left_out = "answer", _failed_answer_scores(answers, scores, metric, field)
        found.append(result)
    return found


def _failed_answer_scores(answers: pd.DataFrame, scores: pd.DataFrame, metric: str, field: str) -> int:
    """Labelled answers whose ``metric`` row has no value (the judge's reply unusable or its call
    failed): left out of the agreement, counted."""
    labelled = answers[answers[field].notna()].drop_duplicates("item_id")[["run_id", "question_id"]]
    failed = scores[(scores["metric"] == metric) & (scores["value"].isna() | (
        scores["error"].notna() if "error" in scores.columns else False))]
    return len(labelled.merge(failed[["run_id", "question_id"]].drop_duplicates(), on=["run_id", "question_id"]))


def pool_metrics(pool: Pool, labels: pd.DataFrame, grades: GradeSource = "combined") -> pd.DataFrame:
    """run_id, question_id, metric (pool_precision@k), value, grades (whose grades it used), per run
    and question whose pooled top-k chunks are all graded by the chosen ``grades``."""
    graded = chunk_grades(labels[labels["pool_id"] == pool.pool_id], grades)
    lookup = {(q, i): (g, s) for q, i, g, s in graded[["question_id", "item_id", "relevance", "grade_source"]]
              .itertuples(index=False)}
    rows = []
    for question in pool.questions:
        for run in pool.runs:
            keys = [(question.question_id, chunk.item_id) for chunk in question.chunks if run in chunk.runs]
            if not keys or any(key not in lookup for key in keys):
                continue  # a chunk of the run's top k without a grade: no value for this run and question
            found = [lookup[key] for key in keys]
            sources = sorted({source for _, source in found})
            rows.append({"run_id": run, "question_id": question.question_id, "document": question.document,
                         "metric": f"{POOL_METRIC}@{pool.k}",
                         "value": float(np.mean([grade >= RELEVANT_FROM for grade, _ in found])),
                         "grades": "+".join(sources)})
    return pd.DataFrame(rows, columns=["run_id", "question_id", "document", "metric", "value", "grades"])


def prediction_powered(labels: pd.DataFrame, scores: pd.DataFrame, pool: Pool | None = None) -> pd.DataFrame:
    """Per run and metric with judge values on every question and people's on some: the judge-only,
    human-only, PPI and PPI++ means and 95% CIs of the people's scale."""
    rows = []
    pairs = []  # (metric, label field, judge values per (run, question), human values per (run, question))
    for metric, field in ANSWER_METRICS.items():
        valid = scores[(scores["metric"] == metric) & scores["value"].notna()]
        if "error" in valid.columns:
            valid = valid[valid["error"].isna()]
        items = _answer_items(labels, scores, metric)
        if items.empty:
            continue
        pairs.append((metric, field, valid[["run_id", "question_id", "value"]],
                      items[["run_id", "question_id", "human_value"]]))
    if pool is not None:
        judged, human = pool_metrics(pool, labels, "judge"), pool_metrics(pool, labels, "human")
        if not judged.empty and not human.empty:
            pairs.append((judged["metric"].iloc[0], "relevance", judged[["run_id", "question_id", "value"]],
                          human[["run_id", "question_id", "value"]].rename(columns={"value": "human_value"})))
    for metric, field, judge_values, human_values in pairs:
        for run_id, run_values in judge_values.groupby("run_id", sort=True):
            labelled = run_values.merge(human_values[human_values["run_id"] == run_id], on=["run_id", "question_id"])
            if labelled.empty:
                continue
            for estimate in prediction_powered_means(run_values["value"].to_numpy(), labelled["value"].to_numpy(),
                                                     labelled["human_value"].to_numpy()):
                rows.append({"run_id": run_id, "metric": metric, "label": field, **estimate.as_row()})
    return pd.DataFrame(rows, columns=["run_id", "metric", "label", "estimator", "mean", "ci_low", "ci_high",
                                       "n_labelled", "n_all", "lam"])
