"""ragkit.analysis.judges: judge on/off effects through the comparison engine."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragkit.analysis.judges import judge_effects
from ragkit.analysis.statistics import holm
from tests.analysis.helpers import results_of, run_row

pytestmark = pytest.mark.unit


def test_judge_effects_test_only_the_judge_pairs_of_a_grid():
    """A 2 x 2 grid (rerank judge off/llm x top_k 1/3) has two judge pairs and two top_k pairs;
    only the judge pairs are tested, and Holm covers exactly them."""
    runs = [run_row(f"{judge}-k{k}", top_k=k, **{"judge.rerank": judge}) for judge in ("off", "llm") for k in (1, 3)]
    questions = [f"q{i}" for i in range(12)]
    rng = np.random.default_rng(0)
    base = np.linspace(0.2, 0.6, len(questions))
    scores = pd.concat([pd.DataFrame({
        "run_id": run["run_id"], "question_id": questions, "metric": "faithfulness",
        "value": base + (0.1 + rng.normal(0, 0.02, len(questions)) if run["run_id"].startswith("llm") else 0.0),
        "error": None}) for run in runs], ignore_index=True)
    stages = pd.DataFrame({"run_id": [run["run_id"] for run in runs], "question_id": "q0", "stage": "retrieve",
                           "seconds": 0.01, "prompt_tokens": [0, 0, 40, 40], "completion_tokens": 0})
    effects = judge_effects(results_of(runs, scores, stages=stages), ["faithfulness"])
    assert set(zip(effects["run_a"], effects["run_b"])) == {("off-k1", "llm-k1"), ("off-k3", "llm-k3")}
    assert effects["diff"].to_numpy() == pytest.approx([0.1, 0.1], abs=0.02)
    # one joint test over the judge pairs: between p and Holm's (tests/analysis/test_families.py checks its value)
    assert (effects["p_adj"] >= effects["p"]).all()
    assert (effects["p_adj"] <= holm(effects["p"]) * (1 + 1e-9)).all()
    assert (effects["family_tests"] == 2).all()  # a family of two tests, not four
    assert effects["tokens_diff"].tolist() == [40.0, 40.0]
