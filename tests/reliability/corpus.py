"""The bad-input corpus: one table, exercised through the engine API, the CLI and the GUI.

Each :class:`Case` says how to make the bad input (a builder in ``corpus_builders`` returning
the request fields to change), which :class:`~lbi_engine.errors.LbiError` subclass the engine
must raise (``None``: the input is accepted, possibly with a warning), and words every entry
point's message must contain (case-insensitive). The words name the input and the problem;
the entry-point tests also check the form (CLI: exit 2, one stderr line, no traceback; GUI: a
dialog).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.errors import (
    DataFileError,
    FormatVersionError,
    InputError,
    LbiError,
    ModelFileError,
    ShapeMismatchError,
    UnsafeFileError,
    UnsupportedLayerError,
)
from tests.reliability import corpus_builders as mk
from tests.reliability.corpus_builders import MARKER, Ctx
from tests.reliability.kit import Kit

__all__ = ["MARKER", "Case", "CASES", "CASE_IDS", "BY_ID", "build", "message_ok", "to_argv"]


@dataclass(frozen=True)
class Case:
    id: str
    make: Callable[[Ctx], dict[str, Any]]
    error: type[LbiError] | None
    words: tuple[str, ...]
    #: GUI route: "file" (Open network / image / data), "param" (a run with these values:
    #: the widgets cannot produce them, a session or the command line can), None (n/a)
    gui: str | None = "file"
    cli: bool = True
    warns: tuple[str, ...] = field(default=())  # accepted cases: words of the warning
    #: the window's words where it meets the case otherwise than the command line (it fits
    #: the data to the network first, and refuses a degenerate image when it is opened)
    gui_words: tuple[str, ...] | None = None



# ---- the table -----------------------------------------------------------------------------
CASES: list[Case] = [
    # model files: wrong, empty, truncated, mislabelled
    Case("onnx-is-png", mk.onnx_is_png, ModelFileError, ("model.onnx", "onnx")),
    Case("pt-is-text", mk.pt_is_text, ModelFileError, ("model.pt", "format")),
    Case("empty-pt", mk.empty_pt, ModelFileError, ("empty.pt", "empty")),
    Case("truncated-torchscript", mk.truncated_torchscript, ModelFileError,
         ("cut_ts.pt", "truncated")),
    Case("truncated-state-dict", mk.truncated_state_dict, ModelFileError,
         ("cut_state.pt", "truncated")),
    Case("truncated-safetensors", mk.truncated_safetensors, ModelFileError,
         ("cut.safetensors", "truncated")),
    Case("truncated-onnx", mk.truncated_onnx, ModelFileError, ("cut.onnx", "again")),
    Case("weights-without-card", mk.weights_without_card, ModelFileError,
         ("lonely", "card")),
    Case("card-bad-json", mk.card_bad_json, ModelFileError, ("broken_card.json", "json")),
    Case("card-unknown-layer", mk.card_unknown_layer, ModelFileError,
         ("odd_card.json", "frobnicate")),
    Case("card-newer-version", mk.card_newer_version, FormatVersionError,
         ("future_card.json", "format_version", "update")),
    Case("card-weights-mismatch", mk.card_weights_mismatch, ModelFileError,
         ("other.pt", "do not match")),
    Case("card-is-binary", mk.card_is_binary, ModelFileError, ("binary_card.json", "json")),
    Case("card-absurd-layer", mk.card_absurd_layer, ModelFileError, ("huge_card.json", "weights")),
    Case("card-absurd-input-shape", mk.card_absurd_input_shape, InputError,
         ("100000", "too large")),
    Case("onnx-absurd-input-dims", mk.onnx_absurd_input_dims, InputError,
         ("vast.onnx", "too large")),
    Case("missing-network", mk.missing_network, ModelFileError, ("missing_model.pt",)),
    Case("network-is-directory", mk.network_is_directory, ModelFileError,
         ("model_dir.pt", "directory")),
    Case("unreadable-network", mk.unreadable_network, ModelFileError,
         ("locked_ts.pt", "permission")),
    Case("non-utf8-name-missing", mk.non_utf8_missing_network, ModelFileError, ("_net.pt",)),
    # code execution: refused without opt-in (the marker file must never appear)
    Case("pickle-runs-code-zip", lambda c: mk.evil_pickle(c, "evil.pt", legacy=False),
         UnsafeFileError, ("evil.pt", "pickle", "allow")),
    Case("pickle-runs-code-legacy", lambda c: mk.evil_pickle(c, "evil.pkl", legacy=True),
         UnsafeFileError, ("evil.pkl", "pickle", "allow")),
    Case("pickled-whole-module", mk.whole_module_pickle, UnsafeFileError,
         ("whole_model.pt", "pickle", "code")),
    # layers and weights
    # (TorchScript cases carry the person's consent, allow_pickle; GUI: given as a parameter)
    Case("unsupported-gelu", mk.gelu_torchscript, UnsupportedLayerError, ("gelu",), gui="param"),
    Case("unsupported-maxpool-onnx", mk.maxpool_onnx, UnsupportedLayerError,
         ("maxpool", "padding")),
    Case("nan-in-weights", mk.nan_weights, InputError, ("weight", "nan")),
    Case("inf-in-weights", mk.inf_weights_torchscript, InputError, ("bias", "inf"), gui="param"),
    Case("input-shape-absurd", mk.absurd_input_shape, InputError, ("100000", "too large"),
         gui="param"),
    Case("input-shape-mismatch", mk.mismatched_input_shape, ShapeMismatchError, ("1024",),
         gui="param", gui_words=("tiny_ts.pt", "1024", "784")),
    # ground-truth arrays and images
    Case("truth-nan", lambda c: mk.truth(c, "t_nan.npy", mk.digit_with(np.nan)), DataFileError,
         ("t_nan.npy", "nan")),
    Case("truth-inf", lambda c: mk.truth(c, "t_inf.npy", mk.digit_with(np.inf)), DataFileError,
         ("t_inf.npy", "infinite")),
    Case("truth-wrong-shape", lambda c: mk.truth(c, "t_small.npy", np.zeros((10, 10), np.float32)),
         ShapeMismatchError, ("t_small.npy", "(10, 10)")),
    Case("truth-complex", lambda c: mk.truth(c, "t_cplx.npy", mk.DIGIT.astype(np.complex64)),
         DataFileError, ("t_cplx.npy", "complex")),
    Case("truth-object", lambda c: mk.truth(c, "t_obj.npy", np.array([{"a": 1}], dtype=object),
                                         allow_pickle=True),
         DataFileError, ("t_obj.npy", "pickle")),
    Case("truth-zero-size", lambda c: mk.truth(c, "t_void.npy", np.zeros((0, 28), np.float32)),
         ShapeMismatchError, ("t_void.npy", "(0, 28)")),
    Case("truth-structured",
         lambda c: mk.truth(c, "t_rec.npy", np.zeros(784, dtype=[("a", "<f4"), ("b", "<i4")])),
         DataFileError, ("t_rec.npy", "numeric")),
    Case("truth-int64", lambda c: mk.truth(c, "t_int.npy", (mk.DIGIT > 0.5).astype(np.int64)),
         None, ()),
    Case("truth-empty-npy", lambda c: {"truth": str(mk.touch(c.tmp / "t_empty.npy"))},
         DataFileError, ("t_empty.npy", "empty")),
    Case("truth-npz", lambda c: mk.npz(c), DataFileError, ("t_pack.npz", "npz")),
    Case("truth-npy-gigantic-header",
         lambda c: {"truth": mk.npy_header(c, "t_huge.npy", (100000, 100000, 100000))},
         DataFileError, ("t_huge.npy", "100000")),
    Case("truth-npy-truncated",
         lambda c: {"truth": mk.npy_header(c, "t_cut.npy", (28, 28), b"\x00" * 100)},
         DataFileError, ("t_cut.npy", "truncated")),
    Case("image-empty", lambda c: mk.png_file(c, "empty.png", b""), DataFileError,
         ("empty.png", "empty")),
    Case("image-corrupt",
         lambda c: mk.png_file(c, "broken.png", b"\x89PNG\r\n\x1a\n" + b"\x00" * 40),
         DataFileError, ("broken.png", "image")),
    Case("image-is-text", lambda c: mk.png_file(c, "notes.png", b"hello, I am text\n"),
         DataFileError, ("notes.png", "image")),
    Case("image-one-pixel", lambda c: mk.png_file(c, "dot.png", mk.png_bytes((1, 1))),
         ShapeMismatchError, ("dot.png", "resize"), gui_words=("dot.png", "1×1", "at least 2")),
    # enlarged from one pixel the truth would be a flat blur: refused, not resized
    Case("image-one-pixel-resized",
         lambda c: {**mk.png_file(c, "dot2.png", mk.png_bytes((1, 1))), "resize": True},
         DataFileError, ("dot2.png", "1 x 1 pixels", "at least 8 pixels"),
         gui_words=("dot2.png", "1×1")),
    Case("image-decompression-bomb",
         lambda c: mk.png_file(c, "bomb.png", mk.png_header_only(100000, 100000)),
         DataFileError, ("bomb.png", "pixels")),
    Case("image-float-nan", lambda c: mk.float_tiff(c, "nan_float.tif", np.nan), DataFileError,
         ("nan_float.tif", "nan")),
    Case("image-missing", lambda c: {"image": str(c.tmp / "nowhere.png")}, DataFileError,
         ("nowhere.png", "does not exist")),
    Case("image-unreadable", mk.unreadable_image, DataFileError, ("locked.png", "permission")),
    # measured network outputs
    Case("data-nan", lambda c: mk.data_array(c, "y_nan.npy", np.full(32, np.nan, np.float32)),
         DataFileError, ("y_nan.npy", "nan")),
    Case("data-wrong-shape", lambda c: mk.data_array(c, "y_short.npy", np.ones(7, np.float32)),
         ShapeMismatchError, ("y_short.npy", "output")),
    Case("data-negative-relu",
         lambda c: mk.data_array(c, "y_neg.npy", np.linspace(-1, 1, 32, dtype=np.float32)),
         None, (), warns=("y_neg.npy", "clipped")),
    # parameters
    Case("alpha-zero", lambda c: {"alpha": 0.0}, InputError, ("alpha", "> 0"), gui="param"),
    Case("alpha-negative", lambda c: {"alpha": -1.0}, InputError, ("alpha",), gui="param"),
    Case("alpha-nan", lambda c: {"alpha": float("nan")}, InputError, ("alpha", "finite"),
         gui="param"),
    Case("alpha-inf", lambda c: {"alpha": float("inf")}, InputError, ("alpha", "finite"),
         gui="param"),
    Case("alpha-huge", lambda c: {"alpha": 1e300}, InputError, ("alpha",), gui="param"),
    Case("noise-negative", lambda c: {"noise_std": -0.1}, InputError, ("noise",), gui="param"),
    Case("noise-huge", lambda c: {"noise_std": 1e300}, InputError, ("noise",), gui="param"),
    Case("noise-nan", lambda c: {"noise_std": float("nan")}, InputError, ("noise",), gui="param"),
    Case("max-iter-zero", lambda c: {"max_iter": 0}, InputError, ("max", "iter"), gui="param"),
    Case("unknown-regulariser", lambda c: {"regulariser": "frobenius"}, InputError,
         ("frobenius",), gui="param"),
    Case("unknown-solver-option", lambda c: {"options": {"bogus_knob": 1}}, InputError,
         ("bogus_knob",), gui="param"),
    Case("step-scale-negative", lambda c: {"options": {"step_scale": -1.0}}, InputError,
         ("step_scale",), gui="param"),
    Case("dtype-complex", lambda c: {"dtype": "complex64"}, InputError, ("dtype",), gui="param"),
    Case("index-out-of-range", lambda c: {"index": 10**6}, InputError, ("out of range",),
         gui="param"),
    Case("tv-on-flat-vector",
         lambda c: {"network": str(c.kit.flat_card),
                    **mk.truth(c, "t10.npy", np.linspace(0, 1, 10, dtype=np.float32))},
         ShapeMismatchError, ("tv", "image"), gui="param"),
]


CASE_IDS = [c.id for c in CASES]
BY_ID = {c.id: c for c in CASES}


def build(case: Case, tmp: Path, kit: Kit, monkeypatch: Any) -> dict[str, Any]:
    """The full request (base + the case's changes) after making the bad input in ``tmp``."""
    tmp.mkdir(parents=True, exist_ok=True)
    overrides = case.make(Ctx(tmp, kit, monkeypatch))
    return kit.base_request(**overrides)


def message_ok(message: str, words: tuple[str, ...]) -> list[str]:
    """The words missing from ``message`` (case-insensitive)."""
    low = message.lower()
    return [w for w in words if w.lower() not in low]


def to_argv(request: dict[str, Any], out: Path) -> list[str]:
    """``lbi invert`` arguments for a request (the CLI's own parsing is part of the test)."""
    argv = ["invert", "--network", request["network"], "--out", str(out), "--quiet"]
    flags = {"alpha": "--alpha", "noise_std": "--noise-std", "seed": "--seed",
             "regulariser": "--regulariser", "method": "--method", "max_iter": "--max-iter",
             "report_every": "--report-every", "threads": "--threads", "dtype": "--dtype",
             "dataset": "--dataset", "split": "--split"}
    for key, flag in flags.items():
        if key in request:
            argv += [flag, str(request[key])]
    if request.get("input_shape"):
        argv += ["--input-shape", ",".join(str(s) for s in request["input_shape"])]
    for key in ("image", "truth", "data"):
        if request.get(key):
            argv += [f"--{key}", request[key]]
            break
    else:
        argv += ["--sample", str(request["index"])]
    if request.get("resize"):
        argv.append("--resize")
    if request.get("allow_pickle"):  # the person's consent, given on the command line
        argv.append("--allow-code")
    for key, value in (request.get("options") or {}).items():
        argv += ["--option", f"{key}={value}"]
    return argv
