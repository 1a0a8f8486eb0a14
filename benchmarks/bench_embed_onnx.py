"""Embedding throughput of `minilm-onnx` (int8, fp32) against sentence-transformers `encode`, and
SciFact nDCG@10 of dense retrieval with minilm-onnx int8 against minilm (issue 32, item 3).

    python benchmarks/bench_embed_onnx.py                      # throughput on 512 SciFact abstracts
    python benchmarks/bench_embed_onnx.py --texts 256 --rounds 2
    python benchmarks/bench_embed_onnx.py --scifact            # + nDCG@10 on the whole corpus (slow)
    python benchmarks/bench_embed_onnx.py --scifact --docs 1000  # on a subset: the judged documents + 1000

Throughput: the same texts, the same batch size (32), both on this machine's cores (torch's
threads and ONNX Runtime's intra-op threads both default to the core count), the sides interleaved
`--rounds` times and each side's fastest round kept. Model loading and the one-time ONNX export are
outside the timed part (the export is cached under the data directory, as in a run).

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


def torch_encoder():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer

    from ragkit.embedders.onnx_export import shipped_model_folder

    model = SentenceTransformer(str(shipped_model_folder()), device="cpu")
    return lambda texts: np.asarray(model.encode(texts, batch_size=BATCH, normalize_embeddings=True))


def onnx_encoder(precision: str):
    from ragkit.embedders.onnx_minilm import MiniLMOnnxEmbedder, MiniLMOnnxParams

    model = MiniLMOnnxEmbedder(MiniLMOnnxParams(precision=precision)).sentence_model()  # exports if not cached
    assert model.batch_size == BATCH
    return model.encode


def throughput(texts: list[str], rounds: int) -> list[Measurement]:
    encoders = {"sentence-transformers": torch_encoder(), "int8": onnx_encoder("int8"), "fp32": onnx_encoder("fp32")}
    for encode in encoders.values():
        encode(texts[:BATCH])  # warm-up: first-call allocations
    best = {name: float("inf") for name in encoders}
    for _ in range(rounds):
        for name, encode in encoders.items():
            started = time.perf_counter()
            encode(texts)
            best[name] = min(best[name], time.perf_counter() - started)
    rate = {name: len(texts) / seconds for name, seconds in best.items()}
    base = rate["sentence-transformers"]
    print(f"texts/s (fastest of {rounds} rounds, {len(texts)} texts, batch {BATCH}): "
          + ", ".join(f"{name} {value:.1f}" for name, value in rate.items()))
    return [Measurement("minilm-onnx int8 throughput", rate["int8"], base, "t/s", ">= 2x", rate["int8"] >= 2 * base),
            Measurement("minilm-onnx fp32 throughput", rate["fp32"], base, "t/s", "(context)", None)]


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
    args = parser.parse_args()
    if not (args.dataset / "corpus.jsonl").exists():
        parser.error(f"--dataset {args.dataset} has no corpus.jsonl (the SciFact BEIR folder)")
    if not 1 <= args.texts <= 5183 or not 1 <= args.rounds <= 20 or args.docs < 0:
        parser.error("--texts must be 1-5183, --rounds 1-20, --docs >= 0")
    texts = list(corpus(args.dataset).values())[:args.texts]
    rows = throughput(texts, args.rounds)
    if args.scifact:
        rows += ndcg_at_10(args.dataset, args.docs)
    print_table(rows, "minilm (torch)")


if __name__ == "__main__":
    main()
