"""A run as code: `ragkit export-pipeline DIR RUN_ID --out app.py` writes a small module that builds
that configuration over a new folder of documents and answers a question.

The run's configuration is read back from its ``runs`` row (every component parameter is a
column there, defaults included) into an experiment config of one grid point, pinned in the
module as a literal. The module builds it with ragkit's own executor pieces (the same chunker,
embedder, LanceDB index, retriever, judges and generator as LlamaIndex components), so it
retrieves what the run retrieved over the same documents. Rebuilt over the run's own documents
its run id is recomputed and must equal the exported one: a difference means a parameter the
row does not record (a generator option, an LLM option other than the model) and is reported.

The app answers with the run's own generator when the run had one; ``--generator [BACKEND[:MODEL]]``
adds one (or changes the run's model), the backend chosen as everywhere else when none is named
(Ollama when a server answers, else the embedded model), and its run id is then not the run's. An
app with no generator says so ("retrieval only") and lists the chunks. On start it prints the data
directory where it keeps chunk sets, indexes and caches.
"""

from __future__ import annotations

import json
import math
import pprint
from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError

# Row columns that describe the experiment or the results, not the pipeline.
_RECORD_ONLY = ("run_id", "experiment", "corpus", "corpus_id", "questions_key", "chunkset_id", "index_id", "depth",
                "evaluation", "evaluation.repeats", "label")


def _present(value: Any) -> bool:
    import pandas as pd  # here: `ragkit --help` registers this command and must not pay for pandas

    return value is not None and not (isinstance(value, float) and math.isnan(value)) and value is not pd.NA


def _value(text: Any) -> Any:
    """A cell back to its parameter value: run_row writes lists and dicts with str()."""
    if isinstance(text, str) and text[:1] in "[{(":
        import ast

        try:
            return ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
    if hasattr(text, "item"):  # numpy scalars from parquet
        return text.item()
    return text


def _params(row: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {name[len(prefix) + 1:]: _value(value) for name, value in row.items()
            if name.startswith(prefix + ".") and "." not in name[len(prefix) + 1:] and _present(value)}


def _llm_spec(text: str) -> dict[str, Any]:
    from ragkit.llms.base import llms

    backend, _, model = str(text).partition(":")
    fields = getattr(llms.get(backend).Params, "model_fields", {})
    return {"type": backend, "params": {"model": model}} if "model" in fields and model else {"type": backend}


def config_from_run_row(row: dict[str, Any]) -> dict[str, Any]:
    """One run's ``runs`` row as the experiment config of that one configuration (no dataset)."""
    row = {name: value for name, value in row.items() if name not in _RECORD_ONLY}
    config: dict[str, Any] = {
        "chunkers": [{"type": row["chunker"], "params": _params(row, "chunker")}],
        "embedders": [{"type": row["embedder"], "params": _params(row, "embedder")}]
        if _present(row.get("embedder")) else [],
        "retrievers": [{"type": row["retriever"], "params": _params(row, "retriever")}],
        "top_k": int(row["top_k"]),
    }
    judges = {}
    for name, mode in row.items():
        if name.startswith("judge.") and name.count(".") == 1 and _present(mode):
            judge = name.split(".", 1)[1]
            judges[judge] = {"mode": [mode], "params": _params(row, name)}
    if judges:
        config["judges"] = judges
    if bool(row.get("generator")):
        # The runs table names the generator options added since ids were pinned (set away from their
        # default); the older ones (max_tokens, abstain_text, ...) are not in it, so not restored.
        generator = _params(row, "generator")
        config["generator"] = {"params": generator} if generator else True
    roles = {name.split(".", 1)[1]: _llm_spec(value) for name, value in row.items()
             if name.startswith("llm.") and _present(value)}
    if roles:
        config["llm"] = {"roles": roles}
    ann = _params(row, "ann")
    if ann:
        config["ann"] = ann
    if _present(row.get("web")):
        config["web"] = row["web"]
    return config


def read_run_config(results: str | Path, run_id: str) -> dict[str, Any]:
    from ragkit.results import ResultStore

    store = ResultStore(results)
    if not store.exists():
        raise ConfigError(f"no results folder at {results} (expected a 'runs' subfolder)")
    runs = store.read("runs")
    chosen = runs[runs["run_id"] == run_id]
    if chosen.empty:
        listed = ", ".join(sorted(runs["run_id"].astype(str))[:10])
        raise ConfigError(f"no run '{run_id}' in {results}. Runs: {listed}")
    row = {name: value for name, value in chosen.iloc[-1].to_dict().items() if _present(value)}
    return config_from_run_row(row)


APP_TEMPLATE = '''"""The ragkit run {run_id} as a runnable pipeline (written by `ragkit export-pipeline`){added}.

Usage: python {name} DOCS_FOLDER "your question" ["another question" ...] [--json]

DOCS_FOLDER is a folder of documents (txt, md, pdf, docx, html, json, csv...) or a dataset folder
with a corpus.jsonl. The chunk sets and indexes are built once under ragkit's data directory
(RAGKIT_DATA_DIR; printed on start) and reused on later calls.
"""

import argparse
import json
import sys

from ragkit.pipeline_export import NO_GENERATOR, build_pipeline, data_dir_line

RUN_ID = {run_id!r}
# The run's configuration, every parameter pinned as the run used it{pinned}.
CONFIG = {config}
# Whether the exported configuration differs from the run's (a generator added or changed).
CHANGED = {changed!r}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("documents", help="folder of documents")
    parser.add_argument("questions", nargs="+", metavar="question")
    parser.add_argument("--json", action="store_true", help="print one JSON line per question: chunks and answer")
    args = parser.parse_args()
    print(data_dir_line(), file=sys.stderr)
    answers = bool(CONFIG.get("generator"))
    if not answers:
        print(NO_GENERATOR, file=sys.stderr if args.json else sys.stdout)
    pipeline = build_pipeline(CONFIG, args.documents, None if CHANGED else RUN_ID)
    for question in args.questions:
        trace = pipeline.answer(question)
        chunks = [{{"rank": rank, "doc_id": n.node.metadata["doc_id"], "start_char": n.node.metadata["start_char"],
                   "end_char": n.node.metadata["end_char"], "score": float(n.score or 0.0),
                   "text": n.node.get_content()}} for rank, n in enumerate(trace.nodes, start=1)]
        answer = trace.answer.text if trace.answer is not None else None
        problem = (trace.answer.error if trace.answer is not None else None) or "no answer"
        if args.json:
            print(json.dumps({{"question": question, "chunks": chunks, "answer": answer,
                              **({{}} if answers else {{"note": NO_GENERATOR}})}}, ensure_ascii=False))
            continue
        print(question)
        for chunk in chunks:
            print(f"  #{{chunk['rank']}} {{chunk['doc_id']}} [{{chunk['start_char']}}:{{chunk['end_char']}}] "
                  f"{{chunk['score']:.3f}}: {{chunk['text'][:200]!r}}")
        if answers:
            print("  answer:", answer if answer is not None else f"(none: {{problem}})")


if __name__ == "__main__":
    main()
'''

NO_GENERATOR = "retrieval only: this run had no generator (use --generator)"


def data_dir_line() -> str:
    """Where an exported app keeps its data, said on start."""
    from ragkit.settings import get_settings

    return (f"data directory: {get_settings().resolved_data_dir()} (chunk sets, indexes, caches; set "
            "RAGKIT_DATA_DIR to move it)")


def check_generator(model: str) -> None:
    """A ``--generator`` value whose backend is not registered is a one-line error naming the valid ones."""
    from ragkit.llms.base import llms

    backend = model.partition(":")[0]
    if backend not in llms.names():
        raise ConfigError(f"--generator: unknown LLM backend '{backend}'. Valid backends: "
                          f"{', '.join(llms.names())} (give BACKEND or BACKEND:MODEL, e.g. ollama:llama3.2)")


def with_generator(config: dict[str, Any], model: str) -> dict[str, Any]:
    """``config`` with a generator: the run's own when it had one and ``model`` is empty; with
    ``model`` (BACKEND or BACKEND:MODEL, as the runs table names LLMs), on that backend."""
    config = dict(config)
    config["generator"] = config.get("generator") or True
    if model:
        check_generator(model)
        llm = dict(config.get("llm") or {})
        llm["roles"] = {**(llm.get("roles") or {}), "generator": _llm_spec(model)}
        config["llm"] = llm
    return config


def render_app(config: dict[str, Any], run_id: str, name: str = "app.py", changed: bool = False) -> str:
    literal = pprint.pformat(json.loads(json.dumps(config)), width=100, sort_dicts=True)
    return APP_TEMPLATE.format(run_id=run_id, name=name, config=literal, changed=changed,
                               added=", with a generator added" if changed else "",
                               pinned="; the generator added on export" if changed else "")


def export_pipeline(results: str | Path, run_id: str, out: Path, generator: str | None = None) -> dict[str, Any]:
    """Write the app for ``run_id``; ``generator``: None keeps the run's configuration, "" adds the
    default generator (the run's own when it had one), "BACKEND[:MODEL]" a generator on that LLM.
    Returns the configuration written."""
    if generator:
        check_generator(generator)  # before the results are read: the cheaper mistake first
    original = read_run_config(results, run_id)
    config = original if generator is None else with_generator(original, generator)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render_app(config, run_id, out.name, changed=config != original), encoding="utf-8")
    return config


def build_pipeline(config: dict[str, Any], documents: str | Path, run_id: str | None = None) -> Any:
    """The configuration's pipeline over ``documents``: its chunk set and index built (or read from
    the cache), every component as the executor builds it. ``run_id``: the exported run's; a
    different id over the same documents is reported on stderr (a parameter not pinned)."""
    import sys

    from ragkit.corpus.store import CorpusStore
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.executor import LocalExecutor
    from ragkit.experiments.plan import make_plan
    from ragkit.experiments.runner import load_corpus, resolve_llm_roles
    from ragkit.qa import QuestionSet
    from ragkit.results import ResultStore
    from ragkit.settings import get_settings

    folder = Path(documents).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(f"documents folder {folder} does not exist or is not a folder")
    # A dataset folder with a corpus.jsonl is read as the runner reads it; any other folder is ingested.
    where = {} if (folder / "corpus.jsonl").exists() else {"corpus": {"path": str(folder)}}
    experiment = config_from_dict({"name": "exported", "dataset": {"path": str(folder)}, **where, **config},
                                  source="exported pipeline")
    store = CorpusStore()
    corpus = load_corpus(experiment, store)
    no_questions = QuestionSet(name="app", format="jsonl", questions=[])
    plan = make_plan(experiment, corpus, no_questions, resolve_llm_roles(experiment))
    run = plan.runs[0]
    if run_id is not None and run.run_id != run_id:
        print(f"note: this pipeline's run id is {run.run_id}, not {run_id}: other documents, or a parameter the "
              "runs table does not record", file=sys.stderr)
    scratch = get_settings().resolved_data_dir() / "exported"
    executor = LocalExecutor(store.derived_dir(corpus.corpus_id), ResultStore(scratch))
    return executor.serving_pipeline(plan, run)


def add_parser(sub: Any) -> None:
    """Add the `export-pipeline` subcommand to ``sub`` (``ragkit``'s subparsers)."""
    command = sub.add_parser("export-pipeline", help="write a runnable module that builds one run's configuration "
                                                     "over a folder of documents and answers a question")
    command.add_argument("results", help="results folder")
    command.add_argument("run_id")
    command.add_argument("--out", default="app.py", help="module to write (default: app.py)")
    command.add_argument("--generator", nargs="?", const="", default=None, metavar="BACKEND[:MODEL]",
                         help="answer with a generator: the run's own if it had one, else the default LLM (Ollama "
                              "if it answers, else the embedded model); with BACKEND[:MODEL], that one")
    command.set_defaults(func=_cmd_export_pipeline)


def _cmd_export_pipeline(args: Any) -> int:
    out = Path(args.out)
    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder: give a file name such as app.py")
    config = export_pipeline(args.results, args.run_id, out, args.generator)
    if config.get("generator"):
        role = (config.get("llm") or {}).get("roles", {}).get("generator")
        llm = f"{role['type']}:{role.get('params', {}).get('model', '')}".rstrip(":") if role else \
            "the default LLM (Ollama if it answers, else the embedded model)"
        print(f"wrote {out}: answers with {llm}; python {out} DOCS_FOLDER \"question\"")
    else:
        print(f"wrote {out}: {NO_GENERATOR}; python {out} DOCS_FOLDER \"question\"")
    return 0
