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
import os
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import onnx_int8_edits as edits
from benchmarks.bench_embed_onnx import BATCH, SCIFACT, corpus, torch_encoder
from ragkit.embedders import onnx_export

LAYERS = range(6)
PARTS = ("qkv", "attention-output", "ffn-up", "ffn-down")


def matmuls(part: str, layers: range | list[int] = LAYERS) -> list[str]:
    """The names the exporter gives to a part's weight MatMuls in the given encoder layers."""
    paths = {"qkv": ["attention/self/query", "attention/self/key", "attention/self/value"],
             "attention-output": ["attention/output/dense"], "ffn-up": ["intermediate/dense"],
             "ffn-down": ["output/dense"]}[part]
    return [f"/transformer/encoder/layer.{layer}/{path}/MatMul" for layer in layers for path in paths]


def variants() -> dict[str, dict[str, Any]]:
    """Name -> `quantize_dynamic` keyword arguments (weights QInt8 unless `weight_type` says), plus
    `smooth` (SmoothQuant's alpha and the parts whose inputs it rescales, before quantising) or
    `build` (a graph edit of `onnx_int8_edits` that replaces quantize_dynamic)."""
    from onnxruntime.quantization import QuantType

    chosen = onnx_export.QUANTISATION
    const_b = {"MatMulConstBOnly": True}
    every = [name for part in PARTS for name in matmuls(part)]
    return {
        "chosen": dict(chosen),
        "per-tensor": {"per_channel": False, "extra_options": const_b},
        "reduce-range": {"per_channel": True, "reduce_range": True, "extra_options": const_b},
        "weights-quint8": {"per_channel": True, "weight_type": QuantType.QUInt8, "extra_options": const_b},
        "activation-symmetric": {"per_channel": True, "extra_options": {**const_b, "ActivationSymmetric": True}},
        "weight-asymmetric": {"per_channel": True, "extra_options": {**const_b, "WeightSymmetric": False}},
        "fp32-first-last-layers": {"per_channel": True, "extra_options": const_b, "nodes_to_exclude": [
            name for part in PARTS for name in matmuls(part, [0, 5])]},
        "fp32-ffn-down": {"per_channel": True, "extra_options": const_b, "nodes_to_exclude": matmuls("ffn-down")},
        "fp32-ffn-down-layers-0-2": {"per_channel": True, "extra_options": const_b,
                                     "nodes_to_exclude": matmuls("ffn-down", [0, 2])},
        "fp32-ffn-up": {"per_channel": True, "extra_options": const_b, "nodes_to_exclude": matmuls("ffn-up")},
        "fp32-ffn": {"per_channel": True, "extra_options": const_b,
                     "nodes_to_exclude": matmuls("ffn-up") + matmuls("ffn-down")},
        "fp32-attention": {"per_channel": True, "extra_options": const_b,
                           "nodes_to_exclude": matmuls("qkv") + matmuls("attention-output")},
        # Only one part int8, the rest fp32: which part's int8 costs what.
        **{f"int8-{part}-only": {"per_channel": True, "extra_options": const_b,
                                 "nodes_to_exclude": [name for other in PARTS if other != part
                                                      for name in matmuls(other)]} for part in PARTS},
        **{f"int8-{part}-only-smoothed": {"per_channel": True, "extra_options": const_b, "smooth": (0.8, [part]),
                                          "nodes_to_exclude": [name for other in PARTS if other != part
                                                               for name in matmuls(other)]}
           for part in ("qkv", "ffn-up", "ffn-down")},
        # SmoothQuant: the QKV and FFN-up inputs (a LayerNorm's output) have a few outlier channels.
        "smooth-qkv-ffn-up": {"per_channel": True, "extra_options": const_b,
                              "smooth": (0.8, ["qkv", "ffn-up"])},
        "smooth-qkv-ffn-up-fp32-ffn-down": {"per_channel": True, "extra_options": const_b,
                                            "smooth": (0.8, ["qkv", "ffn-up"]),
                                            "nodes_to_exclude": matmuls("ffn-down")},
        "smooth-qkv-fp32-ffn": {"per_channel": True, "extra_options": const_b, "smooth": (0.8, ["qkv"]),
                                "nodes_to_exclude": matmuls("ffn-up") + matmuls("ffn-down")},
        "block-int8-32": {"build": lambda fp32, target: edits.block_int8(fp32, target, 32, 4)},
        "block-int8-128": {"build": lambda fp32, target: edits.block_int8(fp32, target, 128, 4)},
        "block-int8-32-fp32-compute": {"build": lambda fp32, target: edits.block_int8(fp32, target, 32, 0)},
        # Diagnostics (fp32 kernels, no speed-up): the error of int8 weights alone, activations alone.
        "weights-only": {"build": lambda fp32, target: edits.weights_only(fp32, target, every)},
        "weights-only-fp32-ffn-down": {"build": lambda fp32, target: edits.weights_only(
            fp32, target, [name for name in every if name not in matmuls("ffn-down")])},
        "activations-only": {"build": edits.activations_only},
        "fp32": {"build": lambda fp32, target: fp32},
    }


def quantise(fp32: Path, target: Path, options: dict[str, Any], folder: Path) -> Path:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    options = dict(options)
    if "build" in options:
        return Path(options["build"](fp32, target))
    if "smooth" in options:
        alpha, parts = options.pop("smooth")
        smoothed = target.with_name(f"smoothed-{target.name}")
        fp32 = edits.smooth(fp32, smoothed, calibration_ranges(fp32, folder), alpha,
                            [name for part in parts for name in matmuls(part)])
    quantize_dynamic(fp32, target, weight_type=options.pop("weight_type", QuantType.QInt8), **options)
    return target


_RANGES: dict[Path, dict[str, np.ndarray]] = {}


def calibration_ranges(fp32: Path, folder: Path) -> dict[str, np.ndarray]:
    if fp32 not in _RANGES:
        _RANGES[fp32] = edits.activation_ranges(fp32, folder, edits.calibration_texts())
    return _RANGES[fp32]


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
    fp32 = onnx_export.cached_model(args.data_dir or get_settings().resolved_model_cache_dir(), folder, "fp32")
    texts = sample_texts()
    torch_encode = torch_encoder()
    reference = torch_encode(texts)
    encoders = {}
    with tempfile.TemporaryDirectory() as scratch:
        print(f"cosine distance to torch's vectors, {len(texts)} texts (load average {os.getloadavg()[0]:.1f}):")
        for name in chosen:
            model = OnnxSentenceModel(quantise(fp32, Path(scratch) / f"{name}.onnx", known[name], folder), folder,
                                      onnx_export.max_seq_length(folder))
            distances = 1.0 - (model.encode(texts) * reference).sum(axis=1)
            print(f"  {name:32} worst {distances.max():.5f}  mean {distances.mean():.5f}  "
                  f"p99 {np.quantile(distances, 0.99):.5f}", flush=True)
            encoders[name] = model.encode
        if args.texts:
            throughput(list(corpus(SCIFACT).values())[:args.texts], {"torch": torch_encode, **encoders}, args.rounds)


def throughput(texts: list[str], encoders: dict[str, Any], rounds: int) -> None:
    """Each side's fastest round in wall time and in CPU time (this process's user + system: ONNX
    Runtime's and torch's threads are in it), the rounds interleaved; ratios against torch."""
    wall = {name: float("inf") for name in encoders}
    cpu = dict(wall)
    for _ in range(rounds):
        for name, encode in encoders.items():
            started, used = time.perf_counter(), _cpu_seconds()
            encode(texts)
            wall[name] = min(wall[name], time.perf_counter() - started)
            cpu[name] = min(cpu[name], _cpu_seconds() - used)
    print(f"fastest of {rounds} rounds of {len(texts)} SciFact abstracts, batch {BATCH}, "
          f"load average {os.getloadavg()[0]:.1f} at the end:")
    for name in encoders:
        print(f"  {name:32} {len(texts) / wall[name]:7.2f} texts/s  {wall['torch'] / wall[name]:5.2f}x torch   "
              f"{1000 * cpu[name] / len(texts):6.1f} ms CPU/text  {cpu['torch'] / cpu[name]:5.2f}x less CPU")


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main()
