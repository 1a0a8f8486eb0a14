"""The graph edits behind benchmarks/bench_onnx_quantisation.py's int8 variants, on a two-MatMul
graph: SmoothQuant keeps the product and flattens the input's channels, the diagnostics round what
they say, and the block-wise file runs in ONNX Runtime."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from benchmarks import onnx_int8_edits as edits

pytestmark = pytest.mark.unit

RNG = np.random.default_rng(7)
W1 = RNG.normal(size=(64, 8)).astype(np.float32)
W2 = RNG.normal(size=(64, 16)).astype(np.float32)


def two_matmuls(path: Path) -> Path:
    """x (n x 64) -> x @ W1 and x @ W2: two weight MatMuls sharing one input, as Q, K and V do."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w1"], ["y1"], name="first/MatMul"),
         helper.make_node("MatMul", ["x", "w2"], ["y2"], name="second/MatMul")],
        "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 64])],
        [helper.make_tensor_value_info("y1", TensorProto.FLOAT, ["n", 8]),
         helper.make_tensor_value_info("y2", TensorProto.FLOAT, ["n", 16])],
        [numpy_helper.from_array(W1, "w1"), numpy_helper.from_array(W2, "w2")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    return path


def inputs() -> np.ndarray:
    # Its own generator: drawn from the shared one, the values would depend on the tests' order.
    x = np.random.default_rng(11).normal(size=(20, 64)).astype(np.float32)
    x[:, 5] *= 40  # one outlier channel, as MiniLM's LayerNorm outputs have
    return x


def run(path: Path, x: np.ndarray, outputs: list[str] | None = None) -> list[np.ndarray]:
    """The graph's outputs for ``x``, or the named tensors (made outputs for this run)."""
    import onnx
    import onnxruntime

    model = onnx.load(str(path))
    known = {output.name for output in model.graph.output}
    model.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
                              for name in outputs or [] if name not in known)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(outputs, {"x": x})


def test_smoothing_keeps_the_product_and_moves_the_outlier_into_the_weights(tmp_path):
    x = inputs()
    fp32 = two_matmuls(tmp_path / "fp32.onnx")
    ranges = {"x": np.abs(x).max(axis=0)}
    smoothed = edits.smooth(fp32, tmp_path / "smoothed.onnx", ranges, 0.8, ["first/MatMul", "second/MatMul"])
    before, after = run(fp32, x), run(smoothed, x)
    for expected, got in zip(before, after):
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    # One Mul feeds both MatMuls, and the channel that was over 20x the others is now within 3x of them
    # (alpha 0.8 leaves it 40^0.2, about 2.1x, times the weights' share).
    (scaled,) = run(smoothed, x, ["x_smoothed"])
    peaks = np.abs(scaled).max(axis=0)
    assert peaks[5] < 3 * np.median(peaks) and np.abs(x).max(axis=0)[5] > 20 * np.median(np.abs(x).max(axis=0))


def test_smoothing_only_the_named_matmuls(tmp_path):
    import onnx

    fp32 = two_matmuls(tmp_path / "fp32.onnx")
    smoothed = edits.smooth(fp32, tmp_path / "smoothed.onnx", {"x": np.abs(inputs()).max(axis=0)}, 0.5,
                            ["first/MatMul"])
    feeds = {node.name: node.input[0] for node in onnx.load(str(smoothed)).graph.node if node.op_type == "MatMul"}
    assert feeds == {"first/MatMul": "x_smoothed", "second/MatMul": "x"}


def test_weights_only_rounds_each_column_to_255_levels(tmp_path):
    import onnx
    from onnx import numpy_helper

    rounded = edits.weights_only(two_matmuls(tmp_path / "fp32.onnx"), tmp_path / "w.onnx", ["first/MatMul"])
    weights = {tensor.name: numpy_helper.to_array(tensor) for tensor in onnx.load(str(rounded)).graph.initializer}
    step = np.abs(W1).max(axis=0) / 127
    np.testing.assert_allclose(weights["w1"] / step, np.round(W1 / step), atol=1e-3)
    assert not np.allclose(weights["w1"], W1, atol=1e-6)
    np.testing.assert_array_equal(weights["w2"], W2)  # not named: untouched


def test_activations_only_rounds_the_shared_input_once_to_uint8_steps(tmp_path):
    x = inputs()
    fake = edits.activations_only(two_matmuls(tmp_path / "fp32.onnx"), tmp_path / "a.onnx")
    (rounded,) = run(fake, x, ["x_fake"])
    step = (max(x.max(), 0) - min(x.min(), 0)) / 255
    assert 0 < np.abs(rounded - x).max() <= step / 2 + 1e-5
    np.testing.assert_allclose(run(fake, x, ["y1"])[0], rounded @ W1, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("accuracy_level", [0, 4])  # fp32 compute (the default), int8 compute
def test_block_int8_runs_as_matmulnbits_close_to_fp32(tmp_path, accuracy_level):
    import onnx

    x = inputs()
    fp32 = two_matmuls(tmp_path / "fp32.onnx")
    block = edits.block_int8(fp32, tmp_path / "b.onnx", 32, accuracy_level)
    nodes = onnx.load(str(block)).graph.node
    assert [node.op_type for node in nodes] == ["MatMulNBits", "MatMulNBits"]
    levels = {attribute.i for node in nodes for attribute in node.attribute if attribute.name == "accuracy_level"}
    assert levels == ({accuracy_level} if accuracy_level else set())
    for expected, got in zip(run(fp32, x), run(block, x)):
        cosine = (expected * got).sum() / np.linalg.norm(expected) / np.linalg.norm(got)
        # int8 compute also rounds the activations (per block), so its bound is looser
        assert 1 - cosine < (1e-3 if accuracy_level else 1e-4) and not np.array_equal(expected, got)
