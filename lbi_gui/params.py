"""The GUI's parameter vocabulary: the run record's fields as the panels hold them, with the
labels, groups and file suffixes only the window needs.

The schema is the engine's own :class:`lbi_engine.request.InversionRequest`, importable
without torch, so the window builds its defaults and checks a session's values
with it before torch is loaded: no second copy of the fields, types or checks lives here.
What stays here is presentation (labels and order of the choices, which parameters restart a
run), checked against the engine's names by tests/gui/test_request_checks.py.
"""

from __future__ import annotations

import copy
import typing
from typing import Any

from lbi_engine.errors import InputError
from lbi_engine.request import InversionRequest
from lbi_engine.settings.record_types import hint_name, json_type_ok


def request_fields(request: InversionRequest) -> dict[str, Any]:
    """The fields of a request as the GUI (and the run record's JSON) holds them."""
    data = request.to_dict()
    del data["format_version"], data["kind"]
    return data


#: Field names and defaults of ``InversionRequest`` (the GUI runs one solver thread: threads=1).
DEFAULT_REQUEST: dict[str, Any] = request_fields(InversionRequest(threads=1))

#: The annotations of ``InversionRequest``, to type-check a session's request on the GUI thread.
REQUEST_TYPES: dict[str, Any] = typing.get_type_hints(InversionRequest)

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

    if feature_prior:  # NAME, NAME.json or NAME.safetensors: both files must exist
        text = prior_base(feature_prior)
        return all(Path(f"{text}.{ext}").is_file() for ext in ("json", "safetensors"))
    return shipped_feature_prior(network)


def shipped_feature_prior(network: str) -> bool:
    """Whether the zoo ships a feature prior beside ``network``'s weights (files only)."""
    from pathlib import Path

    from lbi_engine.data.resource_files import resources_dir

    if not network or Path(network).name != network:
        return False  # a file of the user's: the engine looks for shipped priors in the zoo only
    models = resources_dir() / "models"
    return all((models / f"{network}.prior.{ext}").is_file() for ext in ("json", "safetensors"))


#: What to do about a feature prior that is missing or is not one.
FIT_PRIOR_HINT = "fit one with: lbi feature-prior NET --samples clean.npy --out P"


def prior_base(path: str) -> str:
    """The BASE of a feature prior's files (BASE.json + BASE.safetensors) from either one."""
    return str(path).removesuffix(".safetensors").removesuffix(".json")


def feature_prior_problem(path: str) -> str | None:
    """What is wrong with ``path`` as a feature prior (None: usable), in one line, from the
    files alone: both BASE.json and BASE.safetensors exist and the card says it is a feature
    prior. The GUI process never imports torch; whether the prior fits the network's layers
    is checked by the engine when it prepares the problem."""
    from pathlib import Path

    from lbi_engine.limits import read_json

    base = prior_base(path)
    for ext in ("json", "safetensors"):
        if not Path(f"{base}.{ext}").is_file():
            return (f"{base}.{ext} does not exist (a feature prior is two files, "
                    f"{Path(base).name}.json and {Path(base).name}.safetensors); "
                    f"{FIT_PRIOR_HINT}")
    try:
        card = read_json(f"{base}.json", "feature prior card", FIT_PRIOR_HINT)
    except InputError as exc:
        return str(exc)
    if not isinstance(card, dict) or card.get("kind") != "lbi-feature-prior":
        kind = card.get("kind") if isinstance(card, dict) else None
        return (f"{base}.json is not a feature prior card (its kind is {kind!r}, not "
                f"'lbi-feature-prior'); {FIT_PRIOR_HINT}")
    return None


#: Labels of the regularisers the window names itself; any other the engine knows (a new one)
#: is listed under its own name, so the list never lags behind the CLI.
REGULARISER_LABELS = {
    "auto": "Auto (learned prior, else TV)",
    "gaussian": "Learned Gaussian",
    "gaussian+tv": "Learned Gaussian + TV",
    "tv": "Total variation (isotropic)",
    "tv-aniso": "Total variation (anisotropic)",
    "tikhonov": "Tikhonov ‖x‖²",
    "gradient-tikhonov": "Gradient Tikhonov ‖∇x‖²",
    "l1": "ℓ¹ (sparsity)",
    "nonneg": "Non-negativity",
    "box": "Box [0, 1]",
    "none": "None",
}
#: Regularisers that are a constraint only (no '+constraint' variants of them).
_CONSTRAINTS = ("nonneg", "box", "none", "auto")


def _regularisers() -> list[tuple[str, str]]:
    """Every regulariser name the CLI accepts and its combined specs (gaussian+tv), then each
    prior with '+nonneg' and '+box' (the README's tv+box among them)."""
    from lbi_engine.cli._common import COMBINED_REGULARISER_NAMES, REGULARISER_NAMES

    names = sorted(REGULARISER_NAMES, key=lambda n: n != "auto")  # auto, the default, first
    names += list(COMBINED_REGULARISER_NAMES)
    plain = [(n, REGULARISER_LABELS.get(n, n)) for n in names]
    combined = [(f"{n}+{c}", f"{REGULARISER_LABELS.get(n, n)} + "
                             f"{'x ≥ 0' if c == 'nonneg' else 'box [0, 1]'}")
                for n in names if n not in _CONSTRAINTS for c in ("nonneg", "box")]
    return plain + combined


REGULARISERS: list[tuple[str, str]] = _regularisers()

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

    Why before: the panels convert values as they display them (``float("abc")`` raises
    half-way through filling them), so a hand-edited or damaged session must be refused before
    the window changes anything. The checks are the engine's (``InversionRequest.validate``),
    except whether a requested GPU exists, which needs torch and is checked by the run.
    Unknown keys are ignored and missing ones take the defaults, as when a session is applied.
    """
    known = {k: v for k, v in request.items() if k in REQUEST_TYPES}
    problems = [f"{k}={v!r} (expected {hint_name(REQUEST_TYPES[k])})"
                for k, v in known.items() if not json_type_ok(v, REQUEST_TYPES[k])]
    if problems:
        return problems
    values = {**default_request(), **known}
    if values["input_shape"] is not None:
        values["input_shape"] = tuple(values["input_shape"])
    try:
        InversionRequest(**values).validate(check_device=False)
    except InputError as exc:
        return [str(exc)]
    return []


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


#: How a request field is named in a change description.
CHANGE_NAMES = {"alpha": "α", "noise_std": "noise", "layer_alphas": "α per layer",
                "max_iter": "max iterations", "tol": "tolerance", "tol_mode": "stop rule",
                "time_budget": "time budget", "input_shape": "input shape",
                "feature_prior": "feature prior"}


def human_value(value: Any) -> str:
    """A request value as a person reads it: 3 significant digits, on/off, "none"."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(human_value(v) for v in value) + "]"
    text = str(value)
    return text.replace("\\", "/").rsplit("/", 1)[-1] if "/" in text or "\\" in text else text


def describe_change(old: dict[str, Any], new: dict[str, Any],
                    keys: frozenset[str] | None = None) -> str:
    """A short human description of what changed between two requests ("α 0.009→0.02")."""
    parts = []
    for key in sorted(keys if keys is not None else HOT_KEYS | PROBLEM_KEYS):
        if _norm(old.get(key)) != _norm(new.get(key)):
            a, b = old.get(key), new.get(key)
            parts.append(f"{CHANGE_NAMES.get(key, key)} {human_value(a)}→{human_value(b)}")
    return ", ".join(parts)
