"""`minilm`'s two runtimes per text length: torch against ONNX Runtime's graphs and thread options (issue 41).

    python benchmarks/bench_minilm_lengths.py                          # 32, 64, 128, 256 tokens
    python benchmarks/bench_minilm_lengths.py --lengths 256 --texts 48 --rounds 5

The 12-configuration filings grid embeds chunks of 256 and 512 cl100k tokens, which all-MiniLM-L6-v2
truncates to 256 of its own: nearly every text it embeds is 256 tokens long, where the arithmetic
(GEMMs and attention) is most of the time, not per-call overhead as on short texts. This script
measures each runtime at one token length at a time, with texts that are exactly that long (windows
of the bundled COVID-QA sample, decoded and kept where they tokenize back to the length; at 256,
longer windows, truncated as a chunk is). Sides, each encoding the same texts as a run does:

- `torch`: sentence-transformers `encode`, batch 32 (what `RAGKIT_MINILM_RUNTIME=torch` runs);
- `onnx`: the default, `OnnxSentenceModel` on the cached fp32 export (the traced graph: MatMul,
  Softmax, LayerNormalization nodes), idle threads sleeping (`session_options()`);
- `onnx fused`: the same encoder on that graph fused by ONNX Runtime's transformer optimizer
  (`onnxruntime.transformers.optimizer`, model type bert: one Attention per layer,
  EmbedLayerNormalization, SkipLayerNormalization, BiasGelu; `fused_graph` below), built in a
  scratch folder;
- `onnx, spinning`: the default graph with ONNX Runtime's spinning idle threads (its own default;
  off in ragkit to save CPU under load).

The sides run interleaved `--rounds` times per length after one warm-up call each; the median of
the rounds is kept, in wall time and in CPU time (this process's user + system, every thread of
both runtimes in it). Ratios are torch's over the side's: above 1, the side is faster. Each row
prints the 1-minute load average: on a shared machine read the CPU columns and ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from measure import REPO_ROOT


def texts_of_length(tokenizer, length: int, count: int) -> list[str]:
    """``count`` texts of the bundled sample that tokenize to exactly ``length`` tokens ([CLS] and
    [SEP] included; at the model's 256, windows longer than that, truncated as chunks are).
    ``tokenizer`` truncates nothing."""
    sample = REPO_ROOT / "datasets" / "covidqa_sample" / "corpus.jsonl"
    ids = tokenizer.encode(" ".join(json.loads(line)["text"] for line in sample.open())).ids[1:-1]
    window = length - 2 if length < 256 else 300
    found: list[str] = []
    for start in range(0, len(ids) - window, max(1, (len(ids) - window) // (8 * count))):
        candidate = tokenizer.decode(ids[start:start + window])
        tokens = len(tokenizer.encode(candidate).ids)
        if tokens == length or (length == 256 and tokens > 256):
            found.append(candidate)
            if len(found) == count:
                return found
    raise SystemExit(f"only {len(found)} texts of {length} tokens in the sample; ask for fewer (--texts)")


def fused_graph(folder: Path, path: Path) -> None:
    """MiniLM fused by ONNX Runtime's transformer optimizer, taking input_ids only.

    The optimizer finds BERT's attention only in a graph that takes a mask (traced without one, it
    fuses the LayerNorms and Gelus but no Attention), so the graph is traced with one, fused, and
    the mask is then taken out of the fused nodes (``EmbedLayerNormalization``'s mask input and each
    ``Attention``'s mask index are optional): the encoder feeds unpadded batches, as the export does.
    """
    import torch
    from onnxruntime.transformers.optimizer import optimize_model
    from transformers import AutoModel

    class MaskedSentenceVector(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.transformer = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()

        def forward(self, input_ids, attention_mask):  # the mean over every token, as the export's
            tokens = self.transformer(input_ids=input_ids, attention_mask=attention_mask,
                                      token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            return torch.nn.functional.normalize(tokens.mean(dim=1), p=2, dim=1)

    masked = path.with_name("masked.onnx")
    ids = torch.ones((2, 8), dtype=torch.long)
    names = ["input_ids", "attention_mask"]
    with torch.no_grad():
        torch.onnx.export(MaskedSentenceVector(), (ids, torch.ones_like(ids)), str(masked), dynamo=False,
                          opset_version=17, input_names=names, output_names=["sentence_embedding"],
                          dynamic_axes={**{name: {0: "batch", 1: "tokens"} for name in names},
                                        "sentence_embedding": {0: "batch"}})
    optimized = optimize_model(str(masked), model_type="bert", num_heads=12, hidden_size=384, opt_level=0)
    graph = optimized.model.graph
    mask_names = {"attention_mask"}
    for node in list(graph.node):
        if node.op_type == "Cast" and node.input[0] == "attention_mask":
            mask_names.add(node.output[0])
            graph.node.remove(node)
    (embeddings,) = [node for node in graph.node if node.op_type == "EmbedLayerNormalization"]
    attentions = [node for node in graph.node if node.op_type == "Attention"]
    assert len(attentions) == 6 and embeddings.input[7] in mask_names
    for node in attentions:
        assert list(node.input[3:]) == [embeddings.output[1]]  # the mask index, and nothing else
        del node.input[3:]
    del embeddings.input[7:]
    graph.input.remove(next(graph_input for graph_input in graph.input if graph_input.name == "attention_mask"))
    optimized.save_model_to_file(str(path))


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def sides(scratch: Path) -> dict[str, Callable[[list[str]], np.ndarray]]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import onnxruntime
    from sentence_transformers import SentenceTransformer

    from ragkit.embedders import onnx_export
    from ragkit.embedders.onnx_minilm import OnnxSentenceModel
    from ragkit.settings import get_settings

    folder = onnx_export.shipped_model_folder()
    length = onnx_export.max_seq_length(folder)
    default = onnx_export.cached_model(get_settings().resolved_model_cache_dir(), folder, "fp32")
    fused = scratch / "fused.onnx"
    fused_graph(folder, fused)
    spinning = OnnxSentenceModel(default, folder, length)
    options = onnxruntime.SessionOptions()  # session_options() but the spinning
    options.intra_op_num_threads = 0
    spinning.session = onnxruntime.InferenceSession(str(default), options, providers=["CPUExecutionProvider"])
    torch_model = SentenceTransformer(str(folder), device="cpu")
    return {"torch": lambda texts: np.asarray(torch_model.encode(texts, batch_size=32, normalize_embeddings=True)),
            "onnx": OnnxSentenceModel(default, folder, length).encode,
            "onnx fused": OnnxSentenceModel(fused, folder, length).encode,
            "onnx, spinning": spinning.encode}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="32,64,128,256", help="token lengths, comma-separated (4-256)")
    parser.add_argument("--texts", type=int, default=32, help="texts per length (1-200)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds per length; the median is kept")
    args = parser.parse_args()
    lengths = [int(value) for value in args.lengths.split(",")]
    if not all(4 <= value <= 256 for value in lengths) or not 1 <= args.texts <= 200 or not 1 <= args.rounds <= 20:
        parser.error("--lengths must be 4-256 (the model truncates at 256), --texts 1-200, --rounds 1-20")
    from ragkit.embedders.onnx_export import shipped_model_folder
    from ragkit.embedders.onnx_minilm import shipped_tokenizer

    tokenizer = shipped_tokenizer(shipped_model_folder(), 1_000_000)
    with tempfile.TemporaryDirectory() as scratch:
        encoders = sides(Path(scratch))
        rows = []
        for length in lengths:
            texts = texts_of_length(tokenizer, length, args.texts)
            reference = encoders["torch"](texts)
            for name, encode in encoders.items():  # warm-up, and the vectors checked against torch's
                worst = float((1.0 - (encode(texts) * reference).sum(axis=1)).max())
                if worst >= 1e-5:
                    print(f"{name} at {length} tokens: cosine distance to torch {worst:.1e} (>= 1e-5)")
            measured: dict[str, list[tuple[float, float]]] = {name: [] for name in encoders}
            load = os.getloadavg()[0]
            for _ in range(args.rounds):
                for name, encode in encoders.items():
                    started, used = time.perf_counter(), cpu_seconds()
                    encode(texts)
                    measured[name].append((time.perf_counter() - started, cpu_seconds() - used))
            wall = {name: float(np.median([run[0] for run in runs])) for name, runs in measured.items()}
            cpu = {name: float(np.median([run[1] for run in runs])) for name, runs in measured.items()}
            rows.append((length, load, os.getloadavg()[0], wall, cpu))
            print(f"{length} tokens done, load average {load:.1f} -> {os.getloadavg()[0]:.1f}", flush=True)
    names = list(encoders)
    print(f"\n{args.texts} texts a length, median of {args.rounds} interleaved rounds; ms per text, "
          "wall / CPU; ratio = torch's / the side's (above 1: faster than torch)\n")
    print("| tokens | load average | " + " | ".join(names[1:]) + " | torch |")
    print("|---|---|" + "---|" * len(names))
    for length, load, after, wall, cpu in rows:
        cells = [f"{1000 * wall[name] / args.texts:.1f} / {1000 * cpu[name] / args.texts:.1f} ms: "
                 f"**{wall['torch'] / wall[name]:.2f}x** / {cpu['torch'] / cpu[name]:.2f}x" for name in names[1:]]
        torch_cell = f"{1000 * wall['torch'] / args.texts:.1f} / {1000 * cpu['torch'] / args.texts:.1f} ms"
        print(f"| {length} | {load:.1f} -> {after:.1f} | " + " | ".join(cells) + f" | {torch_cell} |")


if __name__ == "__main__":
    main()
