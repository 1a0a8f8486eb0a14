"""Budgeted search over an experiment's grid: which configurations to run, and on how many questions.

Joint, not stage by stage: a candidate is a whole grid point (chunker, embedder, retriever,
top_k and judges together), so an interaction between stages is seen. Four strategies:

- ``grid``: every candidate in grid order, on every question (the baseline the others save on);
- ``random``: candidates in a seeded random order, on every question;
- ``tpe``: Optuna's TPE sampler over the grid's factors (each factor a categorical with the
  grid's values), seeded; a proposal outside the grid (a factor combination it does not hold)
  runs the grid point that shares the most factors with it;
- ``halving``: successive halving. Every candidate runs on a question subset; the best
  ``1/eta`` go on to a subset ``eta`` times as large, until the survivors run on every question.
  The subsets are nested prefixes of one seeded order of the questions, so a promoted
  candidate answers only the questions it has not answered yet.

Cost is counted in full runs: a candidate on all N questions costs 1, on n questions n/N, and a
candidate already evaluated on n questions costs only the questions beyond n. The search stops
when the next evaluation would pass the budget (None: no limit). It is deterministic given the
seed and the values it sees, so re-running it proposes the same trials: with the values of the
trials already done (``known``, from the state file or the results folder) it resumes where it
stopped without evaluating them again.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

STRATEGIES = ("grid", "random", "tpe", "halving")


class Objective(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str = Field(default="ndcg@10", min_length=1, description="A per-question metric, e.g. ndcg@10, "
                        "span_recall@5, or ms/question (pipeline latency).")
    direction: Literal["maximize", "minimize"] = Field(default="maximize", description="maximize or minimize.")


class Bound(BaseModel):
    model_config = ConfigDict(extra="forbid")

    min: float | None = Field(default=None, description="The run's mean must be at least this.")
    max: float | None = Field(default=None, description="The run's mean must be at most this.")

    @model_validator(mode="after")
    def _some_bound(self) -> Bound:
        if self.min is None and self.max is None:
            raise ValueError("a constraint needs min, max or both")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"constraint min {self.min} is above max {self.max}")
        return self

    def holds(self, value: float) -> bool:
        return not math.isnan(value) and (self.min is None or value >= self.min) \
            and (self.max is None or value <= self.max)


class SearchConfig(BaseModel):
    """The experiment's ``search:`` block."""

    model_config = ConfigDict(extra="forbid")

    strategy: Literal["grid", "random", "tpe", "halving"] = Field(
        default="grid", description="grid, random, tpe (Optuna) or halving (successive halving).")
    budget: float | None = Field(default=None, gt=0, le=1_000_000, description="Most cost to spend, in full runs "
                                 "(one configuration on every question = 1); none: the whole grid's cost.")
    objective: Objective = Field(default_factory=Objective, description="The metric to optimise (a name, or "
                                 "{metric, direction}).")
    constraints: dict[str, Bound] = Field(default_factory=dict, description="metric -> {min, max} a candidate's "
                                          "mean must meet to count, e.g. {ms/question: {max: 80}}.")
    seed: int = Field(default=0, ge=0, description="Seeds the random order, TPE and the halving question order.")
    eta: int = Field(default=3, ge=2, le=10, description="halving: keep the best 1/eta of each rung.")
    min_questions: int | None = Field(default=None, ge=1, description="halving: questions of the first rung "
                                      "(default: as few as keep every rung eta times the one before).")

    @model_validator(mode="before")
    @classmethod
    def _objective_short(cls, value: Any) -> Any:
        if isinstance(value, dict) and isinstance(value.get("objective"), str):
            return {**value, "objective": {"metric": value["objective"]}}
        return value


@dataclass(frozen=True)
class Trial:
    number: int
    candidate: int
    questions: int
    value: float  # the objective's mean on those questions (NaN: nothing scored)
    feasible: bool
    cost: float  # what this trial added to the search's cost (0 when it was known)
    rung: int = 0


@dataclass
class SearchResult:
    strategy: str
    trials: list[Trial] = field(default_factory=list)
    cost: float = 0.0

    def best(self, direction: str = "maximize", questions: int | None = None) -> Trial | None:
        """The best feasible trial on every question (``questions``: the full set's size)."""
        full = [t for t in self.trials if t.feasible and not math.isnan(t.value)
                and (questions is None or t.questions == questions)]
        if not full:
            return None
        return max(full, key=lambda t: t.value) if direction == "maximize" else min(full, key=lambda t: t.value)


# (candidate, questions) -> (objective value, every constraint holds)
Evaluate = Callable[[int, int], tuple[float, bool]]


class _Ledger:
    """Evaluations and their cost: a (candidate, n) pair already known is not evaluated again."""

    def __init__(self, n_questions: int, budget: float | None, evaluate: Evaluate,
                 known: Mapping[tuple[int, int], tuple[float, bool]], on_trial: Callable[[Trial], None]) -> None:
        self.n = n_questions
        self.budget = budget
        self.evaluate = evaluate
        self.known = dict(known)
        self.on_trial = on_trial
        self.asked: dict[int, int] = {}  # candidate -> most questions evaluated on
        self.result = SearchResult(strategy="")

    def price(self, candidate: int, questions: int) -> float:
        return max(0, questions - self.asked.get(candidate, 0)) / self.n

    def affordable(self, candidate: int, questions: int) -> bool:
        return self.budget is None or self.result.cost + self.price(candidate, questions) <= self.budget + 1e-9

    def run(self, candidate: int, questions: int, rung: int = 0) -> Trial:
        cost = self.price(candidate, questions)
        key = (candidate, questions)
        if key not in self.known:
            self.known[key] = self.evaluate(candidate, questions)
        value, feasible = self.known[key]
        self.asked[candidate] = max(self.asked.get(candidate, 0), questions)
        self.result.cost += cost
        trial = Trial(len(self.result.trials), candidate, questions, value, feasible, cost, rung)
        self.result.trials.append(trial)
        self.on_trial(trial)
        return trial


def search(config: SearchConfig, factors: list[dict[str, str]], n_questions: int, evaluate: Evaluate,
           known: Mapping[tuple[int, int], tuple[float, bool]] | None = None,
           on_trial: Callable[[Trial], None] = lambda trial: None) -> SearchResult:
    """Run ``config``'s strategy over the candidates described by ``factors`` (one dict of factor ->
    value per grid point, in grid order). ``evaluate`` scores a candidate on the first n questions
    of the search's question order; ``known`` holds values already measured (resume)."""
    if not factors:
        raise ValueError("a search needs at least one candidate")
    ledger = _Ledger(n_questions, config.budget, evaluate, known or {}, on_trial)
    sign = 1.0 if config.objective.direction == "maximize" else -1.0
    if config.strategy in ("grid", "random"):
        order = list(range(len(factors)))
        if config.strategy == "random":
            order = [int(i) for i in np.random.default_rng(config.seed).permutation(len(factors))]
        for candidate in order:
            if not ledger.affordable(candidate, n_questions):
                break
            ledger.run(candidate, n_questions)
    elif config.strategy == "tpe":
        _tpe(config, factors, ledger, sign)
    else:
        _halving(config, len(factors), ledger, sign)
    ledger.result.strategy = config.strategy
    return ledger.result


def _tpe(config: SearchConfig, factors: list[dict[str, str]], ledger: _Ledger, sign: float) -> None:
    import optuna  # installed after the main install; only this strategy needs it

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    names = sorted({name for f in factors for name in f})
    choices = {name: sorted({f.get(name, "-") for f in factors}) for name in names}
    distributions: dict[str, optuna.distributions.BaseDistribution] = {
        name: optuna.distributions.CategoricalDistribution(values)
        for name, values in choices.items() if len(values) > 1}
    sampler = optuna.samplers.TPESampler(seed=config.seed)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    # Proposals can repeat (a categorical space is small): stop once every candidate has been
    # seen, or after many proposals in a row brought nothing new.
    stale = 0
    while len(ledger.asked) < len(factors) and stale < 4 * len(factors):
        trial = study.ask(distributions)
        wanted = {name: trial.params.get(name, values[0]) for name, values in choices.items()}
        candidate = max(range(len(factors)), key=lambda i: sum(factors[i].get(n, "-") == v for n, v in wanted.items()))
        if not ledger.affordable(candidate, ledger.n):
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            break
        stale = stale + 1 if candidate in ledger.asked else 0
        done = ledger.run(candidate, ledger.n)
        trial.set_constraint("constraints", 0.0 if done.feasible else 1.0)  # <= 0: feasible
        study.tell(trial, sign * done.value if not math.isnan(done.value) else -1e12)


def halving_rungs(n_candidates: int, n_questions: int, eta: int, min_questions: int | None) -> list[int]:
    """Questions per rung, ending at every question: each rung eta times the one before."""
    rungs = max(1, math.ceil(math.log(max(n_candidates, 1)) / math.log(eta))) + 1 if n_candidates > 1 else 1
    sizes = [max(1, math.ceil(n_questions / eta ** (rungs - 1 - r))) for r in range(rungs)]
    if min_questions is not None:
        sizes = [max(size, min(min_questions, n_questions)) for size in sizes]
    return sorted(set(sizes))


def _halving(config: SearchConfig, n_candidates: int, ledger: _Ledger, sign: float) -> None:
    order = [int(i) for i in np.random.default_rng(config.seed).permutation(n_candidates)]
    # With a budget too small for every candidate, the bracket starts from fewer (the first of a
    # seeded order), as many as the budget allows.
    count = n_candidates
    while count > 1 and config.budget is not None and _planned_cost(count, ledger.n, config) > config.budget:
        count -= 1
    survivors = order[:count]
    sizes = halving_rungs(count, ledger.n, config.eta, config.min_questions)
    for rung, size in enumerate(sizes):
        trials = []
        for candidate in survivors:
            if not ledger.affordable(candidate, size):
                return
            trials.append(ledger.run(candidate, size, rung))
        if size == ledger.n:
            return
        ranked = sorted(trials, key=lambda t: (not t.feasible, -(sign * t.value) if not math.isnan(t.value)
                                               else math.inf, t.candidate))
        survivors = [t.candidate for t in ranked[: max(1, math.ceil(len(ranked) / config.eta))]]


def _planned_cost(count: int, n: int, config: SearchConfig) -> float:
    cost, survivors, asked = 0.0, count, 0
    for size in halving_rungs(count, n, config.eta, config.min_questions):
        cost += survivors * (size - asked) / n
        asked = size
        survivors = max(1, math.ceil(survivors / config.eta))
    return cost
