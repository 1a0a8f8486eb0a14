"""`minilm` on ONNX Runtime (the default) against torch, side by side in one run (issue 41, item 1).

    python benchmarks/bench_minilm_runtime.py quickstart            # the bundled quickstart, first run
    python benchmarks/bench_minilm_runtime.py filings --pages 50    # 12 configurations over 20 stand-in filings

Each side is a child process, `python -m ragkit.cli run CONFIG --quiet`, timed wall to wall (the
interpreter's start and every import count: a new user waits for them too), with its own fresh
RAGKIT_DATA_DIR. The sides:

- torch: `RAGKIT_MINILM_RUNTIME=torch` (what `minilm` ran before ONNX Runtime was its default);
- onnx, first ever: the default with an empty model cache, so the one-time ONNX export (torch
  loaded to make it) is inside the time;
- onnx, export made: the default with the export already in the model cache (a second data
  directory on the same machine, or an install that made it: `python -m ragkit.embedders.onnx_export`).

`filings` writes 20 stand-in filings of `--pages` pages (`standin_filings.py`: text-dense pages, a
table on every third), one question per filing (a sentence of it, its filing the relevant
document), and runs 2 chunkers x 3 retrievers x 2 top-k over them. Each side prints its CPU seconds (the
run's and its workers'), whether torch and sentence-transformers were imported, and the load
average before and after. Sides run one
after another in the order given by `--sides`; on a shared machine read the ratios. For the
quickstart, each side's wall and CPU ratio to torch is also scaled to the torch side's seconds on a
quiet machine (`--quiet-torch`, the issue's 62.5 s) as context; the 35 s goal is judged on the
measured wall, and on the floor's least wall (imports, then the embedding over all cores). With the onnx-made
side, the quickstart's floor is measured after the sides: a fresh interpreter importing what that
run imported, and its distinct chunk texts embedded alone on the ONNX default's session; the run's
CPU is printed against that floor and the floor against the torch side.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import REPO_ROOT, Measurement, print_table

QUICKSTART = REPO_ROOT / "experiments" / "quickstart.yaml"
# Runs the CLI, then reports which heavy modules the run imported (on stderr, after the run).
# The modules it imported, in import order, go to RAGKIT_BENCH_MODULES (the imports floor re-imports them).
CHILD = ("import os, sys\nfrom ragkit.cli import main\ncode = 1\ntry:\n    code = main(sys.argv[1:])\nfinally:\n"
         "    print('imported:', ','.join(m for m in ('torch', 'sentence_transformers', 'transformers', "
         "'onnxruntime') if m in sys.modules), file=sys.stderr)\n"
         "    open(os.environ['RAGKIT_BENCH_MODULES'], 'w').write('\\n'.join(sys.modules))\nsys.exit(code)\n")
# The imports floor: a fresh interpreter importing what a side's run imported, in its order.
IMPORTS_CHILD = ("import importlib, resource, sys\nfor name in open(sys.argv[1]).read().split():\n"
                 "    if name != '__main__' and name not in sys.modules:\n        try:\n"
                 "            importlib.import_module(name)\n        except Exception:\n            pass\n"
                 "usage = resource.getrusage(resource.RUSAGE_SELF)\nprint(usage.ru_utime + usage.ru_stime)\n")
# The embedding floor: the distinct chunk texts of a side's chunk sets through the ONNX default's
# session alone (tokenizing included, the session's creation not), CPU of this process's threads.
EMBED_CHILD = """import sys, time
from pathlib import Path
import pyarrow.parquet as pq
from ragkit.embedders.onnx_minilm import shipped_sentence_model
texts = list(dict.fromkeys(text for path in sorted(Path(sys.argv[1]).glob("derived/*/chunksets/*.parquet"))
                           for text in pq.read_table(path, columns=["embed_text"]).column("embed_text").to_pylist()))
model = shipped_sentence_model("fp32", None)
started = time.process_time()
model.encode(texts)
tokens = sum(len(e.ids) for e in model.tokenizer.encode_batch(texts))
print(time.process_time() - started, len(texts), tokens / len(texts))
"""
SIDES = {"torch": ("torch", False), "onnx-first": ("auto", False), "onnx-made": ("auto", True)}


def filings_experiment(folder: Path, pages: int) -> Path:
    """20 stand-in filings, one question per filing, and the 12-configuration grid's YAML."""
    from standin_filings import sentence, write_filing

    rng = random.Random(0)
    docs = folder / "filings"
    docs.mkdir(parents=True)
    for number in range(20):
        write_filing(docs / f"filing-{number:02d}.pdf", pages, rng, number)
    questions = folder / "questions.jsonl"
    with questions.open("w") as out:
        for number in range(20):
            out.write(json.dumps({"id": f"q{number}", "question": sentence(rng),
                                  "relevant_doc_ids": [f"filing-{number:02d}.pdf"]}) + "\n")
    config = {
        "name": "filings-grid", "dataset": {"path": str(questions), "format": "jsonl"},
        "corpus": {"path": str(docs)},
        "chunkers": [{"type": "token", "params": {"chunk_size": 256, "chunk_overlap": 32}},
                     {"type": "sentence", "params": {"chunk_size": 512, "chunk_overlap": 64}}],
        "embedders": ["minilm"], "retrievers": ["bm25", "dense", "hybrid"], "top_k": [5, 10],
    }
    path = folder / "filings.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def make_export(cache: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_MODEL_CACHE_DIR": str(cache)}
    subprocess.run([sys.executable, "-m", "ragkit.embedders.onnx_export"], env=env, check=True, cwd=REPO_ROOT)


def run_side(name: str, config: Path, scratch: Path, made_cache: Path) -> tuple[float, float]:
    runtime, export_made = SIDES[name]
    cache = made_cache if export_made else scratch / f"models-{name}"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_DATA_DIR": str(scratch / f"data-{name}"),
           "RAGKIT_MODEL_CACHE_DIR": str(cache), "RAGKIT_MINILM_RUNTIME": runtime,
           "RAGKIT_BENCH_MODULES": str(scratch / f"modules-{name}.txt")}
    load = os.getloadavg()[0]
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", CHILD, "run", str(config), "--quiet"], env=env, cwd=REPO_ROOT,
                          capture_output=True, text=True)
    seconds = time.perf_counter() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = cpu_after.ru_utime + cpu_after.ru_stime - cpu_before.ru_utime - cpu_before.ru_stime
    if done.returncode:
        sys.exit(f"{name}: exit {done.returncode}\n{done.stderr[-3000:]}")
    imported = [line for line in done.stderr.splitlines() if line.startswith("imported:")][-1]
    note = f"CPU {cpu:.1f} s (the run and its workers); load {load:.1f} -> {os.getloadavg()[0]:.1f}; {imported}"
    print(f"{name:11} {seconds:7.1f} s  ({note})", flush=True)
    return seconds, cpu


def floor(scratch: Path, made_cache: Path) -> tuple[float, float]:
    """CPU seconds of the onnx-made side's imports alone and of embedding its chunk texts alone."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "RAGKIT_MODEL_CACHE_DIR": str(made_cache)}
    imports = float(subprocess.run([sys.executable, "-c", IMPORTS_CHILD, str(scratch / "modules-onnx-made.txt")],
                                   env=env, cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout)
    out = subprocess.run([sys.executable, "-c", EMBED_CHILD, str(scratch / "data-onnx-made")], env=env, cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout.split()
    embedding, texts, tokens = float(out[0]), int(out[1]), float(out[2])
    print(f"floor: imports alone {imports:.1f} s CPU; embedding the {texts} distinct chunk texts alone "
          f"({tokens:.0f} tokens on average, ONNX fp32) {embedding:.1f} s CPU; together {imports + embedding:.1f} s",
          flush=True)
    return imports, embedding


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("experiment", choices=["quickstart", "filings"])
    parser.add_argument("--pages", type=int, default=50, help="pages per stand-in filing")
    parser.add_argument("--sides", default="torch,onnx-first,onnx-made")
    parser.add_argument("--quiet-torch", type=float, default=62.5,
                        help="the torch side's seconds on a quiet machine (the issue's quickstart: 62.5), to scale "
                             "each side's ratio to a quiet machine's seconds")
    args = parser.parse_args()
    sides = args.sides.split(",")
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        config = QUICKSTART if args.experiment == "quickstart" else filings_experiment(scratch, args.pages)
        made_cache = scratch / "models-made"
        if "onnx-made" in sides:
            make_export(made_cache)
        measured = {name: run_side(name, config, scratch, made_cache) for name in sides}
        floors = floor(scratch, made_cache) if "onnx-made" in sides and args.experiment == "quickstart" else None
    rows = []
    if floors is not None and "torch" in measured:
        rows.append(Measurement("quickstart: floor (imports + embedding) CPU", sum(floors), measured["torch"][1],
                                "s", "(context)", None))
    for name in sides:
        if name == "torch" or "torch" not in measured:
            continue
        (wall, cpu), (torch_wall, torch_cpu) = measured[name], measured["torch"]
        if args.experiment == "filings":
            rows.append(Measurement(f"filings: {name} vs torch, wall", wall, torch_wall, "s", ">= 1.6x faster",
                                    torch_wall >= 1.6 * wall))
            rows.append(Measurement(f"filings: {name} vs torch, CPU", cpu, torch_cpu, "s", "(context)", None))
            continue
        # The goal is the measured wall (it holds on a quiet machine: state the load). The ratio applied
        # to the quiet torch seconds is context only: no commit here reproduces those seconds.
        rows.append(Measurement(f"quickstart: {name} wall", wall, torch_wall, "s", "<= 35 s", wall <= 35.0))
        for kind, mine, theirs in (("wall", wall, torch_wall), ("CPU", cpu, torch_cpu)):
            quiet = args.quiet_torch * mine / theirs
            print(f"{name} / torch, {kind}: {mine / theirs:.3f}x -> {quiet:.1f} s at the quiet torch side's "
                  f"{args.quiet_torch:g} s")
            rows.append(Measurement(f"quickstart: {name} vs torch, {kind} (scaled to a quiet {args.quiet_torch:g} s)",
                                    quiet, args.quiet_torch, "s", "(context)", None))
    if rows:
        print_table(rows, "torch")
    if floors is not None:
        # What the first run costs above what it cannot avoid: its imports and its chunks' embedding.
        print_table([Measurement("quickstart: onnx-made CPU vs the floor", measured["onnx-made"][1], sum(floors), "s",
                                 "(context)", None)], "floor")
        # The least wall the floor can take: imports on one core, then the embedding over all of them.
        least = floors[0] + floors[1] / (os.cpu_count() or 1)
        print_table([Measurement("quickstart: the floor's least wall (imports + embedding / cores)", least,
                                 measured["onnx-made"][0], "s", "<= 35 s", least <= 35.0)], "onnx-made wall")


if __name__ == "__main__":
    main()
