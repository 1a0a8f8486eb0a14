"""A search's trials as ordinary runs: the grid's plan restricted to one run and a question prefix.

Each trial executes through the same executor into the same results folder, so its rows, run id,
resume and comparisons are those of the grid's point. The search's state (every trial, in order,
with its value) is kept in ``search.json`` in the results folder, written atomically after each
trial; a search restarted after a kill reads it and proposes the same trials again (the same
seed), evaluating none of those already done. Without the file the trials are recomputed from
the results folder all the same: a finished run's questions are not answered again.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ragkit.errors import ConfigError
from ragkit.experiments.config import ExperimentConfig, GridPoint
from ragkit.experiments.executor import LocalExecutor
from ragkit.experiments.plan import Plan, RunStep, questions_key
from ragkit.experiments.search import SearchConfig, SearchResult, Trial, search
from ragkit.questions import QuestionSet
from ragkit.results import ResultStore
from ragkit.storage.atomic import write_json_atomic

STATE_FILE = "search.json"


def point_factors(point: GridPoint) -> dict[str, str]:
    """The grid point as factor -> value (JSON text), the space TPE samples."""
    retriever = {k: v for k, v in point.retriever.params.items() if k != "top_k"}
    factors = {
        "chunker": json.dumps(point.chunker.model_dump(mode="json"), sort_keys=True),
        "embedder": json.dumps(point.embedder.model_dump(mode="json"), sort_keys=True) if point.embedder else "-",
        "retriever": json.dumps({"type": point.retriever.type, "params": retriever}, sort_keys=True),
        "top_k": str(point.top_k),
    }
    for spec in point.judges:
        factors[f"judge.{spec.type}"] = json.dumps(spec.params, sort_keys=True, default=str)
    return factors


def question_order(questions: QuestionSet, seed: int) -> list[int]:
    """One seeded order of the questions; rung subsets are its prefixes."""
    return [int(i) for i in np.random.default_rng(seed).permutation(len(questions.questions))]


def restricted_plan(plan: Plan, run: RunStep, subset: QuestionSet) -> Plan:
    """The plan of one run on ``subset``: its own chunk set and index, the grid's depths kept (so
    its metrics are the grid's)."""
    return replace(plan, questions=subset, questions_key=questions_key(subset), runs=(run,),
                   chunk_steps=tuple(s for s in plan.chunk_steps if s.chunkset_id == run.chunkset_id),
                   index_steps=tuple(s for s in plan.index_steps if s.index_id == run.index_id))


def run_means(store: ResultStore, run_id: str, question_ids: list[str], metrics: list[str]) -> dict[str, float]:
    """The run's mean of each metric over ``question_ids`` (failed questions, NaN, left out);
    ``ms/question`` is the pipeline's latency per question."""
    from ragkit.analysis.latency import LATENCY_METRIC, latency_scores

    scores = store.read("scores")
    rows = scores[(scores["run_id"] == run_id) & scores["question_id"].isin(question_ids)]
    if LATENCY_METRIC in metrics:
        stages = store.read("stages")
        stages = stages[(stages["run_id"] == run_id) & stages["question_id"].isin(question_ids)]
        rows = pd.concat([rows, latency_scores(stages)], ignore_index=True)
    values = pd.to_numeric(rows["value"], errors="coerce")
    means = {}
    for metric in metrics:
        chosen = values[rows["metric"] == metric]
        means[metric] = float(chosen.mean()) if chosen.notna().any() else math.nan
    return means


def check_objective_depth(metric: str, runs: list[RunStep]) -> None:
    """A metric at cut-off k is scored only by runs whose final context reaches k: every candidate
    must score the objective, or the search would compare a value with a gap."""
    match = re.search(r"@(\d+)$", metric)
    shallow = min(runs, key=lambda run: run.depth)
    if match and int(match.group(1)) > shallow.depth:
        raise ConfigError(f"search.objective.metric: '{metric}' is not scored by runs whose final context holds "
                          f"{shallow.depth} chunk(s) (top_k {shallow.point.top_k}); use a cut-off of at most "
                          f"{shallow.depth}, or leave the smaller top_k out of the grid")


def _known(state_path: Path, config: SearchConfig, run_ids: list[str]) -> dict[tuple[int, int], tuple[float, bool]]:
    """Values of trials done by an earlier start of the same search (same settings, same grid)."""
    try:
        state = json.loads(state_path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return {}
    # A value is a fact about (run, question prefix): it holds across strategies and budgets (a
    # larger budget continues a search) as long as the question order, the objective and the
    # constraints are the same, and the grid is.
    same = ("seed", "objective", "constraints")
    earlier = state.get("search") or {}
    if any(earlier.get(name) != config.model_dump(mode="json")[name] for name in same) or \
            state.get("run_ids") != run_ids:
        return {}
    return {(t["candidate"], t["questions"]): (t["value"] if t["value"] is not None else math.nan, t["feasible"])
            for t in state.get("trials", [])}


def run_search(config: ExperimentConfig, plan: Plan, executor: LocalExecutor, store: ResultStore,
               progress: Any = lambda event, n: None) -> SearchResult:
    settings = config.search
    if settings is None:
        raise ConfigError("the experiment has no search: block")
    runs = list(plan.runs)
    check_objective_depth(settings.objective.metric, runs)
    run_ids = [run.run_id for run in runs]
    factors = [point_factors(run.point) for run in runs]
    order = question_order(plan.questions, settings.seed)
    questions = plan.questions.questions
    metrics = [settings.objective.metric, *settings.constraints]
    state_path = Path(str(store.root)) / STATE_FILE

    def evaluate(candidate: int, n: int) -> tuple[float, bool]:
        chosen = [questions[i] for i in order[:n]]
        subset = plan.questions.model_copy(update={"questions": chosen})
        executor.execute(restricted_plan(plan, runs[candidate], subset), progress)
        means = run_means(store, run_ids[candidate], [q.id for q in chosen], metrics)
        if math.isnan(means[settings.objective.metric]) and not store.read("scores").empty:
            known = sorted(store.read("scores")["metric"].dropna().unique())
            if settings.objective.metric not in known:
                raise ConfigError(f"search.objective.metric: no metric '{settings.objective.metric}' in the "
                                  f"results. Valid metrics: {', '.join(known)}")
        feasible = all(bound.holds(means[name]) for name, bound in settings.constraints.items())
        return means[settings.objective.metric], feasible

    trials: list[Trial] = []

    def save(trial: Trial) -> None:
        trials.append(trial)
        write_json_atomic(state_path, {
            "search": settings.model_dump(mode="json"), "run_ids": run_ids, "questions": len(questions),
            "trials": [{**asdict(t), "run_id": run_ids[t.candidate],
                        "value": None if math.isnan(t.value) else t.value} for t in trials],
        })

    return search(settings, factors, len(questions), evaluate, _known(state_path, settings, run_ids), save)


def format_search(result: SearchResult, plan: Plan, config: SearchConfig) -> str:
    runs = list(plan.runs)
    n = len(plan.questions.questions)
    lines = [f"search: {result.strategy}, {len(result.trials)} trial(s), cost {result.cost:.2f} of the grid's "
             f"{len(runs)} full runs"]
    for trial in result.trials:
        flag = "" if trial.feasible else " (fails a constraint)"
        lines.append(f"  #{trial.number} run {runs[trial.candidate].run_id} on {trial.questions}/{n} questions: "
                     f"{config.objective.metric} {trial.value:.4f}{flag}")
    best = result.best(config.objective.direction, n)
    lines.append(f"best on every question: run {runs[best.candidate].run_id}, {config.objective.metric} "
                 f"{best.value:.4f}" if best else "no candidate ran on every question within the budget")
    return "\n".join(lines)
