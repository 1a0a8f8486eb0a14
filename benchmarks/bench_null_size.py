"""False positives (size) and power of ragkit's comparisons on document structures of real data.

Under a true null, a test at 5% should flag 5% of comparisons, and a family of tests (the factor
table's contrasts on one metric, each with its difference and strict difference) should flag any
of them in at most 5% of families. With questions clustered in documents of uneven size, that is
what small-sample corrections are for (``ragkit.analysis.statistics``: CR2 with Imbens-Kolesar
df). This measures it through the engine's own code: ``differences.pair_differences`` (the
per-question difference and strict difference of each pair, failures at the failure value),
``differences.with_stats`` (each comparison's mean, CI and t test p: the "size" columns) and
``families.with_families`` (the family's step-down minP joint test, difference and strict
difference together; a test alone by its restricted wild bootstrap p: the family-wise columns), which are what
``Comparer.pair_comparisons`` and ``factor_effects`` run on the score matrices. The score matrices
are simulated in memory (thousands of replications of a results folder would be hours of writing).

Document structures (questions per document), from the data when it is there:

- ``quickstart``: the bundled COVID-QA sample, 18 documents with 5 to 53 questions each;
- ``covidqa``: COVID-QA, 98 articles (/work/shared/datasets/covidqa);
- ``scifact``: SciFact's test queries grouped by their first relevant document (BEIR qrels);
- ``gamma``: 40 documents of 1 + Gamma(0.8, 10) questions (fixed seed).

Scores: a recall-like 0/1 metric. Each replication draws a document's difficulty p_d ~ Beta(2, 2)
and, per run, a run x document deviation ~ N(0, 0.15) (a chunker that suits some documents: the
reason questions of one document are not independent); a question scores 1 with probability
clip(p_d + deviation, 0, 1). Null: every level the same; power: one level (the last) +0.10.
Failures: each (run, question) fails with probability 0 or 0.05, independently (a failure is in
the strict difference at 0 and out of the other).

A script, not a test (the suite runs a small version: tests/analysis/test_null_size.py):

    PYTHONPATH=. nice python benchmarks/bench_null_size.py [--reps 2000] [--structures quickstart,gamma]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ragkit.analysis.differences import CASE_COUNTS, pair_differences, with_stats
from ragkit.analysis.families import same_test, with_families
from ragkit.analysis.statistics import holm

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path("/work/shared/datasets")
METRIC = "recall@5"
ALPHA = 0.05
EFFECT = 0.10
RUN_DOCUMENT_SD = 0.15
BLOCK = 250  # replications simulated together (memory: questions x BLOCK x levels floats)


def _counts(values) -> np.ndarray:
    return np.array(sorted(collections.Counter(values).values()))


def structures() -> dict[str, np.ndarray]:
    """Questions per document of each structure whose data is here."""
    found = {}
    sample = ROOT / "datasets" / "covidqa_sample" / "questions.jsonl"
    found["quickstart"] = _counts(json.loads(line)["doc_id"] for line in sample.open(encoding="utf-8"))
    covidqa = SHARED / "covidqa" / "questions.jsonl"
    if covidqa.exists():
        found["covidqa"] = _counts(json.loads(line)["doc_id"] for line in covidqa.open(encoding="utf-8"))
    qrels = SHARED / "scifact" / "beir" / "qrels" / "test.tsv"
    if qrels.exists():
        table = pd.read_csv(qrels, sep="\t", dtype=str)
        found["scifact"] = _counts(table.drop_duplicates("query-id")["corpus-id"])
    found["gamma"] = 1 + np.round(np.random.default_rng(0).gamma(0.8, 10, 40)).astype(int)
    return found


class Matrices:
    """The two arrays ``pair_differences`` reads of ``matrices.ScoreMatrices``, for one metric."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.question_ids = np.arange(values.shape[0])

    def get(self, metric: str) -> tuple[np.ndarray, np.ndarray]:
        return self.values, np.ones(self.values.shape, dtype=bool)


@dataclass
class Outcome:
    """Per replication: whether the test of the difference, of the strict difference, and either
    (after the family's joint adjustment) flagged a null contrast; and whether the contrast with an effect
    was found (adjusted p of either < alpha)."""

    diff: np.ndarray
    strict: np.ndarray
    family: np.ndarray
    found: np.ndarray
    family_holm: np.ndarray  # the same families under Holm over the same tests, for comparison
    found_holm: np.ndarray


def simulate(sizes: np.ndarray, levels: int, reps: int, failures: float, effect: float, seed: int) -> Outcome:
    """``reps`` replications of one factor with ``levels`` levels (2: a single comparison), each
    level a run scored on every question of documents of ``sizes``; each level tested against the
    first (the reference), one family per replication."""
    rng = np.random.default_rng(seed)
    units = np.repeat(np.arange(len(sizes)), sizes)
    n_questions, n_docs = len(units), len(sizes)
    parts = []
    for start in range(0, reps, BLOCK):
        block = min(BLOCK, reps - start)
        runs = block * levels
        difficulty = rng.beta(2, 2, (n_docs, block))
        deviation = rng.normal(0, RUN_DOCUMENT_SD, (n_docs, block, levels))
        deviation[:, :, levels - 1] += effect
        chance = np.clip(difficulty[:, :, None] + deviation, 0, 1).reshape(n_docs, runs)[units]
        values = (rng.random((n_questions, runs)) < chance).astype("float64")
        values[rng.random(values.shape) < failures] = np.nan
        reference = np.repeat(np.arange(block) * levels, levels - 1)
        other = (np.arange(block)[:, None] * levels + np.arange(1, levels)[None, :]).ravel()
        compared = np.full(len(other), METRIC, dtype=object)
        differences = pair_differences(Matrices(values), reference, other, compared)
        rows = pd.DataFrame({"kind": "factor" if levels > 2 else "pair", "factor": "f", "level_a": "0",
                             "level_b": np.tile(np.arange(1, levels), block).astype(str),
                             # one family per replication: the family is per kind and metric
                             "metric": np.repeat([f"{METRIC} #{start + i}" for i in range(block)], levels - 1),
                             **{name: differences[name] for name in CASE_COUNTS}})
        table = with_families(with_stats(rows, differences["diff"], differences["strict"], units, "document"))
        parts.append(table.assign(rep=np.repeat(start + np.arange(block), levels - 1),
                                  last=np.tile(np.arange(1, levels) == levels - 1, block)))
    table = pd.concat(parts, ignore_index=True)
    table = table.assign(**_holm(table))
    flagged = (table["p_adj"] < ALPHA) | (table["strict_p_adj"] < ALPHA)
    holm_flagged = (table["p_holm"] < ALPHA) | (table["strict_p_holm"] < ALPHA)
    per_rep = table.assign(flagged=flagged, holm_flagged=holm_flagged, diff_flag=table["p"] < ALPHA,
                           strict_flag=table["strict_p"] < ALPHA)
    null_rows = per_rep[~per_rep["last"]] if effect else per_rep
    effect_rows = per_rep[per_rep["last"]]
    return Outcome(diff=null_rows["diff_flag"].to_numpy(), strict=null_rows["strict_flag"].to_numpy(),
                   family=null_rows.groupby("rep")["flagged"].any().to_numpy(),
                   found=effect_rows.groupby("rep")["flagged"].any().to_numpy(),
                   family_holm=null_rows.groupby("rep")["holm_flagged"].any().to_numpy(),
                   found_holm=effect_rows.groupby("rep")["holm_flagged"].any().to_numpy())


def _holm(table: pd.DataFrame) -> dict[str, np.ndarray]:
    """Holm over each replication's tests (a row's difference and strict difference, once where
    they are the same test): ``p_holm`` and ``strict_p_holm`` beside the joint test's."""
    once = same_test(table)
    tests = pd.concat([pd.DataFrame({"rep": table["rep"], "row": table.index, "kind": "", "p": table["p"]}),
                       pd.DataFrame({"rep": table["rep"], "row": table.index, "kind": "strict_",
                                     "p": table["strict_p"]})[~once]])
    tests = tests.dropna(subset=["p"])
    adjusted = tests.groupby("rep")["p"].transform(lambda p: holm(p.to_numpy()))
    found = {f"{kind}p_holm": np.full(len(table), np.nan) for kind in ("", "strict_")}
    for kind in ("", "strict_"):
        mine = (tests["kind"] == kind).to_numpy()
        found[f"{kind}p_holm"][tests["row"].to_numpy()[mine]] = adjusted.to_numpy()[mine]
    found["strict_p_holm"] = np.where(once, found["p_holm"], found["strict_p_holm"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reps", type=int, default=2000)
    parser.add_argument("--structures", default="quickstart,covidqa,scifact,gamma")
    parser.add_argument("--levels", default="2,3,4,6,8")
    parser.add_argument("--power-reps", type=int, default=None, help="replications for power (default: --reps)")
    args = parser.parse_args()
    found = structures()
    chosen = [name for name in args.structures.split(",") if name in found]
    started = time.perf_counter()
    print(f"load average before: {os.getloadavg()[0]:.2f}; {args.reps} replications per case "
          f"({args.power_reps or args.reps} for power); "
          f"nominal {ALPHA:.0%}; band [4%, 6%]")
    print("| structure | documents (questions) | levels | failures | size: diff | size: strict | "
          "family-wise (joint test) ± MC SE | family-wise (Holm) | power (joint test) | power (Holm) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    seed = 0
    for name in chosen:
        sizes = found[name]
        for levels in (int(x) for x in args.levels.split(",")):
            for failures in (0.0, 0.05):
                seed += 1
                null = simulate(sizes, levels, args.reps, failures, 0.0, seed)
                power = simulate(sizes, levels, args.power_reps or args.reps, failures, EFFECT, seed + 10_000)
                family = null.family.mean()
                error = np.sqrt(family * (1 - family) / len(null.family))
                mark = "" if 0.04 <= family <= 0.06 else " **out of band**"
                print(f"| {name} | {len(sizes)} ({sizes.sum()}: {sizes.min()}-{sizes.max()}) | "
                      f"{'single' if levels == 2 else levels} | {failures:.0%} | {null.diff.mean():.1%} | "
                      f"{null.strict.mean():.1%} | {family:.1%} ± {error:.1%}{mark} | {null.family_holm.mean():.1%} | "
                      f"{power.found.mean():.1%} | {power.found_holm.mean():.1%} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}; {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
