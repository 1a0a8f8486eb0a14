"""`ragkit labels ...`: pool runs' candidates, label them (sheet or dashboard), judge them with an
LLM, export qrels, add graded ground truth to a question set, and measure judges against people.

Imports stay inside the commands: building the parser must not load pandas (CLI start time).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ragkit.errors import ConfigError

GRADE_CHOICES = ("human", "judge", "combined")


def _csv_list(text: str | None) -> list[str] | None:
    return [item.strip() for item in text.split(",") if item.strip()] if text else None


def _store(results: str):
    from ragkit.labels.store import LabelStore
    from ragkit.results import ResultStore
    from ragkit.storage.folders import as_location

    if not ResultStore(as_location(results)).exists():
        raise ConfigError(f"no results folder at {results} (expected a 'runs' subfolder)")
    return LabelStore(as_location(results))


def _resolved_runs(root, text: str | None) -> list[str] | None:
    """--runs as run ids: labels, ids and unique id prefixes (ragkit.analysis.run_names.resolve_runs)."""
    if not text or text.strip() == "*":
        return None
    from ragkit.analysis.run_names import resolve_runs
    from ragkit.results import ResultStore

    return resolve_runs(ResultStore(root).read("runs"), text)


def _pool(store, pool_id: str | None):
    if pool_id:
        return store.pool(pool_id)
    pool = store.latest_pool()
    if pool is None:
        raise ConfigError(f"no pool in {store.root} yet: make one with `ragkit labels pool {store.root} --runs ...`")
    return pool


def _cmd_pool(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from ragkit.labels.pooling import PoolParams
    from ragkit.labels.sources import make_pool

    store = _store(args.results)
    runs = _resolved_runs(store.root, args.runs)
    try:
        params = PoolParams(runs=runs or ["*"], k=args.k, seed=args.seed,
                            questions=_csv_list(args.questions))
    except ValidationError as error:
        first = error.errors()[0]
        raise ConfigError(f"labels pool: --{first['loc'][0]} {first['input']!r}: {first['msg']}") from None
    pool, texts = make_pool(store.root, params, args.corpus)
    where = store.save_pool(pool)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(pool.model_dump_json(indent=1), encoding="utf-8")
        where += f" (and {args.out})"
    print(f"pool {pool.pool_id}: {len(pool.questions)} questions, {pool.chunk_count()} chunks, "
          f"{pool.answer_count()} answers from {len(pool.runs)} runs at k={pool.k}, seed {pool.seed} -> {where}")
    if not texts:
        print("warning: no corpus found, so the pool holds spans without their text; give --corpus (a dataset "
              "folder or an ingested corpus) for the labelling page and the LLM judge", file=sys.stderr)
    return 0


def _cmd_sheet(args: argparse.Namespace) -> int:
    from ragkit.labels.sheets import pool_sheet

    pool = _pool(_store(args.results), args.pool)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(pool_sheet(pool), encoding="utf-8")
    print(f"sheet of pool {pool.pool_id} ({pool.chunk_count()} chunks, {pool.answer_count()} answers) -> {args.out}")
    return 0


def _cmd_add(args: argparse.Namespace) -> int:
    from ragkit.labels.sheets import sheet_labels

    store = _store(args.results)
    pool = _pool(store, args.pool)
    if not Path(args.sheet).is_file():
        raise ConfigError(f"sheet not found: {args.sheet}")
    rows = sheet_labels(Path(args.sheet), pool, args.annotator)
    session = store.add(rows)
    print(f"{len(rows)} label(s) by {args.annotator} saved for pool {pool.pool_id} (session {session})")
    return 0


def _cmd_judge(args: argparse.Namespace) -> int:
    from ragkit.labels.relevance_judge import STAGE, RelevanceJudgeParams, judge_pool
    from ragkit.llms.base import llms
    from ragkit.llms.calls import LLMClient
    from ragkit.llms.defaults import resolve_default_backend
    from ragkit.registry import ComponentSpec
    from ragkit.settings import get_settings

    store = _store(args.results)
    pool = _pool(store, args.pool)
    spec = ComponentSpec(type=args.llm, params={"model": args.model} if args.model else {}) if args.llm \
        else resolve_default_backend()
    client = LLMClient.for_data_dir(llms.build(spec), get_settings().resolved_data_dir())
    problem = client.backend.problem()
    if problem:
        raise ConfigError(problem)
    from tqdm import tqdm

    bars: list[tqdm] = []  # made on the first chunk: nothing to judge shows no bar

    def progress(done: int, total: int) -> None:
        if not bars:
            bars.append(tqdm(total=total, unit="chunk", desc="judged", disable=args.quiet))
        bars[0].update(1)

    try:
        rows = judge_pool(pool, client, store.current(pool.pool_id),
                          RelevanceJudgeParams(skip_human_labelled=args.skip_human_labelled), progress)
    finally:
        for bar in bars:
            bar.close()
    if not rows:
        print(f"nothing to judge: every chunk of pool {pool.pool_id} has a valid grade from this judge")
        return 0
    store.add(rows)
    invalid = sum(not row["valid"] for row in rows)
    records = [record for record in client.records() if record.stage == STAGE]
    cached = sum(record.cache_hit for record in records)
    failed = len(rows) - len(records)  # a call that failed left no record
    print(f"judged {len(rows)} chunk(s) of pool {pool.pool_id} with {rows[0]['model']}: {invalid} invalid "
          f"repl{'y' if invalid == 1 else 'ies'} (no grade); {len(records) - cached} call(s) sent to the model, "
          f"{cached} answered from the cache" + (f", {failed} failed" if failed else ""))
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from ragkit.labels.qrels import to_qrels

    store = _store(args.results)
    if args.format == "csv":
        text = store.read().to_csv(index=False)
    else:
        text = to_qrels(_pool(store, args.pool), store.current(), args.grades, args.level)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        what = "labels" if args.format == "csv" else f"{args.grades} grades, {args.level} level"
        print(f"{args.format} ({what}) written to {args.out}")
    else:
        print(text, end="")
    return 0


def _cmd_ground_truth(args: argparse.Namespace) -> int:
    from ragkit.labels.ground_truth import add_graded_spans

    store = _store(args.results)
    pool = _pool(store, args.pool)
    given, spans = add_graded_spans(Path(args.set), Path(args.out), pool, store.current(), args.grades)
    print(f"{spans} graded span(s) ({args.grades} grades) added to {given} question(s) -> {args.out}")
    return 0


def _cmd_agreement(args: argparse.Namespace) -> int:
    from ragkit.analysis.report import _markdown_table
    from ragkit.labels.tables import label_sections, label_tables

    store = _store(args.results)
    tables = label_tables(store.root, None, args.resamples, args.seed)
    sections = label_sections(tables)
    if not sections:
        print(f"no labels in {args.results} yet")
    for title, table, note in sections:
        print(f"## {title}\n\n{_markdown_table(table) if not table.empty else ''}\n\n{note}\n")
    return 0


def _cmd_metrics(args: argparse.Namespace) -> int:
    from ragkit.analysis.report import _markdown_table
    from ragkit.labels.tables import pool_metric_means, ranking_problem

    store = _store(args.results)
    pool = _pool(store, args.pool)
    labels = store.current(pool.pool_id)
    table = pool_metric_means(pool, labels, args.grades)
    if table.empty:
        print(f"no run of pool {pool.pool_id} has every pooled chunk of a question graded ({args.grades} grades)")
        return 0
    problem = ranking_problem(pool, labels, args.grades)
    if problem:
        print(f"Not a ranking: {problem}. The means below are what these grades give, not an order of the runs.\n")
    table.insert(1, "label", table["run"].map(_run_labels(store.root)).fillna("-"))
    print(_markdown_table(table))
    print(f"\npool_precision@{pool.k}: share of a run's pooled top-{pool.k} chunks graded partly or relevant, over the "
          "questions whose chunks are all graded ('questions': of the questions the run has in the pool; a chunk "
          "without a grade, e.g. an invalid judge reply, leaves its question out); grades: whose grades each "
          "question used (questions per source); invalid replies: the judge's, on the run's pooled chunks; flag: "
          "fewer questions than the run with most, or grades that cannot rank runs.")
    return 0


def _run_labels(root) -> dict[str, str]:
    from ragkit.analysis.run_names import labels_by_run
    from ragkit.results import ResultStore

    return labels_by_run(ResultStore(root).read("runs"))


def _resamples(text: str) -> int:
    if not text.isdigit() or not 100 <= int(text) <= 100_000:
        raise argparse.ArgumentTypeError(f"resamples must be a number from 100 to 100000, got {text!r}")
    return int(text)


def add_parser(sub) -> None:
    """The `labels` command group, added to ragkit's subparsers."""
    labels = sub.add_parser("labels", help="pool runs' candidates for labelling, judge them with an LLM, export "
                                           "qrels, and measure judges against people")
    group = labels.add_subparsers(dest="labels_command", required=True)

    pool = group.add_parser("pool", help="pool the runs' top-k chunks and answers per question (shuffled, "
                                         "configurations hidden)")
    pool.add_argument("results", help="results folder")
    pool.add_argument("--runs", help="comma-separated runs, each its label as `ragkit summary` prints it, its id "
                                     "or a unique id prefix (4+ characters) (default: every run)")
    pool.add_argument("--k", type=int, default=10, help="top-k chunks of each run (default 10)")
    pool.add_argument("--seed", type=int, default=0, help="seed of the shown order (recorded in the pool)")
    pool.add_argument("--questions", help="comma-separated question ids (default: every question)")
    pool.add_argument("--corpus", help="dataset folder with corpus.jsonl, or an ingested corpus name, for the "
                                       "chunks' text (default: the runs' corpus when ingested)")
    pool.add_argument("--out", help="also write the pool's JSON here")
    pool.set_defaults(func=_cmd_pool)

    sheet = group.add_parser("sheet", help="write a pool as a CSV sheet for a person to fill in")
    sheet.add_argument("results")
    sheet.add_argument("--pool", help="pool id (default: the newest)")
    sheet.add_argument("--out", required=True, help="CSV file to write")
    sheet.set_defaults(func=_cmd_sheet)

    add = group.add_parser("add", help="save a filled sheet's labels (a new session; nothing is overwritten)")
    add.add_argument("results")
    add.add_argument("sheet", help="the filled CSV sheet")
    add.add_argument("--annotator", required=True, help="who labelled")
    add.add_argument("--pool", help="pool id (default: the newest)")
    add.set_defaults(func=_cmd_add)

    judge = group.add_parser("judge", help="grade the pool's chunks 0-3 with an LLM (one cached call per chunk)")
    judge.add_argument("results")
    judge.add_argument("--pool", help="pool id (default: the newest)")
    judge.add_argument("--llm", help="backend: local, ollama or openai (default: Ollama if it answers, else local)")
    judge.add_argument("--model", help="the backend's model")
    judge.add_argument("--skip-human-labelled", action="store_true",
                       help="judge only chunks no person graded (default: every chunk, for agreement)")
    judge.add_argument("--quiet", action="store_true", help="no progress bar (chunks judged of the total)")
    judge.set_defaults(func=_cmd_judge)

    export = group.add_parser("export", help="export labels as TREC qrels or the raw label table (csv)")
    export.add_argument("results")
    export.add_argument("--format", default="qrels", choices=["qrels", "csv"])
    export.add_argument("--grades", default="human", choices=GRADE_CHOICES,
                        help="whose grades (combined: people's, the judge's where no person graded)")
    export.add_argument("--level", default="document", choices=["document", "span"],
                        help="qrels per document (its best chunk's grade) or per span (doc:start-end)")
    export.add_argument("--pool", help="pool id (default: the newest)")
    export.add_argument("--out", help="write to this file instead of printing")
    export.set_defaults(func=_cmd_export)

    truth = group.add_parser("ground-truth", help="write a JSONL question set with the labels as graded spans")
    truth.add_argument("results")
    truth.add_argument("--set", required=True, help="the question set (JSONL file or dataset folder)")
    truth.add_argument("--out", required=True, help="new JSONL file (or folder) to write")
    truth.add_argument("--grades", default="human", choices=GRADE_CHOICES)
    truth.add_argument("--pool", help="pool id (default: the newest)")
    truth.set_defaults(func=_cmd_ground_truth)

    metrics = group.add_parser("metrics", help="per run, the pooled precision from the grades, saying whose grades")
    metrics.add_argument("results")
    metrics.add_argument("--grades", default="combined", choices=GRADE_CHOICES)
    metrics.add_argument("--pool", help="pool id (default: the newest)")
    metrics.set_defaults(func=_cmd_metrics)

    agreement = group.add_parser("agreement", help="judges against people: accuracy, kappa/alpha, confusion, bias, "
                                                   "and prediction-powered means")
    agreement.add_argument("results")
    agreement.add_argument("--resamples", type=_resamples, default=1000, help="cluster bootstrap resamples")
    agreement.add_argument("--seed", type=int, default=0)
    agreement.set_defaults(func=_cmd_agreement)
