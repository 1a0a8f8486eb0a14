"""A small version of benchmarks/bench_null_size.py: on the quickstart's document structure (18
documents, 5 to 53 questions), the engine's comparisons flag a true null about 5% of the time, a
family of them (its joint test) at most about 5% too, with and without failures, and find a real
effect.
Fewer replications than the benchmark (400: a standard error of about 1.1 points), so a wider
band; benchmarks/README.md has the full table."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.bench_null_size import simulate, structures

pytestmark = pytest.mark.unit

REPS = 400


@pytest.mark.parametrize(("levels", "failures"), [(2, 0.0), (4, 0.05)])
def test_false_positives_near_five_percent_on_the_quickstarts_documents(levels, failures):
    sizes = structures()["quickstart"]
    assert len(sizes) == 18 and sizes.min() == 5 and sizes.max() == 53
    null = simulate(sizes, levels, REPS, failures, effect=0.0, seed=levels)
    # A large effect: fewer replications tell whether it is found.
    power = simulate(sizes, levels, REPS // 4, failures, effect=0.25, seed=100 + levels)
    print(f"{levels} levels, {failures:.0%} failures: size {null.diff.mean():.3f} (diff), {null.strict.mean():.3f} "
          f"(strict), family-wise {null.family.mean():.3f}; power {power.found.mean():.3f}")
    assert 0.02 <= null.diff.mean() <= 0.085 and 0.02 <= null.strict.mean() <= 0.085
    assert 0.025 <= null.family.mean() <= 0.085
    assert power.found.mean() > 0.3
    assert len(null.family) == REPS and np.isin(null.family, [True, False]).all()
