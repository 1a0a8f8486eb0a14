"""Embedding throughput of `minilm-onnx` (int8, fp32) against sentence-transformers `encode`, and
SciFact nDCG@10 of dense retrieval with minilm-onnx int8 against minilm (issue 32, item 3).

    python benchmarks/bench_embed_onnx.py                      # throughput on 512 SciFact abstracts
    python benchmarks/bench_embed_onnx.py --texts 256 --rounds 2
    python benchmarks/bench_embed_onnx.py --threads 1          # one thread each: CPU work per text
    python benchmarks/bench_embed_onnx.py --scifact            # + nDCG@10 on the whole corpus (slow)
    python benchmarks/bench_embed_onnx.py --scifact --docs 1000  # on a subset: the judged documents + 1000

Throughput: the same texts, the same batch size (32), both on this machine's cores (torch's
threads and ONNX Runtime's intra-op threads both default to the core count), the sides interleaved
`--rounds` times and each side's fastest round kept. Model loading and the one-time ONNX export are
outside the timed part (the export is cached under the data directory, as in a run). Each round
prints its wall and CPU seconds (this process's user + system, `time.process_time`) and the load
average: on a shared machine the CPU seconds per text are the steadier number (both sides spin
idle threads, so they count some waiting too; `--threads 1` leaves none).

nDCG@10: each document (title + abstract, as BEIR) embedded whole, each test question's top 10 by
cosine (exact, numpy), scored by ranx against the test qrels. It measures the embedders, not a
ragkit grid: no chunking, so both sides rank the same units.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Literal

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.measure import Measurement, print_table

SCIFACT = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact" / "beir"
BATCH = 32


def corpus(path: Path) -> dict[str, str]:
    docs = {}
    for line in (path / "corpus.jsonl").open():
        row = json.loads(line)
        docs[str(row["_id"])] = f"{row.get('title', '')} {row['text']}".strip()
    return docs


def torch_encoder(threads: int = 0):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from sentence_transformers import SentenceTransformer

    from ragkit.embedders.onnx_export import shipped_model_folder

    if threads:
        torch.set_num_threads(threads)
    model = SentenceTransformer(str(shipped_model_folder()), device="cpu")
    return lambda texts: np.asarray(model.encode(texts, batch_size=BATCH, normalize_embeddings=True))


def onnx_encoder(precision: Literal["fp32", "int8"], threads: int = 0):
    """The embedder's encode (its session is ONNX Runtime's default threads), or with ``threads``
    the same files and code in a session with that many intra-op threads."""
    from ragkit.embedders.onnx_export import cached_model, max_seq_length, shipped_model_folder
    from ragkit.embedders.onnx_minilm import MiniLMOnnxEmbedder, MiniLMOnnxParams, OnnxSentenceModel
    from ragkit.settings import get_settings

    if not threads:
        model = MiniLMOnnxEmbedder(MiniLMOnnxParams(precision=precision)).sentence_model()  # exports if not cached
    else:
        folder = shipped_model_folder()
        model_file = cached_model(get_settings().resolved_model_cache_dir(), folder, precision)
        model = OnnxSentenceModel(model_file, folder, max_seq_length(folder), threads=threads)
    assert model.batch_size == BATCH
    return model.encode


def throughput(texts: list[str], rounds: int, threads: int) -> list[Measurement]:
    encoders = {"sentence-transformers": torch_encoder(threads), "int8": onnx_encoder("int8", threads),
                "fp32": onnx_encoder("fp32", threads)}
    for encode in encoders.values():
        encode(texts[:BATCH])  # warm-up: first-call allocations
    wall = {name: float("inf") for name in encoders}
    cpu = dict(wall)
    for round_ in range(rounds):
        for name, encode in encoders.items():
            started, started_cpu = time.perf_counter(), time.process_time()
            encode(texts)
            seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - started_cpu
            wall[name], cpu[name] = min(wall[name], seconds), min(cpu[name], cpu_seconds)
            print(f"round {round_ + 1} {name}: wall {seconds:.2f} s, CPU {cpu_seconds:.2f} s, "
                  f"load average {os.getloadavg()[0]:.1f}", flush=True)
    rate = {name: len(texts) / seconds for name, seconds in wall.items()}
    cpu_ms = {name: 1000 * seconds / len(texts) for name, seconds in cpu.items()}
    base = rate["sentence-transformers"]
    print(f"texts/s (fastest of {rounds} rounds, {len(texts)} texts, batch {BATCH}, threads {threads or 'default'}): "
          + ", ".join(f"{name} {value:.1f}" for name, value in rate.items()))
    print("CPU ms per text (least of the rounds): "
          + ", ".join(f"{name} {value:.1f}" for name, value in cpu_ms.items()))
    # The CPU rows' baseline over measured is the speed-up (less CPU per text is faster).
    base_cpu = cpu_ms["sentence-transformers"]
    return [Measurement("minilm-onnx int8 throughput", rate["int8"], base, "t/s", ">= 2x", rate["int8"] >= 2 * base),
            Measurement("minilm-onnx fp32 throughput", rate["fp32"], base, "t/s", "(context)", None),
            Measurement("minilm-onnx int8 CPU per text", cpu_ms["int8"], base_cpu, "ms", "(context) <= 0.5x", None),
            Measurement("minilm-onnx fp32 CPU per text", cpu_ms["fp32"], base_cpu, "ms", "(context)", None)]


def ndcg_at_10(path: Path, extra_docs: int) -> list[Measurement]:
    from ranx import Qrels, Run, evaluate

    docs = corpus(path)
    queries = {str(json.loads(line)["_id"]): json.loads(line)["text"] for line in (path / "queries.jsonl").open()}
    judged: dict[str, dict[str, int]] = {}
    for line in list((path / "qrels" / "test.tsv").open())[1:]:
        query, doc, score = line.split("\t")
        judged.setdefault(query, {})[doc] = int(score)
    if extra_docs:
        relevant = {doc for docs_of in judged.values() for doc in docs_of}
        others = [doc for doc in docs if doc not in relevant][:extra_docs]
        docs = {doc: docs[doc] for doc in [*sorted(relevant & docs.keys()), *others]}
    ids, texts = list(docs), list(docs.values())
    asked = sorted(judged)
    scores = {}
    for name, encode in (("minilm", torch_encoder()), ("minilm-onnx int8", onnx_encoder("int8"))):
        started = time.perf_counter()
        doc_vectors, query_vectors = encode(texts), encode([queries[q] for q in asked])
        similarities = query_vectors @ doc_vectors.T
        top = np.argsort(-similarities, axis=1)[:, :10]
        run = Run({q: {ids[d]: float(similarities[row, d]) for d in top[row]} for row, q in enumerate(asked)})
        scores[name] = float(evaluate(Qrels(judged), run, "ndcg@10"))
        print(f"{name}: nDCG@10 {scores[name]:.4f} on {len(ids)} documents, {len(asked)} questions "
              f"({time.perf_counter() - started:.0f} s)")
    gap = abs(scores["minilm-onnx int8"] - scores["minilm"])
    return [Measurement("SciFact nDCG@10, minilm-onnx int8", scores["minilm-onnx int8"], scores["minilm"], "",
                        "within 0.005", gap <= 0.005)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=512, help="SciFact abstracts embedded per round (default 512)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; each side's fastest is kept")
    parser.add_argument("--scifact", action="store_true", help="also SciFact nDCG@10 (embeds the corpus twice)")
    parser.add_argument("--docs", type=int, default=0,
                        help="with --scifact: the judged documents plus this many others (0: the whole corpus)")
    parser.add_argument("--dataset", type=Path, default=SCIFACT, help="SciFact's BEIR folder")
    parser.add_argument("--threads", type=int, default=0,
                        help="threads for both sides (torch and ONNX Runtime intra-op); 0: each one's default")
    args = parser.parse_args()
    if not (args.dataset / "corpus.jsonl").exists():
        parser.error(f"--dataset {args.dataset} has no corpus.jsonl (the SciFact BEIR folder)")
    if not 1 <= args.texts <= 5183 or not 1 <= args.rounds <= 20 or args.docs < 0 or not 0 <= args.threads <= 64:
        parser.error("--texts must be 1-5183, --rounds 1-20, --docs >= 0, --threads 0-64")
    texts = list(corpus(args.dataset).values())[:args.texts]
    rows = throughput(texts, args.rounds, args.threads)
    if args.scifact:
        rows += ndcg_at_10(args.dataset, args.docs)
    print_table(rows, "minilm (torch)")


if __name__ == "__main__":
    main()
