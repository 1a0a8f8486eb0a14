"""`ragkit corpus docs` and `ragkit corpus delete-doc`: one corpus's source files, listed or removed."""

from __future__ import annotations

import argparse


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


def add_parser(corpus_sub: argparse._SubParsersAction) -> None:
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
