"""The factor table's reference level is fixed before the data, so its family-wise error stays at
5%: a null simulation of 2,000 experiments (8 levels, 30 documents x 5 questions, documents as
clusters) through the engine's own statistics, the same computation checked against
``Comparer.factor_effects`` on one simulated experiment, and a planted effect found with the
power stated. The former rule (each level against the best-scoring one) is simulated beside it to
show the test can fail: it selects the comparison from the data and rejects far more often."""

from __future__ import annotations

import numpy as np
import pytest

from ragkit.analysis.comparison import Comparer, with_adjusted
from ragkit.analysis.statistics import column_stats, holm
from tests.analysis.helpers import results_of, run_row, score_rows

pytestmark = pytest.mark.unit

LEVELS, DOCUMENTS, PER_DOCUMENT, REPETITIONS = 8, 30, 5, 2000
UNITS = np.repeat(np.arange(DOCUMENTS), PER_DOCUMENT)
ALPHA = 0.05


def _experiments(effects: np.ndarray, seed: int) -> np.ndarray:
    """Scores (repetitions x levels x questions): a question's difficulty shared by every level, a
    per-document effect of each level (how well it suits the document) and question noise."""
    rng = np.random.default_rng(seed)
    questions = len(UNITS)
    difficulty = rng.uniform(0.2, 0.8, (REPETITIONS, 1, questions))
    by_document = rng.normal(0, 0.1, (REPETITIONS, LEVELS, DOCUMENTS))[:, :, UNITS]
    noise = rng.normal(0, 0.2, (REPETITIONS, LEVELS, questions))
    return difficulty + by_document + noise + effects[None, :, None]


def _holm_p(scores: np.ndarray, reference: np.ndarray) -> np.ndarray:
    """Per repetition (rows), the Holm p of every level against ``reference[r]`` (NaN for the
    reference itself): the factor table's statistics, vectorised over the repetitions."""
    repetitions = np.arange(len(scores))
    differences = scores - scores[repetitions, reference][:, None, :]  # reps x levels x questions
    p = column_stats(differences.reshape(-1, len(UNITS)).T, UNITS).p_value.reshape(len(scores), LEVELS)
    p[repetitions, reference] = np.nan
    return np.vstack([holm(row) for row in p])


def _family_error(scores: np.ndarray, reference: np.ndarray) -> float:
    return float(np.mean((_holm_p(scores, reference) < ALPHA).any(axis=1)))


def test_a_fixed_reference_keeps_the_family_wise_error_at_five_percent_and_the_best_level_does_not():
    scores = _experiments(np.zeros(LEVELS), seed=26)
    first_level = np.zeros(REPETITIONS, dtype=int)  # what the engine tests against when none is named
    fixed = _family_error(scores, first_level)
    best = _family_error(scores, scores.mean(axis=2).argmax(axis=1))
    monte_carlo = 2 * np.sqrt(ALPHA * (1 - ALPHA) / REPETITIONS)
    print(f"any false positive over {REPETITIONS} null experiments: fixed reference {fixed:.3f}, "
          f"best level {best:.3f}")
    assert fixed <= ALPHA + monte_carlo
    assert best > 0.09  # the former rule: selection by the same data (about 13% with 8 levels)


def test_a_planted_effect_is_found_with_power_above_90_percent():
    effects = np.zeros(LEVELS)
    effects[5] = 0.16  # level 5 is better by 0.16 on every document; the rest are equal
    holm_p = _holm_p(_experiments(effects, seed=7), np.zeros(REPETITIONS, dtype=int))
    power = np.mean(holm_p[:, 5] < ALPHA)
    others = np.mean((np.delete(holm_p, [0, 5], axis=1) < ALPHA).any(axis=1))
    print(f"power at +0.16: {power:.3f}; a false positive among the equal levels: {others:.3f}")
    assert power >= 0.9
    assert others <= ALPHA + 2 * np.sqrt(ALPHA * (1 - ALPHA) / REPETITIONS)


def test_the_simulated_statistics_are_the_factor_tables():
    """One simulated experiment through the engine (8 chunker levels L0..L7, questions grouped by
    document): its factor rows are the simulation's "level vs first level" p, adjusted by the
    family's joint test to between p and Holm (tests/analysis/test_families.py checks its value)."""
    scores = _experiments(np.zeros(LEVELS), seed=3)[:1]
    names = [f"L{level}" for level in range(LEVELS)]
    questions = [f"q{i}" for i in range(len(UNITS))]
    rows = [(name, question, "ndcg@5", float(scores[0, level, i]))
            for level, name in enumerate(names) for i, question in enumerate(questions)]
    results = results_of([run_row(name, chunker=name) for name in names], score_rows(rows),
                         {question: f"doc{unit}" for question, unit in zip(questions, UNITS)})
    table = with_adjusted(Comparer(results).factor_effects(["ndcg@5"])).set_index("level_b")
    assert set(table["level_a"]) == {"L0"} and (table["unit"] == "document").all()
    expected = _holm_p(scores, np.zeros(1, dtype=int))[0]
    differences = scores[0] - scores[0, 0]
    raw = column_stats(differences[1:].T, UNITS).p_value
    np.testing.assert_allclose(table.loc[names[1:], "p"].to_numpy(dtype=float), raw, rtol=1e-9)
    adjusted = table.loc[names[1:], "p_adj"].to_numpy(dtype=float)
    assert (adjusted >= raw).all() and (adjusted <= expected[1:] * (1 + 1e-9)).all()
