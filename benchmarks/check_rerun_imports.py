"""Which heavy packages a finished re-run of each experiment file imports (issue 32 item 6).

    python benchmarks/check_rerun_imports.py experiments/*.yaml experiments/reference/*.yaml \
        [--set dataset.limit=1 ...]

Each file is run to completion in this process (one shared temporary data directory, so the
covidqa sample is embedded once per chunker), then run again in a child interpreter, which must
report "nothing new to compute" and lists the watched packages in its ``sys.modules``. The LLM is
a stand-in registered as ``local`` in both (it answers "not found" at once, with the embedded
model's params), so a grid of judges finishes in seconds; the re-run never asks it anything.
Nothing is timed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from measure import REPO_ROOT

WATCHED = ("llama_index", "torch", "sentence_transformers", "transformers", "lancedb", "llama_cpp",
           "onnxruntime", "ragas", "sklearn", "scipy.stats", "statsmodels", "ray")


def register_stand_in() -> None:
    """``local`` answers at once: the grid's judges and generator run without the model."""
    from ragkit.llms.base import BackendReply, LLMBackend, llms

    class StandIn(LLMBackend):
        name = "local"
        Params = llms.params_model("local")

        def _chat(self, messages: Any, *, json_schema: Any, max_tokens: int) -> BackendReply:
            return BackendReply(text="not found", prompt_tokens=1, completion_tokens=1)

    llms.register("local", StandIn)


def child(argv: list[str]) -> None:
    register_stand_in()
    from ragkit.cli import main

    code = main(argv)
    print("HEAVY=" + json.dumps(sorted(name for name in WATCHED if name in sys.modules)))
    sys.exit(code)


def check(config: Path, overrides: list[str], data_dir: str) -> tuple[bool, list[str]]:
    from ragkit.cli import main

    out = Path(data_dir) / "results" / config.stem
    argv = ["run", str(config), "--out", str(out), "--quiet", *[a for o in overrides for a in ("--set", o)]]
    if main(argv) != 0:
        raise SystemExit(f"{config}: the first run failed")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_DATA_DIR": data_dir}
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(argv)], cwd=Path(__file__).parent,
                          env=env, capture_output=True, text=True, check=True)
    heavy = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("HEAVY="))[6:])
    return "nothing new to compute" in done.stdout, heavy


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(json.loads(sys.argv[2]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("configs", nargs="+", type=Path)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="a config override for every file (e.g. dataset.limit=1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        os.environ["RAGKIT_DATA_DIR"] = data_dir
        register_stand_in()
        for config in args.configs:
            finished, heavy = check(config.resolve(), args.overrides, data_dir)
            print(f"{config}: re-run computed nothing: {finished}; heavy imports: {heavy or 'none'}", flush=True)


if __name__ == "__main__":
    main()
