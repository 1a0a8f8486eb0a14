"""Judge-human agreement: kappa and alpha equal scikit-learn's and krippendorff's (and a hand-computed
2x2), the confusion table, the bias, and CIs that resample documents, not items."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ragkit.labels.agreement import alpha, kappa, measure
from ragkit.labels.grades import JUDGE_TO_HUMAN
from ragkit.labels.judge_vs_human import answer_agreements, relevance_agreements
from ragkit.labels.store import conform

# The classic 2x2: human yes/judge yes 20, yes/no 5, no/yes 10, no/no 15 (50 items).
# p_o = 35/50 = 0.7; p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5; kappa = (0.7 - 0.5) / 0.5 = 0.4.
# alpha (nominal, 2 coders): coincidences o_yy 40, o_nn 30, o_yn = o_ny 15, n = 100, n_y 55, n_n 45;
# D_o = 30/100, D_e = 2*55*45/(100*99) = 0.5; alpha = 1 - 0.3/0.5 = 0.4.
HUMAN_2X2 = np.array([1] * 20 + [1] * 5 + [0] * 10 + [0] * 15)
JUDGE_2X2 = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15)


def items_of(human, judge, units) -> pd.DataFrame:
    return pd.DataFrame({"unit": units, "human_class": human, "judge_class": judge,
                         "human_value": np.asarray(human, float), "judge_value": np.asarray(judge, float)})


@pytest.mark.unit
def test_kappa_and_alpha_of_a_hand_computed_2x2():
    assert kappa(HUMAN_2X2, JUDGE_2X2, [0, 1]) == pytest.approx(0.4)
    assert alpha(np.vstack([HUMAN_2X2, JUDGE_2X2]).astype(float), [0, 1], "nominal") == pytest.approx(0.4)
    result = measure("d", items_of(HUMAN_2X2, JUDGE_2X2, [f"doc{i % 10}" for i in range(50)]), ["no", "yes"],
                     "nominal", resamples=200)
    assert result.accuracy == pytest.approx(0.7) and result.kappa == pytest.approx(0.4)
    assert result.bias == pytest.approx(0.6 - 0.5)  # judge says yes 30/50, people 25/50
    assert result.confusion.to_numpy().tolist() == [[15, 10], [5, 20]]  # rows human no/yes, columns judge
    assert result.kappa_ci[0] < 0.4 < result.kappa_ci[1]


@pytest.mark.unit
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_kappa_and_alpha_from_labels_equal_the_libraries_on_random_tables(seed):
    import krippendorff
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(seed)
    n = 60
    truth = rng.integers(0, 3, n)
    people = {name: np.where(rng.random(n) < 0.7, truth, rng.integers(0, 3, n)) for name in ("ann", "bo", "cy")}
    judge = np.clip(truth + rng.integers(0, 2, n), 0, 3)  # 0-3, generous
    rows = []
    for i in range(n):
        base = {"pool_id": "p", "question_id": f"q{i // 3}", "document": f"d{i // 6}", "item_kind": "chunk",
                "item_id": f"c{i}", "valid": True}
        rows += [{**base, "annotator": name, "source": "human", "relevance": int(grades[i])}
                 for name, grades in people.items() if not (name == "cy" and i % 4 == 0)]  # cy skipped some
        rows.append({**base, "annotator": "judge:x", "source": "judge", "relevance": int(judge[i])})
    labels = conform(pd.DataFrame(rows))
    (result,) = relevance_agreements(labels, resamples=100)
    # independent: the low median of the people who graded each item, the judge mapped to 0-2
    stacked = np.vstack([people["ann"], people["bo"], np.where(np.arange(n) % 4 == 0, -1, people["cy"])])
    consensus = [sorted(v for v in stacked[:, i] if v >= 0)[(len([v for v in stacked[:, i] if v >= 0]) - 1) // 2]
                 for i in range(n)]
    mapped = np.array([JUDGE_TO_HUMAN[g] for g in judge])
    assert result.kappa == pytest.approx(cohen_kappa_score(consensus, mapped))
    assert result.accuracy == pytest.approx(np.mean(np.array(consensus) == mapped))
    reliability = np.vstack([people["ann"], people["bo"], np.where(np.arange(n) % 4 == 0, np.nan, people["cy"]),
                             mapped]).astype(float)
    assert result.annotators == 3
    assert result.alpha == pytest.approx(krippendorff.alpha(reliability_data=reliability, value_domain=[0, 1, 2],
                                                            level_of_measurement="ordinal"))
    assert result.human_alpha == pytest.approx(krippendorff.alpha(reliability_data=reliability[:3],
                                                                  value_domain=[0, 1, 2],
                                                                  level_of_measurement="ordinal"))
    assert result.bias == pytest.approx(mapped.mean() - np.mean(consensus))
    assert result.confusion.to_numpy().sum() == n


@pytest.mark.unit
def test_cis_resample_documents_so_copies_within_a_document_do_not_narrow_them():
    rng = np.random.default_rng(0)
    human = rng.integers(0, 2, 20)
    judge = np.where(rng.random(20) < 0.7, human, 1 - human)
    one_each = measure("d", items_of(human, judge, [f"doc{i}" for i in range(20)]), ["no", "yes"], "nominal",
                       resamples=400, seed=5)
    copies = measure("d", items_of(np.repeat(human, 5), np.repeat(judge, 5), np.repeat([f"doc{i}" for i in range(20)],
                                                                                        5)), ["no", "yes"], "nominal",
                     resamples=400, seed=5)
    # Same documents, five identical items each: by documents the interval is the same; resampling
    # items would have made it about sqrt(5) times narrower.
    assert copies.kappa == pytest.approx(one_each.kappa)
    assert copies.kappa_ci == pytest.approx(one_each.kappa_ci)
    assert copies.bias_ci == pytest.approx(one_each.bias_ci)
    assert copies.n_units == 20 and copies.n_items == 100


@pytest.mark.unit
def test_answer_metrics_are_measured_against_the_answer_labels():
    base = {"pool_id": "p", "item_kind": "answer", "source": "human", "annotator": "ann"}
    labels = conform(pd.DataFrame([
        {**base, "question_id": "q1", "document": "d1", "item_id": "a1", "run_id": "r1", "correct": 2,
         "grounded": True},
        {**base, "question_id": "q2", "document": "d2", "item_id": "a2", "run_id": "r1", "correct": 0,
         "grounded": False},
        {**base, "question_id": "q3", "document": "d3", "item_id": "a3", "run_id": "r1", "correct": 1,
         "grounded": True},
    ]))
    scores = pd.DataFrame({"run_id": ["r1"] * 6, "question_id": ["q1", "q2", "q3"] * 2,
                           "metric": ["faithfulness"] * 3 + ["answer_accuracy"] * 3,
                           "value": [0.9, 0.7, 0.2, 1.0, 0.2, 0.6], "error": [None] * 6})
    found = {a.decision: a for a in answer_agreements(labels, scores, resamples=100)}
    faithful = found["faithfulness vs grounded"]
    assert faithful.accuracy == pytest.approx(1 / 3)  # judge grounded at >= 0.5: yes, yes, no vs yes, no, yes
    assert faithful.bias == pytest.approx(np.mean([0.9, 0.7, 0.2]) - 2 / 3)
    accuracy = found["answer_accuracy vs correct"]
    assert accuracy.accuracy == pytest.approx(1.0)  # 1.0 -> correct, 0.2 -> wrong, 0.6 -> partly
    assert accuracy.bias == pytest.approx(np.mean([1.0, 0.2, 0.6]) - np.mean([1, 0, 0.5]))


@pytest.mark.unit
def test_the_vectorised_resample_kappas_equal_scikit_learns_weighted_kappa():
    from sklearn.metrics import cohen_kappa_score

    from ragkit.labels.agreement import resampled_kappas

    rng = np.random.default_rng(3)
    human, judge = rng.integers(0, 3, 40), rng.integers(0, 3, 40)
    unit_of_item = rng.integers(0, 8, 40)
    draws = rng.multinomial(8, np.full(8, 1 / 8), size=30)
    found = resampled_kappas(human, judge, unit_of_item, draws, 3)
    expected = [cohen_kappa_score(human, judge, labels=[0, 1, 2], sample_weight=d[unit_of_item].astype(float))
                if d[unit_of_item].sum() else np.nan for d in draws]
    np.testing.assert_allclose(found, expected)
