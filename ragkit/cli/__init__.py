"""`ragkit` command line: ingest corpora, run experiment grids, print summaries."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ragkit.errors import ConfigError
from ragkit.quoting import clipped, one_line
from ragkit.storage.folders import as_location

# The dashboard reads files under the server's paths and runs jobs: anything but loopback needs a token.


def _cmd_run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from ragkit.experiments.config import load_config
    from ragkit.experiments.runner import make_executor, prepare
    from ragkit.experiments.status import BuildProgress, StatusWriter, indexes_to_build
    from ragkit.results import ResultStore
    from ragkit.results.output_folder import check_output_folder
    from ragkit.settings import get_settings

    config = load_config(args.config, args.overrides)
    out_dir = as_location(args.out) if args.out else get_settings().results_root() / config.name
    if isinstance(out_dir, Path) and out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"--out {out_dir} is a file: give a folder for the results")
    if args.dry_run:
        from ragkit.experiments.estimate import dry_run, format_estimate

        estimate = dry_run(config, out_dir)
        print(estimate.model_dump_json(indent=2) if args.format == "json" else format_estimate(estimate))
        return 0
    check_output_folder(out_dir, force=args.force)
    if args.status_file:
        _check_output_file(args.status_file, "--status-file")
    if args.executor == "ray":  # before anything is ingested or written
        from ragkit.experiments.ray_executor import require_ray

        require_ray()
    plan, derived_dir = prepare(config)
    total = len(plan.runs) * len(plan.questions.questions)
    print(f"experiment '{config.name}': {len(plan.runs)} runs x {len(plan.questions.questions)} questions, "
          f"{len(plan.chunk_steps)} chunk sets, {len(plan.index_steps)} indexes -> {out_dir}")
    if config.dataset.documents == "questions":
        print(f"corpus: the questions' {len(plan.corpus.documents)} document(s) only (dataset.documents: questions)")
    status = StatusWriter(Path(args.status_file), total) if args.status_file else None
    builds = BuildProgress(indexes_to_build(plan, derived_dir))
    with tqdm(total=total, unit="q", desc="questions", disable=args.quiet) as bar:
        def progress(event: str, amount: int) -> None:
            if event == "questions":
                bar.update(amount)
                if status:
                    status.advance(amount)
            elif builds.event(event, amount):
                # While an index is built the question bar stands still: say why, with the build's own ETA.
                detail = builds.text()
                bar.set_postfix_str(detail or "", refresh=True)
                if status:
                    status.describe(detail)

        try:
            executor = make_executor(args.executor, derived_dir, ResultStore(out_dir), args.address, args.num_cpus)
            if config.search is not None:  # trials are ordinary runs of the grid (ragkit.experiments.search_run)
                from ragkit.experiments.search_run import format_search, run_search

                print(format_search(run_search(config, plan, executor, ResultStore(out_dir), progress), plan,
                                    config.search))
                _print_summary(ResultStore(out_dir))
                return 0
            report = executor.execute(plan, progress)
        except Exception as error:
            if status:
                status.finish(f"{type(error).__name__}: {error}")
            raise
    if status:
        status.finish()
    for damaged in report.set_aside:
        print(f"damaged: {damaged.describe()}; set aside in {damaged.set_aside_in}; its "
              f"{len(damaged.question_ids)} question(s) were computed again")
    if report.nothing_to_do:
        print("nothing new to compute: every run of this experiment is already complete")
    print(f"computed {report.questions_computed} question(s) in {report.runs_computed} run(s); "
          f"built {report.chunksets_built} chunk set(s), {report.indexes_built} index(es); "
          f"chunks embedded: {report.chunks_embedded}; {report.seconds:.1f} s")
    _print_summary(ResultStore(out_dir))
    return 0


def _print_summary(store) -> None:
    from ragkit.analysis.failures import format_failures, metric_failures
    from ragkit.analysis.summary import format_summary, summary_table

    print(format_summary(summary_table(store)))
    failures = format_failures(metric_failures(store.read("scores")))
    if failures:
        print(failures)
    for line in store.unreadable():  # what could not be read is named, not fatal
        print(line, file=sys.stderr)


def _cmd_summary(args: argparse.Namespace) -> int:
    from ragkit.results import ResultStore

    store = ResultStore(as_location(args.results))
    if not store.exists():
        raise ConfigError(f"no results folder at {args.results} (expected a 'runs' subfolder)")
    _print_summary(store)
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    from ragkit.results import ResultStore

    store = ResultStore(as_location(args.results))
    if not store.exists():
        raise ConfigError(f"no results folder at {args.results} (expected a 'runs' subfolder)")
    with store.writer_lock():
        runs, parts = store.compact()
        merged = store.merge()
    print(f"{args.results}: {runs} run(s) compacted from {parts} parts into one part per table each"
          if runs else f"{args.results}: nothing to compact (every run has one part per table)")
    if merged:
        print(f"{args.results}: merged read copies written: {', '.join(merged)}")
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from ragkit.results import ResultStore
    from ragkit.results.check import check_command

    store = ResultStore(as_location(args.results))
    if not store.exists():
        raise ConfigError(f"no results folder at {args.results} (expected a 'runs' subfolder)")
    return check_command(store, args.results, args.repair)


def _check_output_file(path: str | None, option: str) -> None:
    if path and Path(path).is_dir():
        raise ConfigError(f"{option} {path} is a folder: give a file name inside it")


def _cmd_export(args: argparse.Namespace) -> int:
    from ragkit.analysis.export import export_results

    _check_output_file(args.out, "--out")
    from ragkit.results import ResultStore

    run_ids = None
    store = ResultStore(as_location(args.results))
    if args.runs and store.exists():  # a missing folder is export_results' error to name
        from ragkit.analysis.run_names import resolve_runs

        run_ids = resolve_runs(store.read("runs"), args.runs)
    print(export_results(as_location(args.results), args.format, args.out, run_ids))
    for line in store.unreadable():  # exported what could be read
        print(line, file=sys.stderr)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from ragkit.analysis.report import parse_baselines, render_report

    _check_output_file(args.out, "--out")
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()] if args.metrics else None
    text = render_report(as_location(args.results), args.format, metrics, detail=not args.no_detail,
                         depth_rule=args.depth_rule, baselines=parse_baselines(args.baseline))
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"report written to {args.out}")
    else:
        print(text, end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ragkit", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    from ragkit.cli import corpus

    corpus.add_parser(sub)  # ingest, corpus

    run = sub.add_parser("run", help="run an experiment grid (resumes where it stopped)")
    run.add_argument("config", help="experiment YAML file")
    run.add_argument("--out", help="results folder (default: RAGKIT_RESULTS_DIR/<experiment name>)")
    run.add_argument("--status-file", help="keep a JSON progress file here (used by the dashboard)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="dotted.key=value",
                     help="override a config field, e.g. --set dataset.path=../data/scifact")
    run.add_argument("--quiet", action="store_true", help="no progress bar")
    run.add_argument("--force", action="store_true", help="write into an --out that holds other files, not results")
    run.add_argument("--executor", default="local", choices=["local", "ray"],
                     help="local: in this process (default); ray: chunk sets, indexes and question shards given "
                          "to persistent Ray workers, one per CPU (needs the ray extra)")
    run.add_argument("--address", help="with --executor ray: the cluster to use (ray://host:10001 or auto); "
                                       "default: a local Ray for this run")
    run.add_argument("--num-cpus", type=int, help="with --executor ray and no --address: CPUs of the local Ray "
                                                 "(default: all)")
    run.add_argument("--dry-run", action="store_true", help="print the plan and its estimate (what is cached, "
                                                             "chunks to embed, LLM calls, time); compute nothing")
    run.add_argument("--format", default="text", choices=["text", "json"], help="with --dry-run: text or json")
    run.set_defaults(func=_cmd_run)

    summary = sub.add_parser("summary", help="print the summary table of a results folder")
    summary.add_argument("results")
    summary.set_defaults(func=_cmd_summary)

    compact = sub.add_parser("compact", help="merge each run's parts of a results folder into one per table, and "
                                             "write the folder's merged read copies (a finished run or plan does "
                                             "this itself; for older folders and unfinished runs)")
    compact.add_argument("results")
    compact.set_defaults(func=_cmd_compact)

    check = sub.add_parser("check", help="list a results folder's damaged parts, orphan files and stale merged "
                                         "copies (exit 1 when there is any); --repair fixes them")
    check.add_argument("results")
    check.add_argument("--repair", action="store_true",
                       help="set damaged parts aside (in _damaged/; `ragkit run` computes their questions again), "
                            "remove orphan files, rebuild the merged read copies")
    check.set_defaults(func=_cmd_check)

    export = sub.add_parser("export", help="export a results folder as csv, parquet, xlsx, json or an html report")
    export.add_argument("results")
    export.add_argument("--format", required=True, choices=["csv", "parquet", "xlsx", "json", "html"])
    export.add_argument("--out", help="output file (default: beside the results folder, named after it)")
    export.add_argument("--runs", help="comma-separated runs, each its label as `ragkit summary` prints it, its "
                                       "id or a unique id prefix (4+ characters) (default: every run)")
    export.set_defaults(func=_cmd_export)

    report = sub.add_parser("report", help="print what each factor does (each level vs its reference level), "
                                           "per-configuration "
                                           "metrics, and every single-factor pair, with CIs and p-values")
    report.add_argument("results", help="results folder")
    report.add_argument("--format", default="md", choices=["md", "html", "json"],
                        help="markdown (default), html, or json (every number unformatted)")
    report.add_argument("--metrics", help="comma-separated metrics (default: headline and generation metrics)")
    report.add_argument("--no-detail", action="store_true",
                        help="leave out the single-factor pairs (the factor answers and configurations stay)")
    report.add_argument("--depth-rule", default="common", choices=["common", "asked"],
                        help="compare runs whose final contexts differ in depth at the common depth (default) "
                             "or at the metric's own cut-off")
    report.add_argument("--baseline", action="append", metavar="FACTOR=LEVEL",
                        help="test this factor's levels against LEVEL (repeatable; default: the baseline the "
                             "experiment named, else the factor's first level), e.g. --baseline chunker=token")
    report.add_argument("--out", help="write to this file instead of printing")
    report.set_defaults(func=_cmd_report)

    from ragkit.cli import caches, dashboard, decide, export_pipeline, labels, questions

    for family in (export_pipeline, dashboard, decide, labels, questions, caches):  # decide: best, failures, compare
        family.add_parser(sub)
    return parser


def _report_bug(error: Exception) -> int:
    """Last resort for an exception no command expected: one line on stderr, the traceback in a file."""
    import os
    import tempfile
    import time
    import traceback

    try:
        from ragkit.settings import get_settings

        folder = get_settings().resolved_data_dir() / "logs"
        folder.mkdir(parents=True, exist_ok=True)
    except Exception:  # noqa: BLE001 - the settings themselves may be what failed
        folder = Path(tempfile.gettempdir())
    log = folder / f"ragkit-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    try:
        log.write_text(f"ragkit {' '.join(sys.argv[1:])}\n\n{traceback.format_exc()}", encoding="utf-8")
        where = f"the full traceback is in {log}"
    except OSError:
        where = "the traceback could not be written to a log file"
    detail = f": {clipped(str(error).splitlines()[0])}" if str(error).strip() else ""
    _say(f"error: unexpected {type(error).__name__}{detail} -- this is a bug in ragkit; {where}")
    return 1


def _say(message: str) -> None:
    """An error on stderr as one bounded line, whatever the exception carried."""
    print(one_line(message), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    from ragkit.errors import BackendUnavailable, IngestError

    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ConfigError, IngestError) as error:
        _say(f"error: {error}")
        return 2
    except OSError as error:  # the machine refused: a missing path, no permission, a full disk
        where = f": {clipped(str(error.filename))}" if error.filename else ""
        _say(f"error: {error.strerror or error}{where}")
        return 2
    except BackendUnavailable as error:  # a server down is not a bug: what ran is kept, the same command resumes
        _say(f"error: {error}")
        return 3
    except KeyboardInterrupt:
        resume = "; run the same command again to resume" if args.command == "run" else ""
        print(f"interrupted{resume}", file=sys.stderr)
        return 130
    except Exception as error:  # noqa: BLE001 - the last resort: every user error is caught above
        return _report_bug(error)


if __name__ == "__main__":
    sys.exit(main())
