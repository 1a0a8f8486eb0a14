"""``minilm-onnx``: the same vectors as the torch ``minilm`` (fp32), close ones (int8), an export
made once per data directory, and an embedder a grid can name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from ragkit.embedders import onnx_export
from ragkit.embedders.base import embedders
from ragkit.embedders.onnx_minilm import (
    MAX_BATCH_TOKENS,
    MiniLMOnnxEmbedder,
    MiniLMOnnxParams,
    OnnxSentenceModel,
    session_options,
    shipped_tokenizer,
    unpadded_batches,
)
from ragkit.errors import ConfigError
from ragkit.experiments.config import config_from_dict, expand_grid
from tests.conftest import SAMPLE_DATASET

# int8 cannot reach 1e-3 cosine distance on every text (issue 32's goal). Measured on these 500
# texts (2026-11-26, benchmarks/bench_onnx_quantisation.py, table in benchmarks/README.md): the
# shipped per-channel variant worst 0.0307, mean 0.0070; no dynamic-quantisation variant that kept
# most of the speed-up did better than 0.0187 worst (per-tensor scales: 0.12; reduce_range or QUInt8
# weights: 0.035). The bounds are the measurement with a margin for CPUs whose int8 kernels differ
# (without VNNI, AVX2's u8s8 products can saturate), not the issue's 1e-3; the test prints what it
# measures. Export format 2 (unpadded batches, no attention mask) measures worst 0.0238, mean 0.0067.
# Later (benchmarks/README.md, "The measured frontier"): SmoothQuant, block-wise 8-bit MatMulNBits and
# fp32 islands; int8 weights alone (per column, activations fp32) already cost 0.0021 worst, and
# nothing within 1e-3 kept the 2x speed-up, so the shipped int8 and these bounds stay.
INT8_WORST = 0.04
INT8_MEAN = 0.01


def sample_pool() -> list[str]:
    """Every question and paragraph of the bundled sample, in file order."""
    texts = [json.loads(line)["text"] for line in (SAMPLE_DATASET / "queries.jsonl").open()]
    for line in (SAMPLE_DATASET / "corpus.jsonl").open():
        texts += [part for part in json.loads(line)["text"].split("\n\n") if part.strip()]
    return texts


def sample_texts(count: int = 500) -> list[str]:
    """Questions and paragraphs of the bundled sample: short and long (past the 256-token limit).
    The first and last 250 of the pool; the texts between calibrate int8 experiments
    (benchmarks/onnx_int8_edits.py), so they are never the texts a variant is measured on."""
    texts = sample_pool()
    chosen = texts[:count // 2] + texts[-(count - count // 2):]
    assert len(chosen) == count and max(map(len, chosen)) > 2000
    return chosen


@pytest.fixture(scope="module")
def onnx_data_dir(tmp_path_factory) -> Path:
    """One data directory for the module: each precision is exported once."""
    return tmp_path_factory.mktemp("onnx-data")


@pytest.fixture(scope="module")
def torch_vectors(minilm_embed_model) -> np.ndarray:
    vectors = np.asarray(minilm_embed_model.get_text_embedding_batch(sample_texts()), dtype=np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def onnx_vectors(data_dir: Path, precision: str) -> np.ndarray:
    return MiniLMOnnxEmbedder(MiniLMOnnxParams(precision=precision), cache_dir=data_dir).embed_texts(sample_texts())


def cosine_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return 1.0 - (a * b).sum(axis=1)


@pytest.mark.slow
def test_fp32_vectors_are_the_torch_models_within_1e_5_cosine(onnx_data_dir, torch_vectors):
    distances = cosine_distances(onnx_vectors(onnx_data_dir, "fp32"), torch_vectors)
    assert distances.max() < 1e-5


@pytest.mark.slow
def test_int8_vectors_are_close_to_the_torch_models(onnx_data_dir, torch_vectors):
    distances = cosine_distances(onnx_vectors(onnx_data_dir, "int8"), torch_vectors)
    print(f"int8 cosine distance to torch on 500 texts: worst {distances.max():.5f}, mean {distances.mean():.5f}")
    assert distances.max() < INT8_WORST
    assert distances.mean() < INT8_MEAN


@pytest.mark.slow
def test_a_second_load_reuses_the_export(onnx_data_dir, monkeypatch):
    onnx_vectors(onnx_data_dir, "fp32")  # exported by the first test, or now
    monkeypatch.setattr(onnx_export, "export", lambda *args: pytest.fail("exported again"))
    vectors = MiniLMOnnxEmbedder(MiniLMOnnxParams(precision="fp32"), cache_dir=onnx_data_dir).embed_texts(["a text"])
    assert vectors.shape == (1, 384)


@pytest.mark.unit
def test_the_cache_exports_once_per_key_and_publishes_whole(tmp_path, monkeypatch):
    calls: list[str] = []

    def fake_export(folder: Path, precision: str, path: Path) -> None:
        calls.append(precision)
        path.write_bytes(b"onnx " + precision.encode())

    monkeypatch.setattr(onnx_export, "export", fake_export)
    folder = onnx_export.shipped_model_folder()
    first = onnx_export.cached_model(tmp_path, folder, "int8")
    again = onnx_export.cached_model(tmp_path, folder, "int8")
    other = onnx_export.cached_model(tmp_path, folder, "fp32")
    assert calls == ["int8", "fp32"]
    assert first == again != other and first.read_bytes() == b"onnx int8"
    # Nothing half-built is left beside the published folders.
    assert sorted(path.name for path in first.parents[1].iterdir()) == sorted([first.parent.name, other.parent.name])


@pytest.mark.unit
def test_unpadded_batches_group_equal_lengths_longest_first_within_both_limits():
    lengths = [3, 5, 3, 5, 5, 1, 3, 5, 5]
    assert unpadded_batches(lengths, 2, 100) == [[1, 3], [4, 7], [8], [0, 2], [6], [5]]
    assert unpadded_batches(lengths, 32, 100) == [[1, 3, 4, 7, 8], [0, 2, 6], [5]]
    # 10 tokens a call: two 5-token texts, three 3-token texts; a text longer than the limit goes alone.
    assert unpadded_batches(lengths, 32, 10) == [[1, 3], [4, 7], [8], [0, 2, 6], [5]]
    assert unpadded_batches([12, 12], 32, 10) == [[0], [1]]
    assert unpadded_batches([], 32, 100) == []


class RecordingSession:
    """Stands in for the ONNX Runtime session: records each batch and returns, per text, its token
    count and the sum of its token ids (so the test can tell whose vector landed where)."""

    def __init__(self) -> None:
        self.batches: list[np.ndarray] = []

    def run(self, outputs, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
        (ids,) = feeds.values()  # the graph takes input_ids only: no attention mask to build
        assert list(feeds) == ["input_ids"] and ids.dtype == np.int64
        self.batches.append(ids)
        vectors = np.zeros((len(ids), 384), dtype=np.float32)
        vectors[:, 0], vectors[:, 1] = ids.shape[1], ids.sum(axis=1)
        return [vectors]


@pytest.mark.unit
def test_encode_runs_unpadded_batches_and_returns_vectors_in_the_texts_order():
    model = object.__new__(OnnxSentenceModel)  # the tokenizer only: no export, no session
    from transformers import AutoTokenizer

    folder = onnx_export.shipped_model_folder()
    model.tokenizer = shipped_tokenizer(folder, 256)
    model.session, model.max_length, model.batch_size = RecordingSession(), 256, 16
    # Questions and paragraphs (many lengths, some past 256 tokens), and one short text 20 times.
    texts = sample_texts()[::6] + ["Is it a short question?"] * 20
    vectors = model.encode(texts)
    reference = AutoTokenizer.from_pretrained(str(folder))  # what sentence-transformers tokenizes with
    pad = reference.pad_token_id
    assert all(len(batch) <= 16 and not (batch == pad).any() for batch in model.session.batches)
    assert all(batch.size <= MAX_BATCH_TOKENS for batch in model.session.batches)
    assert max(len(batch) for batch in model.session.batches) == 16  # short texts still fill a batch
    expected = reference(texts, truncation=True, max_length=256)["input_ids"]
    assert max(map(len, expected)) == 256
    assert vectors[:, 0].tolist() == [len(ids) for ids in expected]
    assert vectors[:, 1].tolist() == [sum(ids) for ids in expected]
    assert model.encode([]).shape == (0, 384)


@pytest.mark.unit
def test_idle_encoder_threads_sleep_instead_of_spinning():
    # Spinning threads burn CPU that the run's other work and other processes need on a loaded machine.
    options = session_options(threads=3)
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    assert options.intra_op_num_threads == 3


@pytest.mark.unit
def test_building_the_embedder_loads_nothing(monkeypatch):
    monkeypatch.setattr(onnx_export, "cached_model", lambda *args: pytest.fail("loaded at build"))
    embedder = embedders.build(embedders.resolve({"type": "minilm-onnx", "params": {"precision": "fp32"}}))
    assert isinstance(embedder, MiniLMOnnxEmbedder) and embedder._model is None


@pytest.mark.unit
def test_its_identity_differs_from_minilm_and_by_precision():
    keys = {embedders.build(embedders.resolve(spec)).spec_key() for spec in (
        "minilm", {"type": "minilm-onnx", "params": {"precision": "fp32"}},
        {"type": "minilm-onnx", "params": {"precision": "int8"}})}
    assert len(keys) == 3


@pytest.mark.unit
def test_a_grid_can_name_it_and_a_bad_precision_lists_the_choices():
    base = {"name": "t", "dataset": {"path": "/data/x"}}
    grid = expand_grid(config_from_dict({**base, "embedders": ["minilm", {"type": "minilm-onnx"}]}))
    assert sorted(point.embedder.type for point in grid) == ["minilm", "minilm-onnx"]
    with pytest.raises(ConfigError, match=r"'precision': Input should be 'fp32' or 'int8' \(got 'int4'\)"):
        config_from_dict({**base, "embedders": [{"type": "minilm-onnx", "params": {"precision": "int4"}}]})
    with pytest.raises(ConfigError, match="minilm-onnx"):
        config_from_dict({**base, "embedders": ["minilm-onnz"]})


@pytest.mark.unit
def test_without_onnxruntime_the_error_is_one_line_naming_the_extra(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # what an import of a missing package does
    with pytest.raises(ConfigError, match=r"pip install 'ragkit\[onnx\]'"):
        MiniLMOnnxEmbedder(MiniLMOnnxParams(), cache_dir=tmp_path).embed_texts(["a text"])


@pytest.mark.slow
def test_the_quantisation_benchmark_names_nodes_the_export_has(onnx_data_dir):
    # quantize_dynamic ignores an unknown name in nodes_to_exclude: a renamed node would make a
    # "kept fp32" variant of benchmarks/bench_onnx_quantisation.py silently the shipped one.
    import onnx

    from benchmarks.bench_onnx_quantisation import matmuls

    fp32 = onnx_export.cached_model(onnx_data_dir, onnx_export.shipped_model_folder(), "fp32")
    nodes = {node.name for node in onnx.load(str(fp32)).graph.node if node.op_type == "MatMul"}
    named = [name for part in ("qkv", "attention-output", "ffn-up", "ffn-down") for name in matmuls(part)]
    assert len(named) == 36 and set(named) <= nodes
