"""ONNX Runtime's session options for `minilm`'s encoder: threads and spinning, side by side (issue 41).

    python benchmarks/bench_onnx_session.py [--texts 64] [--repeats 3]

The shipped fp32 export (made on first use, as the embedder makes it) encodes the same texts
(pieces of 1,100 characters of the bundled COVID-QA sample's documents: about 230 tokens each,
like the quickstart's chunks) in `unpadded_batches`, as `OnnxSentenceModel.encode` does, with:

- `2 threads, spinning`: ONNX Runtime's defaults on 2 cores (what `minilm` ran before issue 41);
- `2 threads, no spinning`: `session.intra_op.allow_spinning=0` (`session_options()`, the default now);
- `1 thread`: one intra-op thread, nothing to spin.

The variants run interleaved, `--repeats` times each, after one warm-up call each. Per run: wall
seconds, this process's CPU seconds (user + system) and the 1-minute load average at its start.
On a shared machine read the CPU column: it is the work a variant costs, whatever else runs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import REPO_ROOT

VARIANTS = {"2 threads, spinning": (2, True), "2 threads, no spinning": (2, False), "1 thread": (1, False)}


def sample_texts(count: int) -> list[str]:
    texts: list[str] = []
    for line in (REPO_ROOT / "datasets" / "covidqa_sample" / "corpus.jsonl").open():
        text = json.loads(line)["text"]
        texts += [text[start:start + 1100] for start in range(0, len(text), 1100)]
    return texts[:count]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    import onnxruntime

    from ragkit.embedders.onnx_export import cached_model, shipped_model_folder
    from ragkit.embedders.onnx_minilm import MAX_BATCH_TOKENS, session_options, shipped_tokenizer, unpadded_batches
    from ragkit.settings import get_settings

    folder = shipped_model_folder()
    model = cached_model(get_settings().resolved_model_cache_dir(), folder, "fp32")
    ids = [encoding.ids for encoding in shipped_tokenizer(folder, 256).encode_batch(sample_texts(args.texts))]
    print(f"{len(ids)} texts, {np.mean([len(i) for i in ids]):.0f} tokens on average", flush=True)
    batches = [np.array([ids[i] for i in batch], dtype=np.int64)
               for batch in unpadded_batches([len(i) for i in ids], 32, MAX_BATCH_TOKENS)]
    sessions = {}
    for name, (threads, spinning) in VARIANTS.items():
        if spinning:  # ONNX Runtime's defaults but the thread count
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads = threads
        else:
            options = session_options(threads)
        sessions[name] = onnxruntime.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
        sessions[name].run(None, {"input_ids": batches[0]})
    measured: dict[str, list[tuple[float, float, float]]] = {name: [] for name in sessions}
    for _ in range(args.repeats):
        for name, session in sessions.items():
            load, cpu, started = os.getloadavg()[0], cpu_seconds(), time.perf_counter()
            for batch in batches:
                session.run(None, {"input_ids": batch})
            measured[name].append((time.perf_counter() - started, cpu_seconds() - cpu, load))
    print("| variant | wall (s), each repeat | CPU (s), each repeat | CPU per text (median) | load average |")
    print("|---|---|---|---|---|")
    for name, runs in measured.items():
        walls, cpus, loads = zip(*runs)
        print(f"| {name} | {' / '.join(f'{w:.1f}' for w in walls)} | {' / '.join(f'{c:.2f}' for c in cpus)} | "
              f"{np.median(cpus) / len(ids):.3f} s | {' / '.join(f'{x:.1f}' for x in loads)} |")


if __name__ == "__main__":
    main()
