"""Budgeted search on scripted objectives: reproducible, resumable, halving finds the optimum."""

from __future__ import annotations

import math

import pytest

from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict
from ragkit.experiments.search import SearchConfig, halving_rungs, search
from tests.factories import write_beir

pytestmark = pytest.mark.unit

# 4 chunkers x 3 retrievers x 3 top_k = 36 candidates; the true score peaks at one of them.
FACTORS = [{"chunker": str(c), "retriever": r, "top_k": str(k)}
           for c in range(4) for r in ("bm25", "dense", "hybrid") for k in (3, 5, 10)]
OPTIMUM = FACTORS.index({"chunker": "2", "retriever": "hybrid", "top_k": "5"})


def true_score(candidate: int) -> float:
    f = FACTORS[candidate]
    return 0.5 - 0.08 * abs(int(f["chunker"]) - 2) + {"bm25": 0.0, "dense": 0.05, "hybrid": 0.1}[f["retriever"]] \
        - 0.03 * abs(int(f["top_k"]) - 5) / 5


def noisy(candidate: int, n: int) -> tuple[float, bool]:
    """The true score plus a deterministic error shrinking with the questions asked (1/sqrt(n))."""
    error = 0.06 * math.sin(7.1 * candidate + 1.3) / math.sqrt(n)
    return true_score(candidate) + error, True


@pytest.mark.parametrize("strategy", ["random", "tpe", "halving"])
def test_a_fixed_seed_proposes_the_same_trials(strategy):
    config = SearchConfig(strategy=strategy, budget=9, seed=7)
    first = search(config, FACTORS, 27, noisy)
    second = search(config, FACTORS, 27, noisy)
    assert [(t.candidate, t.questions) for t in first.trials] == [(t.candidate, t.questions) for t in second.trials]
    assert first.cost <= 9 + 1e-9 and len(first.trials) > 1
    other = search(SearchConfig(strategy=strategy, budget=9, seed=8), FACTORS, 27, noisy)
    assert [t.candidate for t in other.trials] != [t.candidate for t in first.trials]


@pytest.mark.parametrize("strategy", ["random", "tpe", "halving"])
def test_a_search_stopped_after_n_trials_resumes_without_evaluating_them_again(strategy):
    config = SearchConfig(strategy=strategy, budget=8, seed=3)
    whole = search(config, FACTORS, 27, noisy)

    done: dict = {}

    class Killed(Exception):
        pass

    def stop_after_four(trial):
        done[(trial.candidate, trial.questions)] = (trial.value, trial.feasible)
        if len(done) == 4:
            raise Killed

    with pytest.raises(Killed):
        search(config, FACTORS, 27, noisy, on_trial=stop_after_four)
    evaluated = []

    def counting(candidate, n):
        evaluated.append((candidate, n))
        return noisy(candidate, n)

    resumed = search(config, FACTORS, 27, counting, known=done)
    assert [(t.candidate, t.questions, t.value) for t in resumed.trials] == \
        [(t.candidate, t.questions, t.value) for t in whole.trials]
    assert not set(evaluated) & set(done) and len(evaluated) == len({(t.candidate, t.questions)
                                                                     for t in whole.trials}) - 4


def test_halving_finds_the_known_optimum_at_a_fraction_of_the_grid_cost():
    result = search(SearchConfig(strategy="halving", eta=3, seed=0), FACTORS, 81, noisy)
    best = result.best("maximize", 81)
    assert best is not None and best.candidate == OPTIMUM
    # 36 candidates on 3 questions, 12 on 9, 4 on 27, 2 on 81: rungs nested, promoted ones pay only the extra.
    assert halving_rungs(36, 81, 3, None) == [1, 3, 9, 27, 81]
    assert result.cost < 0.25 * len(FACTORS)
    # The first rung alone ranks by noise: its leader is not the optimum.
    first = [t for t in result.trials if t.rung == 0]
    assert max(first, key=lambda t: t.value).candidate != OPTIMUM


def test_constraints_exclude_candidates_and_minimize_reverses():
    def with_latency(candidate, n):
        value, _ = noisy(candidate, n)
        return value, FACTORS[candidate]["retriever"] != "hybrid"  # hybrid breaks a latency budget

    result = search(SearchConfig(strategy="grid"), FACTORS, 9, with_latency)
    assert FACTORS[result.best("maximize", 9).candidate]["retriever"] == "dense"
    worst = min(range(len(FACTORS)), key=lambda c: noisy(c, 9)[0])
    assert result.best("minimize", 9).candidate == worst


def test_the_search_block_is_validated_with_one_line_errors(tmp_path):
    dataset = write_beir(tmp_path / "beir")
    base = {"name": "s", "dataset": {"path": str(dataset)}, "embedders": [], "retrievers": ["bm25"]}
    config = config_from_dict({**base, "search": {"strategy": "tpe", "objective": "ndcg@3", "budget": 2}})
    assert config.search.objective.metric == "ndcg@3" and config.search.objective.direction == "maximize"
    with pytest.raises(ConfigError, match="strategy"):
        config_from_dict({**base, "search": {"strategy": "bayes"}})
    with pytest.raises(ConfigError, match="budget"):
        config_from_dict({**base, "search": {"budget": 0}})
    with pytest.raises(ConfigError, match="min, max or both"):
        config_from_dict({**base, "search": {"constraints": {"ms/question": {}}}})


def test_known_values_carry_over_to_a_larger_budget_but_not_to_another_question_order(tmp_path):
    import json

    from ragkit.experiments.search_run import _known

    state = tmp_path / "search.json"
    earlier = SearchConfig(strategy="random", budget=2, seed=4, objective="ndcg@3")
    state.write_text(json.dumps({"search": earlier.model_dump(mode="json"), "run_ids": ["a", "b"],
                                 "trials": [{"candidate": 1, "questions": 9, "value": 0.5, "feasible": True}]}))
    assert _known(state, earlier.model_copy(update={"budget": 5, "strategy": "tpe"}), ["a", "b"]) == \
        {(1, 9): (0.5, True)}
    assert _known(state, earlier.model_copy(update={"seed": 5}), ["a", "b"]) == {}
    assert _known(state, earlier, ["a", "c"]) == {}
