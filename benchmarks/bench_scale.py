"""ragkit's own costs at a million chunks: the in-process executor over a synthetic corpus, with the
model taken out, against writing the same rows into LanceDB directly.

    python benchmarks/bench_scale.py [--docs 1000000] [--questions 20] [--skip-raw] [--window-rows N]

The corpus is ``--docs`` short documents (one chunk each with the ``document`` chunker) in a
BEIR folder; the embedder is a stand-in registered for this run that returns a unit vector drawn
from each text's hash, instantly, so what is timed is ragkit's path: reading the corpus, chunking,
the embedding cache (lookup, appends, compaction), the index build, and the questions (dense and
bm25, top 10) with scoring and commits. It runs in a child process, whose peak RSS is read with
``os.wait4``; the child then runs the same experiment again (everything cached). The baseline is a
child that writes the same rows and vectors into one LanceDB table with ``create_table`` and
builds its full-text index: the least any index of these chunks costs. It holds the whole table
in memory (5.9 GB at 1M chunks): ``--skip-raw`` leaves it out for larger runs.
``--window-rows`` sets ``RAGKIT_BUILD_WINDOW_ROWS`` for the ragkit child (0: the whole-frame
build of before issue 32; default: the setting's default, a streamed build).

Printed: seconds per build stage, peak RSS, the ragkit child's CPU seconds (user + system, all
its threads: steadier than wall time on a shared machine), the load average before and after,
the data directory's size by folder, and the embedding cache's LanceDB versions. No goal of the
issue's table is about this; it is the measurement behind the 10M-chunk extrapolation in
README.md. A script, not a test.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import Measurement, print_table, run_child

DIM = 384
WORDS = ["cell", "protein", "gene", "virus", "trial", "dose", "risk", "model", "signal", "tissue", "immune",
         "binding", "pathway", "receptor", "mutation", "therapy", "cohort", "sample", "marker", "response"]


def write_corpus(folder: Path, docs: int, questions: int) -> Path:
    """A BEIR folder: ``docs`` documents of 20-40 words, ``questions`` queries each naming one."""
    rng = np.random.default_rng(0)
    (folder / "qrels").mkdir(parents=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for start in range(0, docs, 100_000):
            count = min(100_000, docs - start)
            picks = rng.integers(0, len(WORDS), size=(count, 40))
            lengths = rng.integers(20, 41, size=count)
            for offset, (row, length) in enumerate(zip(picks, lengths)):
                text = " ".join(WORDS[i] for i in row[:length]) + f" item{start + offset}"
                handle.write(json.dumps({"_id": f"d{start + offset}", "title": "", "text": text}) + "\n")
    step = max(1, docs // questions)
    chosen = [f"d{i}" for i in range(0, docs, step)][:questions]
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": f"q{i}", "text": f"{WORDS[i % 20]} {WORDS[(i * 7) % 20]} item{doc[1:]}"}) + "\n"
                for i, doc in enumerate(chosen)), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\t{doc}\t1\n" for i, doc in enumerate(chosen)),
        encoding="utf-8")
    return folder


def hashed_vectors(texts: list[str]) -> np.ndarray:
    """A unit vector per text, seeded by its SHA-256: the same text always gets the same vector."""
    vectors = np.empty((len(texts), DIM), dtype=np.float32)
    for row, text in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        vectors[row] = np.random.default_rng(seed).standard_normal(DIM, dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def ragkit_child(dataset: Path, data_dir: Path) -> None:
    from typing import Any, ClassVar

    from ragkit.embedders.base import Embedder, embedders
    from ragkit.embedders.local import MiniLMParams
    from ragkit.experiments.config import config_from_dict
    from ragkit.experiments.runner import run_experiment
    from ragkit.settings import get_settings

    class HashedParams(MiniLMParams):
        """No parameters: the stand-in embedder of this benchmark."""

    class HashedEmbedder(Embedder):
        name: ClassVar[str] = "hashed"
        Params: ClassVar[type[HashedParams]] = HashedParams

        class _Model:
            def get_text_embedding_batch(self, texts: list[str]) -> Any:
                return hashed_vectors(texts)

            def get_query_embedding(self, text: str) -> Any:
                return hashed_vectors([text])[0]

        def _create_model(self) -> Any:
            return self._Model()

        def _embed_query_batch(self, texts: list[str]) -> list:
            return list(hashed_vectors(texts))

    os.environ["RAGKIT_DATA_DIR"] = str(data_dir)
    get_settings.cache_clear()
    out = data_dir / "results" / "bench-scale"
    seconds, cpu = [], []
    with embedders.registered("hashed", HashedEmbedder):
        config = config_from_dict({
            "name": "bench-scale", "dataset": {"path": str(dataset), "format": "beir"}, "chunkers": ["document"],
            "embedders": ["hashed"], "retrievers": ["dense", "bm25"], "top_k": [10],
        })
        for _ in range(2):
            started, cpu_started = time.perf_counter(), os.times()
            report = run_experiment(config, out)
            seconds.append(time.perf_counter() - started)
            cpu_now = os.times()
            cpu.append(cpu_now.user + cpu_now.system - cpu_started.user - cpu_started.system)
            assert not report.errors, report.errors
    from ragkit.analysis.loading import load_results

    stages = load_results(out).stages
    builds = stages[stages["question_id"].isna()].groupby("stage", observed=True)["seconds"].max().to_dict()
    print(json.dumps({"first": seconds[0], "again": seconds[1], "cpu_first": cpu[0], "cpu_again": cpu[1],
                      "builds": builds}))


def raw_child(dataset: Path, folder: Path) -> None:
    import lancedb
    import pyarrow as pa
    from lancedb.index import FTS

    started = time.perf_counter()
    rows = [json.loads(line) for line in open(dataset / "corpus.jsonl", encoding="utf-8")]
    texts = [row["text"] for row in rows]
    vectors = hashed_vectors(texts)
    table = pa.table({"chunk_id": [row["_id"] for row in rows], "text": texts,
                      "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1)), DIM)})
    lance = lancedb.connect(folder).create_table("chunks", data=table)
    lance.create_index("text", config=FTS(language="English", stem=True, remove_stop_words=True))
    print(json.dumps({"seconds": time.perf_counter() - started}))


def folder_mb(folder: Path) -> float:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) / 1e6 if folder.exists() else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--skip-raw", action="store_true", help="leave out the raw LanceDB child (all in memory)")
    parser.add_argument("--window-rows", type=int, help="RAGKIT_BUILD_WINDOW_ROWS for the ragkit child")
    parser.add_argument("--child", choices=("ragkit", "raw"), help=argparse.SUPPRESS)
    parser.add_argument("--dataset", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "ragkit":
        ragkit_child(args.dataset, args.folder)
        return
    if args.child == "raw":
        raw_child(args.dataset, args.folder)
        return

    this = str(Path(__file__).resolve())
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        started = time.perf_counter()
        dataset = write_corpus(scratch / "beir", args.docs, args.questions)
        print(f"corpus: {args.docs} docs written in {time.perf_counter() - started:.0f} s "
              f"({folder_mb(dataset):.0f} MB)", flush=True)
        load_before = os.getloadavg()
        raw, raw_rss = {"seconds": float("nan")}, float("nan")
        if not args.skip_raw:
            raw_out, raw_rss = run_child([this, "--child", "raw", "--dataset", str(dataset),
                                          "--folder", str(scratch / "raw")])
            raw = json.loads(raw_out)
        data_dir = scratch / "data"
        window = {} if args.window_rows is None else {"RAGKIT_BUILD_WINDOW_ROWS": str(args.window_rows)}
        ragkit_out, ragkit_rss = run_child([this, "--child", "ragkit", "--dataset", str(dataset),
                                            "--folder", str(data_dir)], env=window)
        load_after = os.getloadavg()
        measured = json.loads(ragkit_out.strip().splitlines()[-1])
        sizes = {name: folder_mb(path) for path in sorted(data_dir.iterdir()) if (name := path.name) != "locks"}
        cache_tables = list((data_dir / "embeddings").glob("*.lance"))
        versions = sum(len(list((table / "_versions").iterdir())) for table in cache_tables)
        raw_mb = folder_mb(scratch / "raw")

    print(f"load average (1, 5, 15 min) before {load_before}, after {load_after}")
    print(f"ragkit CPU seconds (user + system): first run {measured['cpu_first']:.0f} s, "
          f"re-run {measured['cpu_again']:.1f} s")
    print(f"ragkit first run {measured['first']:.0f} s, re-run {measured['again']:.1f} s; build stages (s): "
          + ", ".join(f"{stage} {seconds:.1f}" for stage, seconds in sorted(measured["builds"].items())))
    print("data directory (MB): " + ", ".join(f"{name} {mb:.0f}" for name, mb in sizes.items())
          + f"; the table written directly: {raw_mb:.0f} MB")
    print(f"embedding cache: {versions} LanceDB versions")
    print_table([
        Measurement(f"ragkit build + {args.questions} questions x 2 runs, {args.docs} chunks (vs raw table + FTS)",
                    measured["first"], raw["seconds"], "s", "(context)", None),
        Measurement("peak RSS of that run (vs raw table + FTS)", ragkit_rss, raw_rss, "MB", "(context)", None),
    ])


if __name__ == "__main__":
    main()
