"""Graph edits for int8 variants that `quantize_dynamic`'s options cannot express (issue 32 #3,
benchmarks/bench_onnx_quantisation.py): SmoothQuant-style scale migration, ONNX Runtime's
block-wise 8-bit `MatMulNBits`, and two diagnostics that quantise only the weights or only the
activations in an otherwise fp32 graph (to tell which side the int8 error comes from).

Each takes the fp32 export and writes a new file; none is used by `minilm-onnx` itself. Written here
rather than taken from a library: onnxruntime's SmoothQuant needs neural-compressor and its
`MatMulNBitsQuantizer` needs onnx_ir, neither installed; the kernels they call are ONNX Runtime's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def calibration_texts() -> list[str]:
    """Shipped text that is not among the test's 500: the bundled covidqa sample's texts between the
    test's first and last 250, and the multi-turn sample's paragraphs."""
    from tests.embedders.test_onnx_minilm import sample_pool

    texts = sample_pool()[250:-250]
    for line in (ROOT / "datasets" / "multiturn_sample" / "corpus.jsonl").open():
        texts += [part for part in json.loads(line)["text"].split("\n\n") if part.strip()]
    return texts


def _weight_matmuls(model) -> list:
    weights = {tensor.name for tensor in model.graph.initializer}
    return [node for node in model.graph.node if node.op_type == "MatMul" and node.input[1] in weights]


def activation_ranges(fp32: Path, folder: Path, texts: Sequence[str]) -> dict[str, np.ndarray]:
    """Per weight-MatMul input: each channel's largest |value| over ``texts`` (one text per call)."""
    import onnx
    import onnxruntime
    from transformers import AutoTokenizer

    model = onnx.load(str(fp32))
    names = sorted({node.input[0] for node in _weight_matmuls(model)})
    model.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None)
                              for name in names)
    session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    ranges: dict[str, np.ndarray] = {}
    for text in texts:
        ids = np.array([tokenizer(text, truncation=True, max_length=256)["input_ids"]], dtype=np.int64)
        for name, values in zip(names, session.run(names, {"input_ids": ids})):
            peak = np.abs(values).reshape(-1, values.shape[-1]).max(axis=0)
            ranges[name] = np.maximum(ranges.get(name, peak), peak)
    return ranges


def smooth(fp32: Path, target: Path, ranges: dict[str, np.ndarray], alpha: float, nodes: Sequence[str]) -> Path:
    """SmoothQuant (Xiao et al. 2023): divide each named MatMul's input channel j by
    s_j = max|x_j|^alpha / max|w_j|^(1 - alpha) (an inserted Mul, shared by MatMuls with one input)
    and multiply weight row j by s_j, so the product is unchanged and the activation outliers
    move into the weights, which are quantised per column."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(fp32))
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    groups: dict[str, list] = {}
    for node in _weight_matmuls(model):
        if node.name in nodes:
            groups.setdefault(node.input[0], []).append(node)
    for source, matmuls in groups.items():
        arrays = [numpy_helper.to_array(weights[node.input[1]]) for node in matmuls]
        weight_peak = np.max([np.abs(array).max(axis=1) for array in arrays], axis=0)
        scale = ranges[source] ** alpha / np.maximum(weight_peak, 1e-5) ** (1 - alpha)
        scale = np.maximum(scale, 1e-5)
        scale = (scale / np.median(scale)).astype(np.float32)  # keeps magnitudes near the original
        inverse = numpy_helper.from_array(1 / scale, f"{source}_smooth_inverse")
        model.graph.initializer.append(inverse)
        first = min(list(model.graph.node).index(node) for node in matmuls)
        model.graph.node.insert(first, onnx.helper.make_node(
            "Mul", [source, inverse.name], [f"{source}_smoothed"], name=f"{source}_smooth"))
        for node, array in zip(matmuls, arrays):
            node.input[0] = f"{source}_smoothed"
            weights[node.input[1]].CopyFrom(numpy_helper.from_array((array * scale[:, None]).astype(np.float32),
                                                                    node.input[1]))
    onnx.save(model, str(target))
    return target


def block_int8(fp32: Path, target: Path, block: int, accuracy_level: int) -> Path:
    """Every weight MatMul as `MatMulNBits` (8 bits, symmetric, one scale per ``block`` rows of a
    column); ``accuracy_level`` 4 computes in int8 (activations quantised per block too), 0 in fp32."""
    import onnx
    from onnx import numpy_helper
    from onnxruntime.capi._pybind_state import quantize_matmul_8bits

    model = onnx.load(str(fp32))
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    edited = []
    for node in model.graph.node:
        if node.op_type != "MatMul" or node.input[1] not in weights:
            edited.append(node)
            continue
        array = np.ascontiguousarray(numpy_helper.to_array(weights[node.input[1]]), dtype=np.float32)
        rows, cols = array.shape
        blocks = -(-rows // block)
        packed = np.zeros((cols, blocks, block), dtype=np.uint8)
        scales = np.zeros((cols, blocks), dtype=np.float32)
        quantize_matmul_8bits(packed, array, scales, np.zeros((cols, blocks), dtype=np.uint8), block, cols, rows, True)
        names = [f"{node.input[1]}_q8", f"{node.input[1]}_scales"]
        model.graph.initializer.extend([numpy_helper.from_array(packed, names[0]),
                                        numpy_helper.from_array(scales, names[1])])
        attributes: dict[str, int] = {"K": rows, "N": cols, "bits": 8, "block_size": block}
        if accuracy_level:  # 0 (fp32 compute) is the kernel's default: leave the attribute out
            attributes["accuracy_level"] = accuracy_level
        quantised = onnx.helper.make_node("MatMulNBits", [node.input[0], *names], list(node.output),
                                          name=f"{node.name}_q8", domain="com.microsoft")
        quantised.attribute.extend(onnx.helper.make_attribute(key, value) for key, value in attributes.items())
        edited.append(quantised)
    del model.graph.node[:]
    model.graph.node.extend(edited)
    model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    used = {name for node in model.graph.node for name in node.input}
    kept = [tensor for tensor in model.graph.initializer if tensor.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    onnx.save(model, str(target))
    return target


def weights_only(fp32: Path, target: Path, nodes: Sequence[str]) -> Path:
    """Diagnostic: the named MatMuls' weights rounded to int8 per column (symmetric, as
    `quantize_dynamic(per_channel=True)` does) and computed in fp32; activations untouched."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(fp32))
    weights = {tensor.name: tensor for tensor in model.graph.initializer}
    for node in _weight_matmuls(model):
        if node.name in nodes:
            array = numpy_helper.to_array(weights[node.input[1]])
            step = np.abs(array).max(axis=0, keepdims=True) / 127
            weights[node.input[1]].CopyFrom(numpy_helper.from_array(
                (np.round(array / step) * step).astype(np.float32), node.input[1]))
    onnx.save(model, str(target))
    return target


def activations_only(fp32: Path, target: Path) -> Path:
    """Diagnostic: every weight MatMul's input through DynamicQuantizeLinear and back (uint8, one
    range per tensor, as `quantize_dynamic` does at run time); weights fp32."""
    import onnx

    model = onnx.load(str(fp32))
    matmuls = {node.name for node in _weight_matmuls(model)}
    edited, done = [], set()
    for node in model.graph.node:
        source = node.input[0] if node.name in matmuls else None
        if source is not None and source not in done:
            done.add(source)
            parts = [f"{source}_q", f"{source}_scale", f"{source}_zero"]
            edited += [onnx.helper.make_node("DynamicQuantizeLinear", [source], parts, name=f"{source}_quantise"),
                       onnx.helper.make_node("DequantizeLinear", parts, [f"{source}_fake"], name=f"{source}_back")]
        if source is not None:
            node.input[0] = f"{source}_fake"
        edited.append(node)
    del model.graph.node[:]
    model.graph.node.extend(edited)
    onnx.save(model, str(target))
    return target
