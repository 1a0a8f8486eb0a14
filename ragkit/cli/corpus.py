"""`ragkit ingest` and `ragkit corpus ...`: add files to a corpus; list or delete corpora; one corpus's
source files, listed or removed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_ingest(args: argparse.Namespace) -> int:
    from ragkit.corpus.store import CorpusStore

    report = CorpusStore().ingest([Path(p) for p in args.paths], name=args.corpus)
    for item in report.files:
        detail = f"{item.documents} document(s)" if item.status == "ingested" else item.reason
        print(f"{item.status:9} {item.path}: {detail}")
    print(f"corpus '{report.corpus_name}': {report.ingested_count} file(s) ingested, "
          f"{len(report.files) - report.ingested_count} skipped")
    if not report.files:
        print(f"error: nothing to ingest: no files in {', '.join(args.paths)}", file=sys.stderr)
    elif not report.ok:
        reasons = "; ".join(f"{item.path}: {item.reason}" for item in report.files[:3])
        more = f"; and {len(report.files) - 3} more (listed above)" if len(report.files) > 3 else ""
        print(f"error: no file went into corpus '{report.corpus_name}': {reasons}{more}", file=sys.stderr)
    return 0 if report.ok else 1


def _cmd_corpus_list(args: argparse.Namespace) -> int:
    from ragkit.corpus.store import CorpusStore

    corpora = CorpusStore().list()
    if not corpora:
        print("no corpora yet: add one with `ragkit ingest PATH --corpus NAME`")
    for info in corpora:
        print(f"{info.name}\t{info.documents} docs\t{info.total_bytes} bytes\t{info.corpus_id}\t{info.created}")
    return 0


def _cmd_corpus_delete(args: argparse.Namespace) -> int:
    from ragkit.corpus.store import CorpusStore

    CorpusStore().delete(args.name)
    print(f"deleted corpus '{args.name}' with its chunk sets and indexes")
    return 0


def _cmd_docs(args: argparse.Namespace) -> int:
    from ragkit.corpus.listing import documents_table
    from ragkit.corpus.store import CorpusStore

    table = documents_table(CorpusStore().files(args.name))
    if args.format == "json":
        print(table.to_json(orient="records", indent=2))
    else:
        print(table.to_csv(sep="\t", index=False), end="")
    return 0


def _cmd_delete_doc(args: argparse.Namespace) -> int:
    from ragkit.corpus.store import CorpusStore

    corpus = CorpusStore().delete_documents(args.name, args.doc_ids)
    print(f"deleted {len(set(args.doc_ids))} file(s) from corpus '{args.name}': {len(corpus.documents)} document(s) "
          f"left, new corpus id {corpus.corpus_id} (runs on the old version keep their results)")
    return 0


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The `ingest` and `corpus` commands."""
    ingest = sub.add_parser("ingest", help="add files or folders to a corpus")
    ingest.add_argument("paths", nargs="+", help="files and folders (folders are read recursively)")
    ingest.add_argument("--corpus", required=True, help="corpus name")
    ingest.set_defaults(func=_cmd_ingest)

    corpus = sub.add_parser("corpus", help="list or delete corpora, list or delete a corpus's documents")
    corpus_sub = corpus.add_subparsers(dest="corpus_command", required=True)
    corpus_sub.add_parser("list", help="list corpora").set_defaults(func=_cmd_corpus_list)
    delete = corpus_sub.add_parser("delete", help="delete a corpus with its chunk sets and indexes")
    delete.add_argument("name")
    delete.set_defaults(func=_cmd_corpus_delete)
    _add_document_parsers(corpus_sub)  # docs, delete-doc


def _add_document_parsers(corpus_sub: argparse._SubParsersAction) -> None:
    """Add `docs` and `delete-doc` under `ragkit corpus`."""
    docs = corpus_sub.add_parser("docs", help="list a corpus's source files: doc id, file name, type, size, "
                                              "documents, pages, characters, when ingested")
    docs.add_argument("name", help="corpus name")
    docs.add_argument("--format", default="text", choices=["text", "json"],
                      help="text: tab-separated with a header (default); json: one record per file")
    docs.set_defaults(func=_cmd_docs)
    delete = corpus_sub.add_parser("delete-doc", help="remove source files from a corpus by doc id (as `corpus docs` "
                                                      "lists them): a new corpus version with a new corpus id")
    delete.add_argument("name", help="corpus name")
    delete.add_argument("doc_ids", nargs="+", metavar="DOC_ID")
    delete.set_defaults(func=_cmd_delete_doc)
