"""`ragkit questions ...`: generate, check, review, freeze, import and export question sets."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError


def _cmd_generate(args: argparse.Namespace) -> int:
    """Exit 0 with the set written; 1 when it is written but keeps fewer than --min-kept; 2 on a
    bad option. The last line is the outcome ("kept 5 of 40 (12%): poor yield; ...")."""
    from ragkit.questions.generation import (
        GenerationParams,
        dry_run_counts,
        generate_questions,
        plan_generation,
        write_set,
    )
    from ragkit.questions.generation.extractive import generate_extractive, plan_extractive
    from ragkit.questions.generation.outcome import min_kept_failure, model_notice
    from ragkit.questions.generation.writer import check_out
    from ragkit.questions.sources import build_llm_client, load_corpus_source, minilm_embed, validated

    types = [kind.strip() for kind in args.types.split(",") if kind.strip()] if args.types else []
    params = validated(GenerationParams, {"n": args.n, "seed": args.seed, "method": args.method, "types": types})
    if args.min_kept is not None and args.min_kept < 0:
        raise ConfigError(f"--min-kept {args.min_kept}: must be 0 or more")
    extractive = params.method == "extractive"
    if not args.dry_run:
        if not args.out:
            raise ConfigError("--out is required (a folder, or a .jsonl file) unless --dry-run")
        check_out(Path(args.out))
    source = load_corpus_source(args.corpus)
    if args.dry_run:
        if extractive:
            found = plan_extractive(source.documents, params.n, params.types, params.seed)
            print(f"dry run on '{source.name}' ({len(source.documents)} documents): {len(found)} of {params.n} "
                  "questions found in the documents' structure; no LLM call")
            return 0
        counts = dry_run_counts(plan_generation(source.documents, params), params)
        kinds = ", ".join(f"{kind} {count}" for kind, count in sorted(counts["by_type"].items()))
        print(f"dry run on '{source.name}' ({len(source.documents)} documents): {counts['calls']} LLM calls "
              f"({kinds}); about {counts['prompt_tokens_estimate']} prompt tokens (estimated at 4 characters a "
              f"token), at most {counts['completion_tokens_max']} completion tokens")
        print(_generation_time(args.llm, args.llm_model, counts["calls"]))
        return 0
    status = None
    try:
        client = None if extractive else build_llm_client(args.llm, args.llm_model, args.llm_url)
        model = None if client is None else str(client.backend.cache_identity()["model"])
        print(model_notice(params.method, model), flush=True)
        embed = None if args.no_embeddings else minilm_embed()
        if embed is None and not args.no_embeddings:
            print("note: the MiniLM embedder could not load; duplicates are found by normalised text only",
                  file=sys.stderr)
        if client is None:
            status = _status_writer(args.status_file, params.n, "questions")
            result = generate_extractive(source.documents, params, embed=embed, corpus=source.name)
            if status:
                status.advance(params.n)
        else:
            status = _status_writer(args.status_file, len(plan_generation(source.documents, params)), "LLM calls")
            result = generate_questions(source.documents, params, client, embed=embed, corpus=source.name,
                                        on_call=(lambda done, total: status.advance(1)) if status else None)
        path = write_set(Path(args.out), result.rows, result.record, source.corpus_file)
    except Exception as error:
        if status:  # the dashboard shows why the job stopped
            status.finish(f"{type(error).__name__}: {error}")
        raise
    record = result.record
    outcome = record["outcome"]
    failure = min_kept_failure(outcome, args.min_kept)
    if status:
        status.finish(failure, outcome={key: outcome[key] for key in ("summary", "poor", "advice", "kept", "asked")})
    print(f"wrote {len(result.rows)} questions -> {path}")
    if record["dropped_by_reason"]:
        print("dropped: " + ", ".join(f"{reason} {count}" for reason, count in
                                      sorted(record["dropped_by_reason"].items())))
    if extractive:
        print("by type: " + ", ".join(f"{kind} {count}" for kind, count in sorted(record["by_type"].items()))
              + f"; {record['seconds']:.1f} s, no LLM call")
    else:
        print(f"{record['calls']} LLM calls ({record['backend_calls']} sent to the model), {record['prompt_tokens']} "
              f"prompt + {record['completion_tokens']} completion tokens, {record['seconds']:.1f} s; "
              f"model {record['model']['model']}")
    if outcome["advice"]:
        print(f"next: {outcome['advice']}")
    if failure:
        print(f"error: {failure}", file=sys.stderr)
    print(("warning: " if outcome["poor"] else "") + outcome["summary"])
    return 1 if failure else 0


def _generation_time(llm: str | None, model: str | None, calls: int) -> str:
    """The time line of a generation dry run: calls x this machine's seconds per call of the backend."""
    from ragkit.experiments.estimate import format_seconds, llm_seconds
    from ragkit.llms import llms
    from ragkit.questions.sources import llm_spec
    from ragkit.settings import get_settings

    spec = llm_spec(llm, model)
    seconds, measured = llm_seconds(spec, calls, get_settings().resolved_data_dir())
    return f"time ({spec.type}:{llms.build(spec).model_name}): {format_seconds(seconds, measured)}"


def _status_writer(path: str | None, total: int, unit: str) -> Any:
    """The progress file a dashboard job follows (done of total ``unit``: LLM calls, or for the
    extractive method questions), or None."""
    if not path:
        return None
    from ragkit.experiments.status import StatusWriter

    return StatusWriter(Path(path), total, unit=unit)


def _load_set(path: str, format: str) -> Any:
    from ragkit.questions import load_question_set

    return load_question_set(Path(path), format=format)


def _cmd_check(args: argparse.Namespace) -> int:
    from ragkit.questions.quality import format_report, quality_report
    from ragkit.questions.sources import minilm_embed, set_documents

    questions = _load_set(args.set, args.format)
    source = set_documents(Path(args.set), args.corpus)
    embed = minilm_embed() if args.embeddings else None
    report = quality_report(questions, source.by_id() if source else None, embed)
    print(report.model_dump_json(indent=2) if args.json else format_report(report), end="\n" if args.json else "")
    return 0


def _cmd_review(args: argparse.Namespace) -> int:
    from ragkit.questions.generation import read_rows
    from ragkit.questions.review import decide, edit, load_review, pending, save_review
    from ragkit.questions.sources import set_documents

    path = Path(args.set)
    rows = {row["id"]: row for row in read_rows(path)}
    review = load_review(path)
    for question_id in [*args.accept, *args.reject]:
        if question_id not in rows:
            raise ConfigError(f"no question '{question_id}' in {path}")
    for question_id in args.accept:
        review = decide(review, question_id, "accepted")
    for question_id in args.reject:
        review = decide(review, question_id, "rejected")
    if args.edit:
        if args.edit not in rows:
            raise ConfigError(f"no question '{args.edit}' in {path}")
        source = set_documents(path, args.corpus)
        texts = {doc_id: d.text for doc_id, d in source.by_id().items()} if source else {}
        review = edit(review, rows[args.edit], texts, question=args.question, answer=args.answer, part=args.part)
    save_review(path, review)
    waiting = pending(list(rows.values()), review)
    counts = {status: sum(d.status == status for d in review.decisions.values())
              for status in ("accepted", "edited", "rejected")}
    print(", ".join(f"{status} {count}" for status, count in counts.items()) + f", pending {len(waiting)}")
    return 0


def _cmd_freeze(args: argparse.Namespace) -> int:
    from ragkit.questions.review import freeze
    from ragkit.settings import get_settings

    root = Path(args.out_root) if args.out_root else get_settings().resolved_data_dir() / "question_sets" / "frozen"
    frozen = freeze(Path(args.set), root, name=args.name, allow_pending=args.allow_pending)
    print(f"frozen {frozen.questions} questions ({frozen.rejected} rejected) -> {frozen.path} "
          f"(content key {frozen.content_key})")
    return 0


def _cmd_export(args: argparse.Namespace) -> int:
    from ragkit.questions.interop import export_question_set
    from ragkit.questions.sources import set_documents

    questions = _load_set(args.set, args.format)
    source = set_documents(Path(args.set), args.corpus)
    print(export_question_set(questions, args.to, Path(args.out), source.by_id() if source else None))
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from ragkit.questions.generation import write_set
    from ragkit.questions.generation.writer import check_out, set_paths
    from ragkit.questions.interop import import_question_set
    from ragkit.questions.interop.report import check_located, report_path, write_report
    from ragkit.questions.sources import load_corpus_source
    from ragkit.questions.spans import REFUSED_REASON, answers_refused_as_spans
    from ragkit.questions.squad_rows import question_rows

    if not 0 < args.min_located <= 1:
        raise ConfigError(f"--min-located must be in (0, 1], got {args.min_located}")
    out = Path(args.out)
    check_out(out)
    source = load_corpus_source(args.corpus)
    imported = import_question_set(Path(args.file), getattr(args, "from"), source.by_id(), corpus=source.name)
    report = imported.report
    print(report.summary())
    written = write_report(report, report_path(set_paths(out)[0]))
    check_located(report, args.min_located, args.allow_partial, written)
    rows = question_rows(imported.questions)
    path = write_set(out, rows, {"imported_from": str(args.file), "format": getattr(args, "from"),
                                 "corpus": source.name, "import_report": written.name}, source.corpus_file)
    located = report.totals["located"] + report.totals["partly located"]
    print(f"{len(rows)} questions imported -> {path}: {located} with located passages, "
          f"{len(report.without_ground_truth())} without ground truth (report: {written})")
    refused = answers_refused_as_spans(imported.questions)
    if refused:
        print(f"{refused} reference answers not located as spans: {REFUSED_REASON}")
    return 0


def _cmd_plan(args: argparse.Namespace) -> int:
    from ragkit.analysis import power
    from ragkit.analysis.loading import load_results
    from ragkit.analysis.recommend import check_metric, default_metric, plan_questions
    from ragkit.storage.folders import as_location

    results = load_results(as_location(args.results))
    if results.runs.empty:
        raise ConfigError(f"no runs in {args.results} yet")
    metric = args.metric or default_metric(results)
    check_metric(metric, results)
    result = plan_questions(results, metric, args.detect)
    print((power.to_json if args.format == "json" else power.to_text)(result), end="")
    return 0


def _difference(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError(f"expected a difference > 0, got {text!r}")
    return value


def add_parser(sub: Any) -> None:
    """Register `ragkit questions ...` on the top-level subparsers."""
    from ragkit.questions import FORMATS
    from ragkit.questions.generation import QUESTION_TYPES
    from ragkit.questions.generation.generate import METHODS
    from ragkit.questions.generation.sampling import EXTRACTIVE_TYPES
    from ragkit.questions.interop import EXPORT_FORMATS, IMPORT_FORMATS
    from ragkit.questions.interop.report import DEFAULT_MIN_LOCATED

    questions = sub.add_parser("questions", help="generate, check, review, freeze, import and export question sets")
    q_sub = questions.add_subparsers(dest="questions_command", required=True)

    generate = q_sub.add_parser("generate", help="generate questions whose answers are exact spans of the corpus")
    generate.add_argument("corpus", help="a dataset folder with corpus.jsonl, files to ingest, or an ingested "
                                         "corpus name")
    generate.add_argument("--n", type=int, default=200, help="questions to plan (default 200; drops make fewer)")
    generate.add_argument("--out", help="output folder (questions.jsonl, generation.json) or .jsonl file")
    generate.add_argument("--method", choices=METHODS, default="llm",
                          help="llm (default): an LLM writes each question; extractive: questions from the documents' "
                               "tables, headings, definitions and figures, no LLM")
    generate.add_argument("--types", help=f"comma-separated; llm: any of {','.join(QUESTION_TYPES)}; extractive: any "
                                          f"of {','.join(EXTRACTIVE_TYPES)} (default: all of the method's)")
    generate.add_argument("--min-kept", type=int, metavar="N",
                          help="exit 1 (the set still written) when fewer than N questions are kept")
    generate.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    generate.add_argument("--dry-run", action="store_true", help="print the calls and tokens it would use; no call")
    generate.add_argument("--llm", help="llm backend: local, ollama or openai (default: Ollama if it answers, "
                                        "else the embedded model)")
    generate.add_argument("--llm-model", help="the backend's model name (ollama, openai)")
    generate.add_argument("--llm-url", help="the server's address (ollama: http://HOST:11434; openai: the API root, "
                                            "http://HOST:PORT/v1)")
    generate.add_argument("--no-embeddings", action="store_true",
                          help="find duplicates by normalised text only (no MiniLM)")
    generate.add_argument("--status-file", help="keep a JSON progress file here (used by the dashboard)")
    generate.set_defaults(func=_cmd_generate)

    check = q_sub.add_parser("check", help="quality report: coverage, types, duplicates, locatable answers, "
                                           "word overlap, bm25 first hits")
    check.add_argument("set", help="a question set (folder or file)")
    check.add_argument("--format", default="auto", choices=FORMATS)
    check.add_argument("--corpus", help="the corpus (default: the set's own corpus.jsonl)")
    check.add_argument("--embeddings", action="store_true", help="also find near-duplicates with MiniLM")
    check.add_argument("--json", action="store_true", help="print the report as JSON")
    check.set_defaults(func=_cmd_check)

    review = q_sub.add_parser("review", help="accept, reject or edit questions of a generated set")
    review.add_argument("set")
    review.add_argument("--accept", nargs="*", default=[], metavar="ID")
    review.add_argument("--reject", nargs="*", default=[], metavar="ID")
    review.add_argument("--edit", metavar="ID", help="edit this question (with --question and/or --answer)")
    review.add_argument("--question", help="the new question text")
    review.add_argument("--answer", help="the new answer: an exact span of the part's document")
    review.add_argument("--part", type=int, default=0, help="the answer part to edit (multi-hop: 0 or 1)")
    review.add_argument("--corpus", help="the corpus (default: the set's own corpus.jsonl)")
    review.set_defaults(func=_cmd_review)

    freeze = q_sub.add_parser("freeze", help="write the reviewed set as a content-hashed set for experiments")
    freeze.add_argument("set")
    freeze.add_argument("--out-root", help="folder for frozen sets (default: DATA/question_sets/frozen)")
    freeze.add_argument("--name", help="name of the frozen set (default: the set's)")
    freeze.add_argument("--allow-pending", action="store_true", help="leave out questions not yet reviewed")
    freeze.set_defaults(func=_cmd_freeze)

    export = q_sub.add_parser("export", help="write a question set as ragas, llamaindex, beir or trec qrels")
    export.add_argument("set")
    export.add_argument("--to", required=True, choices=EXPORT_FORMATS)
    export.add_argument("--out", required=True, help="file (ragas .jsonl/.json/.csv, llamaindex .json, trec) or "
                                                     "folder (beir)")
    export.add_argument("--format", default="auto", choices=FORMATS, help="the set's own format")
    export.add_argument("--corpus", help="the corpus (default: the set's own corpus.jsonl)")
    export.set_defaults(func=_cmd_export)

    imports = q_sub.add_parser("import", help="read a ragas or llamaindex set: its contexts located in the corpus")
    imports.add_argument("file", help="ragas: .jsonl, .json, .csv, .parquet or a Hugging Face dataset folder; "
                                      "llamaindex: the LabelledRagDataset .json")
    imports.add_argument("--from", required=True, choices=IMPORT_FORMATS)
    imports.add_argument("--corpus", required=True, help="the corpus its contexts come from")
    imports.add_argument("--out", required=True, help="output folder or .jsonl file")
    imports.add_argument("--min-located", type=float, default=DEFAULT_MIN_LOCATED,
                         help="fail (exit 2) when fewer questions than this share have a located context "
                              f"(default {DEFAULT_MIN_LOCATED})")
    imports.add_argument("--allow-partial", action="store_true",
                         help="import even below --min-located (the report lists what was not found)")
    imports.set_defaults(func=_cmd_import)

    plan = q_sub.add_parser("plan", help="how many questions (and documents) a difference of a given size needs, "
                                         "from a pilot results folder's variance")
    plan.add_argument("results", help="a pilot results folder")
    plan.add_argument("--detect", type=_difference, required=True, metavar="D",
                      help="the difference to detect, on the metric's scale, e.g. 0.03")
    plan.add_argument("--metric", help="the metric (default: the experiment's objective, else ndcg@10)")
    plan.add_argument("--format", default="text", choices=["text", "json"])
    plan.set_defaults(func=_cmd_plan)
