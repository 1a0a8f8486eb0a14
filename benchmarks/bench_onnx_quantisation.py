"""Which int8 quantisation of the exported MiniLM `minilm-onnx` should use (issue 32, item 3): per
variant of onnxruntime's `quantize_dynamic`, the cosine distance of its vectors to the torch
model's on the 500 texts of tests/embedders/test_onnx_minilm.py, and its throughput against
sentence-transformers `encode` on SciFact abstracts.

    python benchmarks/bench_onnx_quantisation.py                          # every variant, distances only
    python benchmarks/bench_onnx_quantisation.py --variants chosen,fp32-ffn --texts 128 --rounds 2

Distances: each variant's file is quantised from the same fp32 export (the one `minilm-onnx fp32`
caches under the data directory) and encodes the 500 texts with the embedder's own code
(`OnnxSentenceModel`: batch 32, length-sorted). Throughput (`--texts` > 0): torch and the chosen
variants interleaved `--rounds` times, each side's fastest round kept, as bench_embed_onnx.py does.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.bench_embed_onnx import BATCH, SCIFACT, corpus, torch_encoder
from ragkit.embedders import onnx_export

LAYERS = range(6)


def matmuls(part: str, layers: range | list[int] = LAYERS) -> list[str]:
    """The names the exporter gives to a part's weight MatMuls in the given encoder layers."""
    paths = {"qkv": ["attention/self/query", "attention/self/key", "attention/self/value"],
             "attention-output": ["attention/output/dense"], "ffn-up": ["intermediate/dense"],
             "ffn-down": ["output/dense"]}[part]
    return [f"/transformer/encoder/layer.{layer}/{path}/MatMul" for layer in layers for path in paths]


def variants() -> dict[str, dict[str, Any]]:
    """Name -> `quantize_dynamic` keyword arguments (weights QInt8 unless `weight_type` says)."""
    from onnxruntime.quantization import QuantType

    chosen = onnx_export.QUANTISATION
    const_b = {"MatMulConstBOnly": True}
    return {
        "chosen": dict(chosen),
        "per-tensor": {"per_channel": False, "extra_options": const_b},
        "reduce-range": {"per_channel": True, "reduce_range": True, "extra_options": const_b},
        "weights-quint8": {"per_channel": True, "weight_type": QuantType.QUInt8, "extra_options": const_b},
        "activation-symmetric": {"per_channel": True, "extra_options": {**const_b, "ActivationSymmetric": True}},
        "weight-asymmetric": {"per_channel": True, "extra_options": {**const_b, "WeightSymmetric": False}},
        "fp32-first-last-layers": {"per_channel": True, "extra_options": const_b, "nodes_to_exclude": [
            name for part in ("qkv", "attention-output", "ffn-up", "ffn-down") for name in matmuls(part, [0, 5])]},
        "fp32-ffn-down": {"per_channel": True, "extra_options": const_b, "nodes_to_exclude": matmuls("ffn-down")},
        "fp32-ffn-down-layers-0-2": {"per_channel": True, "extra_options": const_b,
                                     "nodes_to_exclude": matmuls("ffn-down", [0, 2])},
        "fp32-ffn-up": {"per_channel": True, "extra_options": const_b, "nodes_to_exclude": matmuls("ffn-up")},
        "fp32-ffn": {"per_channel": True, "extra_options": const_b,
                     "nodes_to_exclude": matmuls("ffn-up") + matmuls("ffn-down")},
        "fp32-attention": {"per_channel": True, "extra_options": const_b,
                           "nodes_to_exclude": matmuls("qkv") + matmuls("attention-output")},
    }


def quantise(fp32: Path, target: Path, options: dict[str, Any]) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    options = dict(options)
    quantize_dynamic(fp32, target, weight_type=options.pop("weight_type", QuantType.QInt8), **options)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    known = variants()
    parser.add_argument("--variants", default=",".join(known), help=f"comma-separated, of: {', '.join(known)}")
    parser.add_argument("--texts", type=int, default=0, help="SciFact abstracts per throughput round (0: none)")
    parser.add_argument("--rounds", type=int, default=2, help="interleaved throughput rounds; fastest kept")
    parser.add_argument("--data-dir", type=Path, default=None, help="where the fp32 export is cached")
    args = parser.parse_args()
    chosen = args.variants.split(",")
    if unknown := [name for name in chosen if name not in known]:
        parser.error(f"--variants: unknown {', '.join(unknown)}; valid: {', '.join(known)}")
    if not 0 <= args.texts <= 5183 or not 1 <= args.rounds <= 20:
        parser.error("--texts must be 0-5183, --rounds 1-20")

    from ragkit.embedders.onnx_minilm import OnnxSentenceModel
    from ragkit.settings import get_settings
    from tests.embedders.test_onnx_minilm import sample_texts

    folder = onnx_export.shipped_model_folder()
    fp32 = onnx_export.cached_model(args.data_dir or get_settings().resolved_data_dir(), folder, "fp32")
    texts = sample_texts()
    torch_encode = torch_encoder()
    reference = torch_encode(texts)
    encoders = {}
    with tempfile.TemporaryDirectory() as scratch:
        print(f"cosine distance to torch's vectors, {len(texts)} texts:")
        for name in chosen:
            model = OnnxSentenceModel(quantise(fp32, Path(scratch) / f"{name}.onnx", known[name]), folder,
                                      onnx_export.max_seq_length(folder))
            distances = 1.0 - (model.encode(texts) * reference).sum(axis=1)
            print(f"  {name:24} worst {distances.max():.5f}  mean {distances.mean():.5f}  "
                  f"p99 {np.quantile(distances, 0.99):.5f}", flush=True)
            encoders[name] = model.encode
        if args.texts:
            throughput(list(corpus(SCIFACT).values())[:args.texts], {"torch": torch_encode, **encoders}, args.rounds)


def throughput(texts: list[str], encoders: dict[str, Any], rounds: int) -> None:
    best = {name: float("inf") for name in encoders}
    for _ in range(rounds):
        for name, encode in encoders.items():
            started = time.perf_counter()
            encode(texts)
            best[name] = min(best[name], time.perf_counter() - started)
    base = len(texts) / best["torch"]
    print(f"texts/s, fastest of {rounds} rounds of {len(texts)} SciFact abstracts, batch {BATCH}:")
    for name, seconds in best.items():
        print(f"  {name:24} {len(texts) / seconds:7.2f}  {len(texts) / seconds / base:5.2f}x torch")


if __name__ == "__main__":
    main()
