"""Small ONNX graphs and cards whose lifting would cost far more than their size.

Each is built with ``onnx.helper`` (no exporter) on the kit's (1, 28, 28) input, a few KB on
disk: Fibonacci residual additions (fib(levels) terms if sums were concatenated), a channel
concatenation of thousands of branches, a deep residual ladder under the node bound, and a
card of thousands of layers.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np


def _save(path: Path, nodes: list[Any], inits: list[Any], out_shape: list[Any]) -> Path:
    import onnx

    from tests.reliability.kit import onnx_model

    model = onnx_model(nodes, inits, out_rank=len(out_shape))
    onnx.save(model, str(path))
    return path


def fibonacci_adds(path: Path, levels: int) -> Path:
    """v_k = v_{k-1} + v_{k-2}: two different sums over the same states at every level."""
    from onnx import helper

    nodes = [helper.make_node("Relu", ["x"], ["v0"], name="r0"),
             helper.make_node("Relu", ["v0"], ["v1"], name="r1")]
    for k in range(2, levels + 2):
        nodes.append(helper.make_node("Add", [f"v{k - 1}", f"v{k - 2}"], [f"v{k}"],
                                      name=f"add{k}"))
    nodes.append(helper.make_node("Relu", [f"v{levels + 1}"], ["y"], name="out"))
    return _save(path, nodes, [], ["N", 1, 28, 28])


def wide_concat(path: Path, branches: int) -> Path:
    """``branches`` one-channel Relu branches of the input, concatenated along channels."""
    from onnx import helper

    nodes = [helper.make_node("Relu", ["x"], [f"b{k}"], name=f"r{k}") for k in range(branches)]
    nodes.append(helper.make_node("Concat", [f"b{k}" for k in range(branches)], ["c"],
                                  name="cat", axis=1))
    nodes.append(helper.make_node("Relu", ["c"], ["y"], name="out"))
    return _save(path, nodes, [], ["N", branches, 28, 28])


def residual_ladder(path: Path, blocks: int) -> Path:
    """``blocks`` residual blocks v = Relu(Mul(v, 0.5) + v) (3 nodes each)."""
    from onnx import helper, numpy_helper

    half = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")
    nodes = [helper.make_node("Relu", ["x"], ["v0"], name="r0")]
    for k in range(1, blocks + 1):
        nodes += [helper.make_node("Mul", [f"v{k - 1}", "half"], [f"m{k}"], name=f"mul{k}"),
                  helper.make_node("Add", [f"m{k}", f"v{k - 1}"], [f"a{k}"], name=f"add{k}"),
                  helper.make_node("Relu", [f"a{k}"], [f"v{k}"], name=f"relu{k}")]
    return _save(path, nodes, [half], ["N", 1, 28, 28])


def deep_card(path: Path, layers: int) -> Path:
    """A card of ``layers`` tiny ReLU layers after a Flatten (a few bytes each)."""
    arch = [{"type": "Flatten"}] + [{"type": "ReLU"}] * layers
    path.write_text(json.dumps({
        "name": path.stem, "format_version": 1, "input_shape": [1, 28, 28],
        "architecture": {"layers": arch, "encoder_layers": len(arch)},
        "weights": {"source": "seeded-init", "seed": 0}}))
    return path


def pool_onnx(path: Path, shape: tuple[int, int, int], kernel: int, stride: int) -> Path:
    """Relu then MaxPool(kernel, stride) on (C, H, W) samples: the pool's output is small, its
    exact ReLU rewrite (lifted units, selection weights) is not."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MaxPool", ["r"], ["y"], name="pool",
                              kernel_shape=[kernel, kernel], strides=[stride, stride])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", *shape])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", shape[0], "h", "w"])], [])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return path


def pool_card(path: Path, shape: tuple[int, int, int], kernel: int, stride: int) -> Path:
    """The same as a card of a few hundred bytes."""
    arch = [{"type": "ReLU"}, {"type": "MaxPool2d", "kernel_size": kernel, "stride": stride}]
    path.write_text(json.dumps({
        "name": path.stem, "format_version": 1, "input_shape": list(shape),
        "architecture": {"layers": arch, "encoder_layers": 2},
        "weights": {"source": "seeded-init", "seed": 0}}))
    return path
