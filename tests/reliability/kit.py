"""Small, known-good network files of every supported format (built here, not from the zoo).

Why our own: the bad-input corpus corrupts good files of each format (truncate, relabel,
poison a weight), and the reliability tests must not depend on the bundled zoo's contents.
Every network is the same function x (1, 28, 28) -> ReLU(W flatten(x) + b) with 32 outputs,
so every file works with the bundled MNIST samples.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

N_OUT = 32
TINY_LAYERS: list[dict[str, Any]] = [
    {"type": "Flatten", "start_dim": 1, "end_dim": -1},
    {"type": "Linear", "in_features": 784, "out_features": N_OUT, "bias": True},
    {"type": "ReLU"},
]


def tiny_module(seed: int = 0) -> nn.Sequential:
    """The reference network (eval mode, no gradients)."""
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(784, N_OUT), nn.ReLU()).eval()


def write_card(path: Path, layers: list[dict[str, Any]] | None = None,
               input_shape: list[int] | None = None, **extra: Any) -> Path:
    """A model card (architecture + input shape) as the zoo writes them."""
    card = {"name": path.stem, "format_version": 1,
            "input_shape": input_shape or [1, 28, 28],
            "architecture": {"layers": layers or TINY_LAYERS,
                             "encoder_layers": len(layers or TINY_LAYERS)}, **extra}
    path.write_text(json.dumps(card), encoding="utf-8")
    return path


def onnx_model(nodes: list[Any], inits: list[Any], out_rank: int = 2) -> Any:
    """An ONNX chain from input x (N, 1, 28, 28) built with onnx.helper (no exporter)."""
    import onnx
    from onnx import TensorProto, helper

    out_shape = ["N"] + [f"d{i}" for i in range(1, out_rank)]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 28, 28])],
        [helper.make_tensor_value_info(nodes[-1].output[0], TensorProto.FLOAT, out_shape)],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def tiny_onnx(module: nn.Sequential) -> Any:
    from onnx import helper, numpy_helper

    lin = module[1]
    inits = [numpy_helper.from_array(lin.weight.detach().numpy().astype(np.float32), "W"),
             numpy_helper.from_array(lin.bias.detach().numpy().astype(np.float32), "B")]
    nodes = [helper.make_node("Flatten", ["x"], ["f"], name="flat", axis=1),
             helper.make_node("Gemm", ["f", "W", "B"], ["g"], name="fc", transB=1),
             helper.make_node("Relu", ["g"], ["y"], name="act")]
    return onnx_model(nodes, inits)


@dataclass
class Kit:
    """Paths of good files: a seeded card, TorchScript, ONNX, state dict / safetensors + card."""

    folder: Path
    card: Path  # seeded-init card (no weights file)
    torchscript: Path
    onnx: Path
    state_dict: Path  # state.pt + state.json
    safetensors: Path  # weights.safetensors + weights.json
    flat_card: Path  # a flat, non-square input (10,) -> Linear(10, 5) -> ReLU

    def base_request(self, **overrides: Any) -> dict[str, Any]:
        """A valid, fast request on the tiny network (5 iterations of the joint method)."""
        req: dict[str, Any] = {
            "network": str(self.card), "dataset": "mnist", "split": "val", "index": 0,
            "noise_std": 0.01, "seed": 0, "alpha": 1e-2, "regulariser": "tv",
            "method": "joint", "max_iter": 5, "report_every": 1, "threads": 1,
        }
        req.update(overrides)
        return req


def build_kit(folder: Path) -> Kit:
    """Write every good file into ``folder``."""
    import onnx
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    module = tiny_module()
    card = write_card(folder / "tiny.json", weights={"source": "seeded-init", "seed": 0})
    ts = folder / "tiny_ts.pt"
    torch.jit.script(module).save(str(ts))
    onnx_path = folder / "tiny.onnx"
    onnx.save(tiny_onnx(module), str(onnx_path))
    state = folder / "state.pt"
    torch.save(module.state_dict(), state)
    write_card(folder / "state.json")
    st = folder / "weights.safetensors"
    save_file({k: v.contiguous() for k, v in module.state_dict().items()}, str(st))
    write_card(folder / "weights.json")
    flat = write_card(folder / "flat.json",
                      layers=[{"type": "Linear", "in_features": 10, "out_features": 5},
                              {"type": "ReLU"}],
                      input_shape=[10], weights={"source": "seeded-init", "seed": 1})
    return Kit(folder, card, ts, onnx_path, state, st, flat)
