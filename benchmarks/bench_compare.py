"""How fast the Compare page's library calls are on a large grid: 50 runs x 1,000 questions.

Builds a synthetic results folder (the metric names a real run records, 100-question shards like
a real run, a questions table with 50 source documents), then times load_results and the page's
calls: the factor answers and the single-factor pairs (cluster-robust CIs and p-values), means
with CIs, a curve, latency, the Pareto scatter and the charts, against a baseline measured in the
same process: a plain pandas groupby mean of the same scores table. The goal: load plus page
under 2 s. With --report, also the `ragkit report` markdown (every default metric), which is a
command, not part of the page. A script, not a test:

    PYTHONPATH=. python benchmarks/bench_compare.py [--runs 50] [--questions 1000] [--keep DIR] [--report]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd

from ragkit.analysis import charts, report, views
from ragkit.analysis.latency import latency_by_stage
from ragkit.analysis.loading import load_results
from ragkit.hashing import content_key
from ragkit.metrics.retrieval import run_metrics
from ragkit.results import ResultStore

SHARD_SIZE = 100
QUESTION_SET = "bench"
CHUNKERS = ("token", "sentence", "recursive", "markdown", "semantic")
RETRIEVERS = ("bm25", "dense", "hybrid", "mmr", "dense")


def metric_names(top_k: int) -> list[str]:
    """Exactly what a run with this top_k records for a question with doc and span ground truth."""
    retrieved = [("d1", 0, 10)] * top_k
    return sorted(run_metrics(retrieved, {"d1": 1.0}, [[("d1", 0, 5)]], top_k))


def build(root: Path, n_runs: int, n_questions: int, seed: int = 0, compact: bool = True, workers: int = 1) -> None:
    """``compact``: as ragkit writes results today, every row carries its question's content key,
    each finished run is compacted into one part per table (``ResultStore.compact_run``) and the
    plan's end writes the merged read copies (``ResultStore.merge``); without it, as older
    folders are: one part per 100-question shard, no keys, no merged copies. Each run draws from
    its own generator (``seed``, its index), so ``workers`` processes writing the runs between
    them build the same folder as one (a 1,000-run folder took 21 minutes of CPU)."""
    store = ResultStore(root)
    questions = [f"q{i:05d}" for i in range(n_questions)]
    keys = [content_key("question", question) for question in questions] if compact else None
    store.write_questions(QUESTION_SET, pd.DataFrame({
        "question_id": questions, "text": questions, "document": [f"d{i % 50}" for i in range(n_questions)],
        "n_relevant_docs": 1, "n_answer_groups": 1, "question_key": keys}))
    shares = [range(first, n_runs, workers) for first in range(workers)]
    if workers == 1:
        _write_runs(root, shares[0], n_questions, seed, compact)
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            for done in [pool.submit(_write_runs, root, share, n_questions, seed, compact) for share in shares]:
                done.result()
    if compact:  # as the executor leaves a folder at the end of a plan: merged read copies
        store.merge()


def _write_runs(root: Path, indices: range, n_questions: int, seed: int, compact: bool) -> None:
    """The runs of ``indices``, each committed shard by shard and then compacted (see ``build``)."""
    store = ResultStore(root)
    questions = [f"q{i:05d}" for i in range(n_questions)]
    keys = [content_key("question", question) for question in questions] if compact else None
    for index in indices:
        rng = np.random.default_rng([seed, index])
        top_k = 10 if index % 2 else 5
        run_id = f"run{index:03d}"
        chunker, retriever = CHUNKERS[(index // 2) % 5], RETRIEVERS[(index // 10) % 5]
        store.write_run(run_id, {
            "run_id": run_id, "experiment": "bench", "chunkset_id": f"cs-{chunker}", "index_id": f"ix-{index // 2}",
            "chunker": chunker, "embedder": "minilm", "retriever": retriever, "top_k": top_k, "depth": top_k,
            "chunker.chunk_size": 256 * (1 + index // 10), "retriever.top_k": top_k,
            **({"questions_key": QUESTION_SET} if compact else {}),
        })
        names = metric_names(top_k)
        skill = rng.uniform(0.4, 0.9)
        for start in range(0, n_questions, SHARD_SIZE):
            shard = questions[start:start + SHARD_SIZE]
            values = (rng.uniform(size=(len(shard), len(names))) < skill).astype("float64")
            scores = pd.DataFrame({
                "run_id": run_id, "question_id": np.repeat(shard, len(names)), "metric": np.tile(names, len(shard)),
                "value": values.ravel(), "error": None,
            })
            ranks = np.tile(np.arange(1, top_k + 1), len(shard))
            retrievals = pd.DataFrame({
                "run_id": run_id, "question_id": np.repeat(shard, top_k), "rank": ranks,
                "chunk_id": [f"c{r}" for r in rng.integers(0, 5000, len(ranks))], "doc_id": "d", "start_char": 0,
                "end_char": 100, "score": 1.0 / ranks,
            })
            stages = pd.DataFrame({"run_id": run_id, "question_id": shard, "stage": "retrieve",
                                   "seconds": rng.gamma(2.0, 0.01, len(shard)), "cached": False})
            if start == 0:
                build_rows = pd.DataFrame({"run_id": run_id, "question_id": None, "stage": ["chunk", "embed", "index"],
                                           "seconds": [0.5, 12.0, 0.1], "cached": False})
                stages = pd.concat([stages, build_rows], ignore_index=True)
            store.commit_shard(run_id, shard, {"scores": scores, "retrievals": retrievals, "stages": stages},
                               keys[start:start + SHARD_SIZE] if keys is not None else None)
        if compact:
            store.compact_run(run_id)


def timed(label: str, func, timings: dict[str, float]):
    start = time.perf_counter()
    value = func()
    timings[label] = time.perf_counter() - start
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--keep", help="build (or reuse) the results folder here instead of a temp folder")
    parser.add_argument("--report", action="store_true", help="also time `ragkit report` (default metrics)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.keep) if args.keep else Path(scratch) / "bench"
        if not (root / "runs").exists():
            started = time.perf_counter()
            build(root, args.runs, args.questions)
            print(f"built {args.runs} runs x {args.questions} questions in {time.perf_counter() - started:.1f} s")

        timings: dict[str, float] = {}
        results = timed("load_results", lambda: load_results(root), timings)
        chosen = ("recall@5",)
        names = timed("metric names", lambda: views.metric_names(results), timings)
        timed("read chosen + curve metrics", lambda: views.read_metrics(results, chosen, "recall"), timings)
        scores = results.scores_of(chosen)
        timings["baseline: groupby mean"] = 0.0

        def baseline_mean():
            return scores[scores["metric"] == "recall@5"].groupby("run_id", observed=True)["value"].mean()

        baseline = timed("baseline: groupby mean", baseline_mean, timings)
        effects = timed("factor answers (recall@5)", lambda: views.factor_effects(results, chosen), timings)
        timed("single-factor pairs (recall@5)", lambda: views.pair_effects(results, chosen), timings)
        means = timed("means (recall@5)", lambda: views.means(results, chosen), timings)
        assert np.allclose(means.set_index("run_id")["mean"].sort_index(), baseline.sort_index())
        points = timed("curve(recall)", lambda: views.curve_points(results, "recall"), timings)
        latency = timed("latency_by_stage", lambda: latency_by_stage(results.stages), timings)
        scatter = timed("quality_vs_latency", lambda: views.quality_latency(results, "recall@5"), timings)
        timed("charts (5)", lambda: [charts.metric_bar_chart(means, results.runs),
                                     charts.forest_chart(effects, results.runs),
                                     charts.curve_chart(points, results.runs, "recall"),
                                     charts.latency_chart(latency, results.runs),
                                     charts.pareto_chart(scatter, results.runs)], timings)

        if args.report:
            timed("report (md)", lambda: report.render_report(root), timings)

        print(f"{len(names)} metrics; recall@5: {len(scores):,} score rows")
        reference = timings["baseline: groupby mean"]
        for label, seconds in timings.items():
            print(f"{label:32} {seconds * 1000:9.1f} ms   {seconds / reference:8.1f}x baseline")
        page = sum(v for k, v in timings.items() if k not in ("load_results", "baseline: groupby mean", "report (md)"))
        print(f"{'compare page (no load)':32} {page * 1000:9.1f} ms   {page / reference:8.1f}x baseline")
        total = page + timings["load_results"]
        print(f"{'load + page (goal < 2 s)':32} {total * 1000:9.1f} ms   {'met' if total < 2 else 'MISSED'}")


if __name__ == "__main__":
    main()
