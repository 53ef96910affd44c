"""The GUI's parameter vocabulary, mirrored from ``lbi_engine.api.InversionRequest``
(the defaults come from the torch-free ``lbi_engine.request_defaults``).

Why a mirror: the window must appear before torch (and so ``lbi_engine.api``) is imported,
yet every panel needs the defaults and the choice lists at construction time. The engine
stays the authority: requests are validated by ``InversionRequest.from_dict`` in the worker,
and the test-suite checks that these defaults equal the engine's.
"""

from __future__ import annotations

import copy
import math
from typing import Any

from lbi_engine._record_types import hint_name, json_type_ok
from lbi_engine.request_defaults import REQUEST_DEFAULTS

#: Field names and defaults of ``InversionRequest`` (the GUI runs one solver thread: threads=1).
DEFAULT_REQUEST: dict[str, Any] = {**copy.deepcopy(REQUEST_DEFAULTS), "threads": 1}

#: The annotations of ``InversionRequest`` (a test checks they equal the engine's), so a
#: session's request can be type-checked on the GUI thread without importing torch.
REQUEST_TYPES: dict[str, Any] = {
    "network": str, "input_shape": tuple[int, ...] | None, "dataset": str, "split": str,
    "index": int, "image": str | None, "truth": str | None, "data": str | None,
    "resize": bool, "noise_std": float, "seed": int, "alpha": float | str,
    "alpha_rule": str, "noise_level": float | None, "regulariser": str,
    "method": str, "steps": str, "max_iter": int, "tol": float, "tol_mode": str,
    "time_budget": float | None, "device": str, "dtype": str, "report_every": int,
    "threads": int | None, "layer_alphas": list[float] | None, "allow_pickle": bool,
    "options": dict[str, Any], "feature_prior": str | None,
}

#: (engine name, label shown to the user)
METHODS: list[tuple[str, str]] = [
    ("auto", "Auto (one-layer/joint)"),
    ("joint", "Joint (all layers)"),
    ("layerwise", "Layer-wise (learned prior)"),
    ("one-layer", "One layer (accelerated)"),
    ("pdhg", "PDHG (alias of one layer)"),
    ("landweber", "Landweber (discrepancy)"),
    ("backprop", "Backprop baseline (Adam)"),
]
METHOD_LABELS = dict(METHODS)
#: Methods that need a file beside the network: layer-wise inversion of several layers needs a
#: learned feature prior (shipped for the zoo's CNN; ``lbi feature-prior`` for others).
PRIOR_METHODS = frozenset({"layerwise"})


def feature_prior_available(network: str, feature_prior: str | None) -> bool:
    """Whether layer-wise inversion has a feature prior for ``network``, checked from the files
    alone (the GUI process never imports torch): a chosen prior, or the zoo's shipped one."""
    from pathlib import Path

    from lbi_engine.resource_files import resources_dir

    if feature_prior:  # NAME, NAME.json or NAME.safetensors: both files must exist
        text = str(feature_prior).removesuffix(".safetensors").removesuffix(".json")
        return all(Path(f"{text}.{ext}").is_file() for ext in ("json", "safetensors"))
    models = resources_dir() / "models"
    return all((models / f"{network}.prior.{ext}").is_file() for ext in ("json", "safetensors"))

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
    ("accelerated", "Accelerated (FISTA, TV prox)"),
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
NETWORK_SUFFIXES = (".pt", ".pth", ".pt2", ".ts", ".torchscript", ".onnx", ".safetensors", ".json",
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


def request_problems(request: dict[str, Any]) -> list[str]:
    """What is wrong with a request's values ([] = fine), checked before any widget shows them.

    Why here and not only in the worker: the panels convert values as they display them
    (``float("abc")`` raises half-way through filling them), so a hand-edited or damaged
    session must be refused before the window changes anything. The engine's
    ``InversionRequest.validate`` stays the authority on everything else.
    """
    problems = [f"{k}={v!r} (expected {hint_name(REQUEST_TYPES[k])})"
                for k, v in request.items()
                if k in REQUEST_TYPES and not json_type_ok(v, REQUEST_TYPES[k])]
    if problems:
        return problems

    if isinstance(request.get("alpha"), str) and request["alpha"] != "auto":
        return [f"alpha={request['alpha']!r} (must be 'auto' or a finite number > 0)"]

    def finite(key: str) -> bool:
        v = request.get(key)
        return v is None or v == "auto" or math.isfinite(float(v))

    alpha = request.get("alpha", 1.0)
    checks = [
        ("alpha", finite("alpha") and (alpha == "auto" or float(alpha) >= 0),
         "'auto' or a finite number > 0"),
        ("noise_std", finite("noise_std") and float(request.get("noise_std", 0.0)) >= 0,
         "a finite number >= 0"),
        ("tol", finite("tol") and float(request.get("tol", 0.0)) >= 0, "a finite number >= 0"),
        ("time_budget", finite("time_budget") and (request.get("time_budget") is None
                                                   or float(request["time_budget"]) > 0),
         "empty or a number of seconds > 0"),
        ("index", int(request.get("index", 0)) >= 0, "an integer >= 0"),
        ("max_iter", 1 <= int(request.get("max_iter", 1)) <= 10_000_000,
         "between 1 and 10,000,000"),
        ("report_every", int(request.get("report_every", 1)) >= 1, "at least 1"),
        ("threads", request.get("threads") is None or 1 <= int(request["threads"]) <= 256,
         "between 1 and 256"),
        ("input_shape", request.get("input_shape") is None
         or (len(request["input_shape"]) > 0 and all(int(s) > 0 for s in request["input_shape"])),
         "positive sizes such as [1, 28, 28]"),
        ("layer_alphas", request.get("layer_alphas") is None
         or all(math.isfinite(float(a)) and float(a) >= 0 for a in request["layer_alphas"]),
         "finite numbers >= 0"),
        ("method", request.get("method", "joint") in METHOD_LABELS,
         f"one of {', '.join(METHOD_LABELS)}"),
        ("steps", request.get("steps", "auto") in dict(STEP_MODES),
         f"one of {', '.join(dict(STEP_MODES))}"),
    ]
    return [f"{key}={request.get(key)!r} (must be {what})" for key, ok, what in checks if not ok]


#: Parameters whose change makes a result on screen stale (not: threads, device, updates).
STALE_KEYS = frozenset((HOT_KEYS | PROBLEM_KEYS | {"max_iter", "tol", "tol_mode",
                                                   "time_budget"}) - {"device", "allow_pickle"})


def _norm(v: Any) -> Any:
    """Values as a request stores them: tuples as lists, whole floats equal to ints."""
    if isinstance(v, (list, tuple)):
        return [_norm(x) for x in v]
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def describe_change(old: dict[str, Any], new: dict[str, Any],
                    keys: frozenset[str] | None = None) -> str:
    """A short human description of what changed between two requests ("α 0.009→0.02")."""
    parts = []
    for key in sorted(keys if keys is not None else HOT_KEYS | PROBLEM_KEYS):
        if _norm(old.get(key)) != _norm(new.get(key)):
            a, b = old.get(key), new.get(key)
            name = {"alpha": "α", "noise_std": "noise"}.get(key, key)
            if isinstance(a, float) and isinstance(b, float):
                parts.append(f"{name} {a:.3g}→{b:.3g}")
            else:
                parts.append(f"{name} {a}→{b}")
    return ", ".join(parts)
