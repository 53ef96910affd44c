"""The GUI's parameter vocabulary, mirrored from ``lbi_engine.api.InversionRequest``.

Why a mirror: the window must appear before torch (and so ``lbi_engine.api``) is imported,
yet every panel needs the defaults and the choice lists at construction time. The engine
stays the authority: requests are validated by ``InversionRequest.from_dict`` in the worker,
and the test-suite checks that these defaults equal the engine's.
"""

from __future__ import annotations

import copy
from typing import Any

#: Field names and defaults of ``InversionRequest`` (the GUI runs one solver thread: threads=1).
DEFAULT_REQUEST: dict[str, Any] = {
    "network": "mnist-cnn-ae",
    "input_shape": None,
    "dataset": "mnist",
    "split": "val",
    "index": 0,
    "image": None,
    "truth": None,
    "data": None,
    "resize": False,
    "noise_std": 0.05,
    "seed": 0,
    "alpha": 9e-3,
    "regulariser": "tv",
    "method": "joint",
    "steps": "auto",
    "max_iter": 1500,
    "tol": 1e-5,
    "tol_mode": "relative",
    "time_budget": None,
    "device": "cpu",
    "dtype": "float32",
    "report_every": 10,
    "threads": 1,
    "layer_alphas": None,
    "allow_pickle": False,
    "options": {},
}

#: (engine name, label shown to the user)
METHODS: list[tuple[str, str]] = [
    ("joint", "Joint (coordinate descent)"),
    ("layerwise", "Layer-wise (sequential)"),
    ("pdhg", "PDHG (one layer)"),
    ("landweber", "Landweber (discrepancy)"),
    ("backprop", "Backprop baseline (Adam)"),
]
METHOD_LABELS = dict(METHODS)

REGULARISERS: list[tuple[str, str]] = [
    ("tv", "Total variation (isotropic)"),
    ("tv-aniso", "Total variation (anisotropic)"),
    ("tikhonov", "Tikhonov ‖x‖²"),
    ("gradient-tikhonov", "Gradient Tikhonov ‖∇x‖²"),
    ("l1", "ℓ¹ (sparsity)"),
    ("nonneg", "Non-negativity"),
    ("box", "Box [0, 1]"),
    ("none", "None"),
]

STEP_MODES: list[tuple[str, str]] = [
    ("auto", "Auto (fastest provably convergent)"),
    ("balanced", "Balanced (larger dual step)"),
    ("safe", "Safe (τₓ = 1/‖W‖²)"),
    ("conservative", "Conservative (τ_z = 1/(8α))"),
    ("paper", "Paper (τ = 1.99/‖W‖², may oscillate)"),
]

#: Parameters whose change while a run is going restarts it warm from the current iterate.
HOT_KEYS = frozenset({"alpha", "regulariser", "method", "layer_alphas", "noise_std", "seed",
                      "steps"})
#: Parameters that change the problem itself (network or data); a running solve is stopped.
PROBLEM_KEYS = frozenset({"network", "input_shape", "dataset", "split", "index", "image",
                          "truth", "data", "resize", "allow_pickle", "device", "dtype"})

#: Network suffixes the Open… dialog and drag-and-drop accept.
NETWORK_SUFFIXES = (".pt", ".pth", ".ts", ".torchscript", ".onnx", ".safetensors", ".json",
                    ".bin", ".ckpt")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".tif", ".tiff", ".pgm", ".npy", ".npz")
SESSION_SUFFIX = ".lbisession"


def default_request(**overrides: Any) -> dict[str, Any]:
    """A fresh copy of the defaults with ``overrides`` applied (unknown keys are refused)."""
    req = copy.deepcopy(DEFAULT_REQUEST)
    for key, value in overrides.items():
        if key not in req:
            raise KeyError(f"unknown request field {key!r}")
        req[key] = value
    return req


def describe_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """A short human description of what changed between two requests ("α 0.009→0.02")."""
    parts = []
    for key in sorted(HOT_KEYS | PROBLEM_KEYS):
        if old.get(key) != new.get(key):
            a, b = old.get(key), new.get(key)
            name = {"alpha": "α", "noise_std": "noise"}.get(key, key)
            if isinstance(a, float) and isinstance(b, float):
                parts.append(f"{name} {a:.3g}→{b:.3g}")
            else:
                parts.append(f"{name} {a}→{b}")
    return ", ".join(parts)
