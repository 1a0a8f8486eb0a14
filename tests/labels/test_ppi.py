"""Prediction-powered means, checked by simulation: PPI's and PPI++'s 95% CIs cover the true mean
93-97% of the time, and are narrower than the human-only CI when the judge is informative."""

from __future__ import annotations

import numpy as np
import pytest

from ragkit.labels.ppi import ppi_interval, prediction_powered_means, tuned_lambda

REPS, N_ALL, N_LABELLED = 2000, 1000, 100
TRUE_MEAN = 0.6


def simulate(seed: int, noise: float):
    """REPS question sets: people's 0/1 verdicts y with mean TRUE_MEAN, a judge scoring
    0.2 + 0.6 y + noise (biased: its mean is 0.56, not 0.6), a random labelled subset."""
    rng = np.random.default_rng(seed)
    human = (rng.random((REPS, N_ALL)) < TRUE_MEAN).astype(float)
    judge = np.clip(0.2 + 0.6 * human + rng.normal(0, noise, (REPS, N_ALL)), 0, 1)
    labelled = np.argsort(rng.random((REPS, N_ALL)), axis=1)[:, :N_LABELLED]
    return judge, np.take_along_axis(judge, labelled, 1), np.take_along_axis(human, labelled, 1)


@pytest.mark.unit
@pytest.mark.parametrize("noise", [0.1, 0.4])
def test_ppi_and_ppi_plus_plus_cover_the_true_mean_and_beat_human_only(noise):
    judge_all, judge_labelled, human = simulate(seed=int(noise * 10), noise=noise)
    human_width = 2 * 1.959964 * human.std(axis=1, ddof=1) / np.sqrt(N_LABELLED)
    for lam in (np.ones(REPS), tuned_lambda(judge_all, judge_labelled, human)):
        _, low, high = ppi_interval(judge_all, judge_labelled, human, lam)
        coverage = np.mean((low <= TRUE_MEAN) & (TRUE_MEAN <= high))
        assert 0.93 <= coverage <= 0.97, coverage
        assert np.mean(high - low) < np.mean(human_width)
    # the judge alone is biased: its CI (around 0.56) almost never covers 0.6
    judge_mean = judge_all.mean(axis=1)
    judge_half = 1.959964 * judge_all.std(axis=1, ddof=1) / np.sqrt(N_ALL)
    assert np.mean(np.abs(judge_mean - TRUE_MEAN) <= judge_half) < 0.5


@pytest.mark.unit
def test_ppi_plus_plus_falls_back_towards_human_only_when_the_judge_is_noise():
    rng = np.random.default_rng(4)
    human = (rng.random((REPS, N_ALL)) < TRUE_MEAN).astype(float)
    judge = rng.random((REPS, N_ALL))  # unrelated to the people
    labelled = np.argsort(rng.random((REPS, N_ALL)), axis=1)[:, :N_LABELLED]
    judge_labelled, human_labelled = np.take_along_axis(judge, labelled, 1), np.take_along_axis(human, labelled, 1)
    lam = tuned_lambda(judge, judge_labelled, human_labelled)
    assert np.median(lam) < 0.2
    _, low, high = ppi_interval(judge, judge_labelled, human_labelled, lam)
    _, plain_low, plain_high = ppi_interval(judge, judge_labelled, human_labelled, np.ones(REPS))
    assert np.mean(high - low) < np.mean(plain_high - plain_low)  # PPI with a useless judge only adds noise
    assert 0.93 <= np.mean((low <= TRUE_MEAN) & (TRUE_MEAN <= high)) <= 0.97


@pytest.mark.unit
def test_the_table_of_estimates_matches_the_vectorised_core_and_hand_values():
    judge_all, judge_labelled, human = (array[0] for array in simulate(seed=9, noise=0.2))
    rows = {row.estimator: row for row in prediction_powered_means(judge_all, judge_labelled, human)}
    assert rows["judge only"].mean == pytest.approx(judge_all.mean())
    assert rows["human only"].mean == pytest.approx(human.mean())
    # PPI: mean of the judge on all + mean of (human - judge) on the labelled
    assert rows["PPI"].mean == pytest.approx(judge_all.mean() + (human - judge_labelled).mean())
    assert rows["PPI"].lam == 1.0
    mean, low, high = ppi_interval(judge_all, judge_labelled, human, rows["PPI++"].lam)
    assert (rows["PPI++"].mean, rows["PPI++"].ci_low, rows["PPI++"].ci_high) == pytest.approx((mean, low, high))
    short = {row.estimator: row for row in prediction_powered_means(judge_all, judge_labelled[:1], human[:1])}
    assert np.isnan(short["PPI"].mean)  # one labelled question: no variance, no estimate
