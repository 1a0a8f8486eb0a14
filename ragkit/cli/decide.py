"""`ragkit best`, `failures`, `compare` and `slices`: from a grid to a decision.

``register`` adds the commands to ``ragkit``'s parser.
Every number comes from ``ragkit.analysis`` (recommend, failure_classes, regression, slices).
"""

from __future__ import annotations

import argparse
import sys

from ragkit.errors import ConfigError
from ragkit.storage.folders import as_location


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text!r}")
    return value


def _cut(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 1000:
        raise argparse.ArgumentTypeError(f"--cut must be a whole number from 1 to 1000, got {text!r}")
    return int(text)


def _cmd_best(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from ragkit.analysis.loading import load_results
    from ragkit.analysis.recommend import BestParams, default_metric, recommend, to_json, to_text

    results = load_results(as_location(args.results))
    if results.runs.empty:
        raise ConfigError(f"no runs in {args.results} yet")
    try:
        params = BestParams(metric=args.metric or default_metric(results), max_latency_ms=args.max_latency_ms,
                            max_cost=args.max_cost, alpha=args.alpha, depth_rule=args.depth_rule)
    except ValidationError as error:
        first = error.errors()[0]
        raise ConfigError(f"--{'-'.join(str(p) for p in first['loc']).replace('_', '-')}: {first['msg']}") from None
    recommendation = recommend(results, params)
    print((to_json if args.format == "json" else to_text)(recommendation), end="")
    return 0


def _cmd_failures(args: argparse.Namespace) -> int:
    from ragkit.analysis.failure_classes import class_counts, failure_classes
    from ragkit.analysis.loading import load_results

    results = load_results(as_location(args.results))
    if args.run:
        results = results.subset([args.run])
    classes = failure_classes(results, cut=args.cut)
    if args.format == "json":
        import json

        from ragkit.analysis.json_rows import json_records

        print(json.dumps(json_records(classes), indent=1))
        return 0
    counts = class_counts(classes)
    labels = dict(zip(results.runs["run_id"].astype(str), results.runs.get("label", results.runs["run_id"])))
    counts.insert(1, "label", counts["run_id"].map(labels))
    print(f"why each question fails (cut: first {args.cut} chunks; rules: `ragkit.analysis.failure_classes`):")
    print(counts.to_string(index=False))
    if args.run:
        print()
        print(classes.drop(columns="run_id").to_string(index=False))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    from ragkit.analysis.regression import run_gate

    text, code = run_gate(as_location(args.baseline), as_location(args.new), args.fail_if, args.allow_different,
                          args.format, args.allow_partial)
    print(text, end="")
    sys.stdout.flush()
    return code


def _cmd_slices(args: argparse.Namespace) -> int:
    import json

    from ragkit.analysis.comparison import family_adjustment
    from ragkit.analysis.json_rows import json_records
    from ragkit.analysis.loading import load_results
    from ragkit.analysis.report import default_metrics
    from ragkit.analysis.slices import FAMILIES_OVER_SLICES, sliced, to_text

    results = load_results(as_location(args.results))
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else \
        default_metrics(results.scores)
    result = sliced(results, metrics, args.by, pairs=not args.no_detail)
    if args.format == "json":
        print(json.dumps({"column": result.column, "sizes": result.sizes.to_dict(),
                          "family": FAMILIES_OVER_SLICES,
                          "families": family_adjustment(result.comparisons),
                          "means": json_records(result.means),
                          "comparisons": json_records(result.comparisons)}, indent=1))
    else:
        print(to_text(result), end="")
    return 0


def add_parser(sub) -> None:
    """Add `best`, `failures`, `compare` and `slices` to the `ragkit` subcommands."""
    best = sub.add_parser("best", help="the best configuration under latency and cost constraints, the runs not "
                                       "significantly worse, the Pareto front and the factor that mattered most")
    best.add_argument("results", help="results folder")
    best.add_argument("--metric", help="metric to maximise (default: the experiment's search objective, else "
                                       "ndcg@10)")
    best.add_argument("--max-latency-ms", type=_positive_float, help="most pipeline ms per question")
    best.add_argument("--max-cost", type=_positive_float, help="most pipeline LLM tokens per question")
    best.add_argument("--alpha", type=float, default=0.05, help="family-wise error rate (default 0.05)")
    best.add_argument("--depth-rule", default="common", choices=["common", "asked"],
                      help="compare runs of different final depths at the common depth (default) or as asked")
    best.add_argument("--format", default="text", choices=["text", "json"])
    best.set_defaults(func=_cmd_best)

    failures = sub.add_parser("failures", help="why each question fails: one class per question of each run")
    failures.add_argument("results", help="results folder")
    failures.add_argument("--run", help="one run: also list each question's class")
    failures.add_argument("--cut", type=_cut, default=5, metavar="K",
                          help="chunks that count as shown (default 5)")
    failures.add_argument("--format", default="text", choices=["text", "json"])
    failures.set_defaults(func=_cmd_failures)

    compare = sub.add_parser("compare", help="regression gate: compare a new results folder with a baseline; exit 1 "
                                             "on a significant regression, 2 when they are not comparable")
    compare.add_argument("baseline", help="baseline results folder")
    compare.add_argument("new", help="new results folder")
    compare.add_argument("--fail-if", action="append", default=[], metavar="'METRIC < T'",
                         help="fail when new - baseline is significantly below T (or above, with >); repeatable")
    compare.add_argument("--allow-different", action="store_true",
                         help="compare even when question sets, corpora or LLMs differ (they are listed)")
    compare.add_argument("--allow-partial", action="store_true",
                         help="compare even when a new run was asked fewer questions than its baseline run (a run "
                              "that stopped short), on the questions both were asked")
    compare.add_argument("--format", default="text", choices=["text", "json"])
    compare.set_defaults(func=_cmd_compare)

    slices = sub.add_parser("slices", help="means and comparisons within each value of a question column (e.g. "
                                           "document), p adjusted by one joint test per family over every slice")
    slices.add_argument("results", help="results folder")
    slices.add_argument("--by", required=True, help="a column of the questions table, e.g. document")
    slices.add_argument("--metrics", help="comma-separated metrics (default: the report's)")
    slices.add_argument("--no-detail", action="store_true", help="factor rows only, no single-factor pairs")
    slices.add_argument("--format", default="text", choices=["text", "json"])
    slices.set_defaults(func=_cmd_slices)
