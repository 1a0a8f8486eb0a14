"""A 12-configuration grid over 2 chunk sets: every chunk text embedded once, and a re-run that
computes nothing, timed against the first run in the same process.

    python benchmarks/bench_grid.py [--questions 60] [--dataset datasets/covidqa_sample]

Writes an experiment YAML to a temporary folder (2 chunkers x 3 retrievers x 2 top_k, no judges,
no generator, so no LLM is needed) and runs it twice with `run_experiment` into a fresh
RAGKIT_DATA_DIR. Checks (#2):

- ExecutionReport.chunks_embedded of the first run == distinct embedded texts over the 2 chunk
  sets (read from the chunk sets' Parquet files); the re-run embeds 0;
- the re-run is >= 20x faster than the first run.

``--questions 0`` uses every question of the dataset (247 for the bundled sample).
A script, not a test.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import REPO_ROOT, Measurement, print_table

SPEEDUP_GOAL = 20.0


def grid(dataset: Path, questions: int) -> dict:
    return {
        "name": "bench-grid",
        "dataset": {"path": str(dataset), "format": "squad", **({"limit": questions} if questions else {})},
        "chunkers": [
            {"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 32}},
            {"type": "sentence", "params": {"chunk_size": 512, "chunk_overlap": 64}},
        ],
        "embedders": ["minilm"],
        "retrievers": ["bm25", "dense", "hybrid"],
        "top_k": [5, 10],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=REPO_ROOT / "datasets" / "covidqa_sample",
                        help="a SQuAD-style dataset folder with its corpus.jsonl")
    parser.add_argument("--questions", type=int, default=60, help="first N questions (0: all)")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        os.environ["RAGKIT_DATA_DIR"] = str(scratch / "data")
        config_path = scratch / "grid.yaml"
        config_path.write_text(yaml.safe_dump(grid(args.dataset.resolve(), args.questions)), encoding="utf-8")

        import pandas as pd

        from ragkit.artefacts.chunksets import chunkset_path
        from ragkit.experiments.config import load_config
        from ragkit.experiments.runner import prepare, run_experiment

        config = load_config(config_path)
        out = scratch / "data" / "results" / "bench-grid"
        timings, reports = [], []
        for attempt in ("first", "re-run"):
            started = time.perf_counter()
            reports.append(run_experiment(config, out))
            timings.append(time.perf_counter() - started)
            report = reports[-1]
            print(f"{attempt:7}: {timings[-1]:7.2f} s, runs {report.runs_computed}/{report.runs_total}, questions "
                  f"computed {report.questions_computed}, chunk sets built {report.chunksets_built}, indexes built "
                  f"{report.indexes_built}, chunks embedded {report.chunks_embedded}")
        plan, derived_dir = prepare(config)
        chunksets = [pd.read_parquet(chunkset_path(derived_dir, step.chunkset_id)) for step in plan.chunk_steps]
        distinct = len(set().union(*(set(frame["text_sha"]) for frame in chunksets)))
        total = sum(len(frame) for frame in chunksets)

    first, rerun = reports
    print(f"{len(plan.runs)} configurations, {len(plan.chunk_steps)} chunk sets: {total} chunks, {distinct} distinct "
          f"texts; first run embedded {first.chunks_embedded}, re-run {rerun.chunks_embedded}")
    print_table([
        Measurement("#2 chunks embedded vs distinct chunk texts", first.chunks_embedded, distinct, "", "== 1.00x",
                    first.chunks_embedded == distinct and rerun.chunks_embedded == 0),
        Measurement("#2 re-run time vs first run", timings[1], timings[0], "s",
                    f"<= {1 / SPEEDUP_GOAL:.2f}x ({SPEEDUP_GOAL:.0f}x)", timings[1] * SPEEDUP_GOAL <= timings[0]),
    ])
    print(f"re-run {timings[0] / timings[1]:.1f}x faster than the first run")


if __name__ == "__main__":
    main()
