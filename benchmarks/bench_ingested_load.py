"""Memory of loading an ingested corpus: texts left in the parsed files (``CorpusStore.load``)
against the whole read of before (every parsed file's texts in memory), N generated .txt files.

    python benchmarks/bench_ingested_load.py --files 10000

Each load runs in its own child process (``--child``) so the RSS is its own: the held memory is
the RSS after the load (gc'd) less the RSS before it, and the traced Python allocations; then
one pass over the corpus in batches of 1,000 (CPU seconds, ``resource.getrusage``).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import tempfile
import tracemalloc
from pathlib import Path

WORDS = "protein virus cell gene sample patient dose trial".split()


def rss_mb() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def child(mode: str) -> None:
    from ragkit.corpus.model import Corpus
    from ragkit.corpus.store import CorpusStore

    store = CorpusStore()
    gc.collect()
    before = rss_mb()
    tracemalloc.start()
    if mode == "lazy":
        corpus = store.load("bench")
    else:  # the load of before
        manifest = store._require("bench")
        corpus = Corpus.from_documents("bench", [r for e in manifest.documents for r in store._entry_records(e)])
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] / 1e6
    tracemalloc.stop()
    held = rss_mb() - before
    start = resource.getrusage(resource.RUSAGE_SELF)
    characters = sum(len(text) for batch in corpus.batches(1_000) for text in batch.texts)
    end = resource.getrusage(resource.RUSAGE_SELF)
    cpu = end.ru_utime + end.ru_stime - start.ru_utime - start.ru_stime
    print(json.dumps({"mode": mode, "rss_mb": round(held, 1), "traced_mb": round(traced, 1),
                      "pass_cpu_s": round(cpu, 2), "chars": characters, "corpus_id": corpus.corpus_id}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=10_000, help="generated .txt files of ~5 KB")
    parser.add_argument("--child", choices=["lazy", "whole"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    with tempfile.TemporaryDirectory() as tmp:
        folder, data = Path(tmp) / "files", Path(tmp) / "data"
        folder.mkdir()
        for number in range(args.files):
            body = " ".join(WORDS[(number + i) % len(WORDS)] for i in range(800))
            (folder / f"doc{number:05d}.txt").write_text(f"Document {number}.\n\n{body}\n", encoding="utf-8")
        text_mb = sum(path.stat().st_size for path in folder.iterdir()) / 1e6
        env = {**os.environ, "RAGKIT_DATA_DIR": str(data)}
        subprocess.run([sys.executable, "-m", "ragkit.cli", "ingest", str(folder), "--corpus", "bench"],
                       env=env, check=True, stdout=subprocess.DEVNULL)
        print(f"{args.files} files, {text_mb:.1f} MB of text, load average {os.getloadavg()[0]:.1f}")
        for mode in ("whole", "lazy"):
            out = subprocess.run([sys.executable, __file__, "--child", mode], env=env, check=True,
                                 capture_output=True, text=True).stdout
            print(out.strip(), f"(load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
