"""Which runs were not asked every question: a run stopped part way (killed, out of budget) is
compared only on the questions it reached, and the report names it instead of comparing silently
on the overlap."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ragkit.analysis import matrices as score_matrices
from ragkit.analysis.loading import Results


def partial_runs(results: Results, metrics: list[str]) -> pd.DataFrame:
    """Runs asked fewer of ``metrics``' questions than the folder's runs were asked together:
    run_id, label, asked (questions with a score row of any of the metrics, a failure included) and
    of (questions any run was asked)."""
    matrices = score_matrices.for_results(results)
    if not metrics or not len(matrices.run_ids):
        return pd.DataFrame(columns=["run_id", "label", "asked", "of"])
    matrices.load(metrics)  # first: a load may add questions (rows) to every matrix
    asked = np.zeros((len(matrices.question_ids), len(matrices.run_ids)), dtype=bool)
    for metric in metrics:
        asked |= matrices.get(metric)[1]
    per_run = asked.sum(axis=0)
    total = int(asked.any(axis=1).sum())
    labels = results.runs.set_index("run_id")["label"] if "label" in results.runs.columns else pd.Series(dtype=str)
    short = np.flatnonzero(per_run < total)
    run_ids = [str(matrices.run_ids[i]) for i in short]
    return pd.DataFrame({"run_id": run_ids, "label": [str(labels.get(r, r)) for r in run_ids],
                         "asked": per_run[short].astype(int), "of": total})


def stopped_short(pairs: pd.DataFrame, asked: np.ndarray, base_at: np.ndarray, new_at: np.ndarray,
                 metric: str) -> list[str]:
    """Each new run asked fewer questions of ``metric`` than its baseline run, one sentence each
    (``asked``: questions x runs of the combined matrices)."""
    n_base, n_new = asked[:, base_at].sum(axis=0), asked[:, new_at].sum(axis=0)
    return [f"new run {pair.new_run} ({pair.label}) was asked {int(new)} of the {int(base)} questions its baseline "
            f"run {pair.base_run} was asked on {metric}"
            for pair, base, new in zip(pairs.itertuples(), n_base, n_new) if new < base]
