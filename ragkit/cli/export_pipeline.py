"""`ragkit export-pipeline DIR RUN_ID --out app.py`: one run's configuration as a runnable module
(``ragkit.pipeline.export``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragkit.errors import ConfigError
from ragkit.pipeline.export import NO_GENERATOR, export_pipeline


def add_parser(sub: Any) -> None:
    """The `export-pipeline` command."""
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
