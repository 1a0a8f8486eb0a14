"""Budgeted search against the full grid: per strategy and seed, the share of the grid's best score
reached at 25% of the grid's cost.

    python benchmarks/bench_search.py covidqa   # the COVID-QA chunk-size grid (needs ../shared/datasets/covidqa)
    python benchmarks/bench_search.py scifact   # SciFact: bm25/dense/hybrid x contextualize x top_k (slow)
    python benchmarks/bench_search.py tiny      # the bundled sample, a tiny bm25 chunk-size grid (seconds)

Options: --seeds 5, --fraction 0.25, --out FOLDER (results; default a folder under the data dir),
--dataset PATH (the dataset folder for covidqa / scifact).

The grid runs once, whole (ordinary runs: a second call resumes and computes nothing). Each
search is then replayed on the grid's own per-question scores: a run is deterministic, so the
value a search would see for a candidate on its first n questions (in the search's seeded
question order) is the mean of those questions' scores in the grid's results. Cost is counted in
question evaluations (a candidate on every question = 1 run), the search module's own rule; it
treats every configuration's question as costing the same, which holds for these retrieval-only
grids (no LLM calls) up to the retrievers' latency differences.

Printed: one markdown row per (strategy, seed): trials, cost, best score found on every question
and its share of the grid's best; then per strategy the mean share and how often the grid's
best configuration itself was found.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GRIDS = {
    # The COVID-QA chunk-size reproduction (experiments/covidqa_chunk_sizes.yaml), widened to a grid
    # worth searching: six token chunk sizes x two top_k, bm25; span recall at 5 chunks.
    "covidqa": {
        "yaml": "experiments/covidqa_chunk_sizes.yaml", "metric": "span_recall@5", "dataset": "covidqa",
        "set": {"chunkers": [{"type": "token", "params": {"chunk_size": size, "chunk_overlap": size // 8}}
                             for size in (128, 256, 384, 512, 768, 1024)], "top_k": [5, 10]},
    },
    # SciFact (experiments/scifact.yaml): bm25 / dense / hybrid x contextualized or not x top_k.
    "scifact": {
        "yaml": "experiments/scifact.yaml", "metric": "ndcg@10", "dataset": "scifact/beir",
        "set": {"chunkers": [{"type": "document", "params": {"contextualize": flag}} for flag in (True, False)],
                "top_k": [10, 20]},
    },
    # The bundled sample: four chunk sizes x two top_k, bm25 only, 40 questions. Runs in seconds.
    "tiny": {
        "yaml": "experiments/quickstart.yaml", "metric": "span_recall@5", "dataset": None,
        "set": {"chunkers": [{"type": "token", "params": {"chunk_size": size, "chunk_overlap": 0}}
                             for size in (64, 128, 256, 512)],
                "embedders": [], "retrievers": ["bm25"], "top_k": [5, 10], "dataset.limit": 40},
    },
}
STRATEGIES = ("grid", "random", "tpe", "halving")


def load_grid(name: str, dataset: str | None):
    import yaml

    from ragkit.experiments.config import config_from_dict

    spec = GRIDS[name]
    path = ROOT / spec["yaml"]
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["dataset"]["path"] = str((path.parent / data["dataset"]["path"]).resolve())
    if spec["dataset"] is not None:
        # The shared datasets sit beside the clone (../shared/datasets), as the tests expect them.
        data["dataset"]["path"] = dataset or str(ROOT.parent / "shared" / "datasets" / spec["dataset"])
    for key, value in spec["set"].items():
        if key.startswith("dataset."):
            data["dataset"][key.split(".", 1)[1]] = value
        else:
            data[key] = value
    data["name"] = f"bench_search_{name}"
    return config_from_dict(data, source=f"{name} grid")


def score_table(out: Path, metric: str):
    """run id x question id -> the metric (failed questions: NaN, left out of means)."""

    from ragkit.results import ResultStore

    scores = ResultStore(out).read("scores")
    chosen = scores[scores["metric"] == metric]
    return chosen.pivot_table(index="run_id", columns="question_id", values="value", aggfunc="first").astype(float)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("grid", choices=sorted(GRIDS))
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--fraction", type=float, default=0.25)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--dataset", help="dataset folder (covidqa, scifact)")
    args = parser.parse_args()

    from ragkit.experiments.runner import prepare, run_experiment
    from ragkit.experiments.search import SearchConfig, search
    from ragkit.experiments.search_run import point_factors, question_order
    from ragkit.settings import get_settings

    config = load_grid(args.grid, args.dataset)
    metric = GRIDS[args.grid]["metric"]
    out = args.out or get_settings().resolved_data_dir() / "bench_search" / args.grid
    report = run_experiment(config, out)
    print(f"grid {args.grid}: {report.runs_total} runs, {report.questions_computed} question(s) computed now",
          file=sys.stderr)
    plan, _ = prepare(config)
    table = score_table(out, metric)
    runs = list(plan.runs)
    question_ids = [q.id for q in plan.questions.questions]
    values = table.reindex(index=[r.run_id for r in runs], columns=question_ids).to_numpy()
    full = [float(row[~_nan(row)].mean()) for row in values]
    grid_best = max(full)
    budget = args.fraction * len(runs)
    factors = [point_factors(run.point) for run in runs]

    print(f"\n{args.grid}: {len(runs)} configurations x {len(question_ids)} questions, {metric}; grid best "
          f"{grid_best:.4f}; budget {budget:.2f} runs ({args.fraction:.0%} of the grid)\n")
    print("| strategy | seed | trials | cost (runs) | best found | share of grid best |")
    print("|---|---|---|---|---|---|")
    shares: dict[str, list[float]] = {s: [] for s in STRATEGIES}
    found: dict[str, int] = dict.fromkeys(STRATEGIES, 0)
    for strategy in STRATEGIES:
        for seed in range(args.seeds if strategy != "grid" else 1):
            order = question_order(plan.questions, seed)

            def evaluate(candidate: int, n: int, order=order) -> tuple[float, bool]:
                row = values[candidate][order[:n]]
                return float(row[~_nan(row)].mean()) if (~_nan(row)).any() else math.nan, True

            settings = SearchConfig(strategy=strategy, budget=budget, seed=seed, objective={"metric": metric})
            result = search(settings, factors, len(question_ids), evaluate)
            best = result.best("maximize", len(question_ids))
            value = full[best.candidate] if best else 0.0
            shares[strategy].append(value / grid_best if grid_best else 0.0)
            found[strategy] += bool(best) and math.isclose(value, grid_best)
            print(f"| {strategy} | {seed} | {len(result.trials)} | {result.cost:.2f} | "
                  f"{value:.4f} | {shares[strategy][-1]:.3f} |")
    print("\n| strategy | mean share | min share | grid's best found |")
    print("|---|---|---|---|")
    for strategy in STRATEGIES:
        print(f"| {strategy} | {statistics.mean(shares[strategy]):.3f} | {min(shares[strategy]):.3f} | "
              f"{found[strategy]}/{len(shares[strategy])} |")
    return 0


def _nan(row):
    import numpy as np

    return np.isnan(row)


if __name__ == "__main__":
    sys.exit(main())
