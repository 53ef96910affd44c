"""The run record: ``InversionRequest``, everything that defines one inversion.

JSON-serialisable and versioned; ``lbi invert --record FILE`` repeats a run from it and the
GUI saves it with every export and session. Kept apart from ``api.py`` (which turns it into a
problem and runs it) so that readers of records need not read the runner.

Importable without torch (tests/engine/settings/test_without_torch.py): the GUI builds and
checks its requests with this class before the engine has loaded, and the CLI parses records
without it. torch is imported only where a device must be looked at (``validate`` for
``device="cuda"``, ``resolved_device`` for "auto") or a torch dtype is asked for (``DTYPES``).
"""

from __future__ import annotations

import math
import typing
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from lbi_engine.errors import FormatVersionError, InputError
from lbi_engine.settings.defaults import REQUEST_DEFAULTS as D
from lbi_engine.settings.record_types import hint_name, json_type_ok
from lbi_engine.settings.solver import (
    ALPHA_RULES,
    ALPHA_START,
    METHOD_NAMES,
    OptionValue,
    SolverOptions,
    StopRule,
)

FORMAT_VERSION = 1
#: Smallest alpha accepted: below it, step sizes such as 1/(8 alpha) overflow float32/64.
MIN_ALPHA = 1e-30
#: Most inner steps (max_iter x n_inner) one run may ask for without a time_budget.
MAX_TOTAL_STEPS = 10_000_000
#: Fields through which a file could claim consent to run code; a file's value is ignored.
CONSENT_FIELDS = ("allow_pickle", "allow_code")
DTYPE_NAMES = ("float32", "float64")


def __getattr__(name: str) -> Mapping[str, Any]:
    """``DTYPES`` (dtype name -> torch dtype) is built on first use, as it needs torch."""
    if name == "DTYPES":
        import torch

        globals()["DTYPES"] = {"float32": torch.float32, "float64": torch.float64}
        return globals()["DTYPES"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class InversionRequest:
    """Everything that defines a run; the defaults open the bundled CNN on a digit.

    The run record of ``lbi invert`` (``result.json``'s ``request``), of the window's exports
    and sessions, and of :func:`lbi_engine.solve`. Each field has the default of the
    ``lbi invert`` flag of the same name (``lbi invert --help``). Exactly one data source is
    used: ``data``, else ``truth``, else ``image``, else the bundled sample ``index``.

    Attributes:
        network: a zoo name (``lbi list``) or a model file: ONNX, ``.pt2``, safetensors or
            ``.pt`` state dict with its card, or a card JSON.
        input_shape: the input shape without the batch dimension, only for files that do not
            record it (TorchScript, some ONNX files); None: read from the file.
        dataset: the bundled dataset of ``index``: ``"mnist"``, ``"natural"`` or ``"cartoon"``.
        split: the split of ``dataset`` (mnist: ``"train"``, ``"val"``, ``"all"``).
        index: the sample of ``dataset``/``split`` used as ground truth.
        image: a ground-truth image file (PNG, JPEG, TIFF, BMP, PGM/PPM); y = N(x) plus noise.
        truth: a ground-truth ``.npy`` array in display range [0, 1]; y = N(x) plus noise.
        data: a measured network output y^delta (``.npy``): no ground truth, no noise added.
        resize: resize ``image`` to the network's input size (otherwise a size mismatch is
            refused).
        noise_std: standard deviation of the Gaussian noise added to the simulated output.
        seed: seed of that noise.
        alpha: the regularisation weight (> 0), or ``"auto"``: chosen from the data.
        alpha_rule: the rule of ``alpha="auto"``: ``"auto"`` (the discrepancy principle when
            the noise level is known, else quasi-optimality), ``"discrepancy"`` or
            ``"quasi-optimality"``.
        noise_level: the per-entry noise std of measured ``data``, so that ``alpha="auto"``
            can use the discrepancy principle.
        regulariser: the prior R: ``"tv"``, ``"tv+box"``, ``"gaussian+box"``, ... or
            ``"auto"`` (the learned prior + box where a zoo network ships one, else TV).
        method: ``"auto"``, ``"one-layer"`` (alias ``"pdhg"``), ``"joint"``,
            ``"layerwise"``, ``"landweber"`` or ``"backprop"``.
        steps: the step-size rule: ``"auto"``, ``"accelerated"``, ``"balanced"``,
            ``"safe"``, ``"conservative"`` or ``"paper"``.
        max_iter: iteration cap (the stop rule normally ends a run first).
        tol: stop tolerance of ``tol_mode``.
        tol_mode: ``"objective"`` (relative change of the objective over the second half of
            the run), ``"relative"`` or ``"absolute"`` (change of x per iteration).
        time_budget: solver seconds after which the run stops; None: no limit.
        device: ``"auto"`` (CUDA when torch finds a GPU), ``"cpu"`` or ``"cuda"``.
        dtype: ``"float32"`` or ``"float64"``.
        report_every: record an iterate (a row of ``curves.csv``) every this many iterations.
        threads: torch CPU threads; None: torch's default.
        layer_alphas: per-layer weights of the auxiliary priors (layer-wise method).
        allow_pickle: the person's consent, for this run, to open a model format whose loading
            runs code from the file (TorchScript, pickled modules); ``allow_code`` is the same
            flag. Records and sessions never grant it.
        options: solver options by name (``n_inner``, ``eta``, ``step_scale``, ...; the
            ``--option KEY=VALUE`` flag).
        feature_prior: BASE of a learned feature prior (``BASE.safetensors`` + ``BASE.json``
            from ``lbi feature-prior``) for the layer-wise method; None: the zoo's own.
        input_prior: BASE of a learned input prior (from ``lbi prior``) for
            ``regulariser="gaussian"``; None: the one shipped beside a zoo network.
    """

    network: str = D["network"]
    input_shape: tuple[int, ...] | None = D["input_shape"]
    dataset: str = D["dataset"]
    split: str = D["split"]
    index: int = D["index"]
    image: str | None = D["image"]
    truth: str | None = D["truth"]
    data: str | None = D["data"]
    resize: bool = D["resize"]
    noise_std: float = D["noise_std"]
    seed: int = D["seed"]
    alpha: float | str = D["alpha"]
    alpha_rule: str = D["alpha_rule"]
    noise_level: float | None = D["noise_level"]
    regulariser: str = D["regulariser"]
    method: str = D["method"]
    steps: str = D["steps"]
    max_iter: int = D["max_iter"]
    tol: float = D["tol"]
    tol_mode: str = D["tol_mode"]
    time_budget: float | None = D["time_budget"]
    device: str = D["device"]
    dtype: str = D["dtype"]
    report_every: int = D["report_every"]
    threads: int | None = D["threads"]
    layer_alphas: list[float] | None = D["layer_alphas"]
    #: The person's consent, for this run, to open a model format whose loading runs code from
    #: the file (TorchScript, pickled modules); ``allow_code`` is the same flag. Set it only
    #: from the person (a flag, a dialog, a keyword): records and sessions never grant it,
    #: see :func:`strip_file_consent`. (Named allow_pickle for older records.)
    allow_pickle: bool = D["allow_pickle"]
    options: dict[str, OptionValue] = field(default_factory=dict)
    feature_prior: str | None = D["feature_prior"]  # layer-wise: BASE of a feature prior
    input_prior: str | None = D["input_prior"]  # regulariser gaussian: BASE of an input prior

    @property
    def allow_code(self) -> bool:
        """Consent to run code from the model file (same flag as ``allow_pickle``)."""
        return self.allow_pickle

    @allow_code.setter
    def allow_code(self, value: bool) -> None:
        self.allow_pickle = bool(value)

    def validate(self, *, check_device: bool = True) -> InversionRequest:
        """Raises InputError naming the first bad parameter; returns self.

        ``check_device=False`` skips asking torch whether a requested GPU exists: the GUI
        checks a session's values with this (its process never imports torch); the engine
        checks the device when it runs the request.
        """
        if self.method not in METHOD_NAMES:
            raise InputError(f"method={self.method!r}: choose one of {', '.join(METHOD_NAMES)}.")
        if self.alpha == "auto":
            self._validate_auto_alpha()
        elif not (isinstance(self.alpha, (int, float)) and not isinstance(self.alpha, bool)
                  and math.isfinite(self.alpha)):
            raise InputError(f"alpha={self.alpha!r}: must be 'auto' or a finite number > 0.")
        elif self.alpha <= 0 and self.method not in ("landweber",):
            raise InputError(f"alpha={self.alpha}: must be > 0 (typical 1e-4 .. 1e-1).")
        elif 0 < self.alpha < MIN_ALPHA:  # e.g. 1e-320: step sizes 1/alpha overflow
            raise InputError(
                f"alpha={self.alpha}: absurdly small (below {MIN_ALPHA:g}); typical values are "
                "1e-4 .. 1e-1."
            )
        elif self.alpha > 1e6:
            raise InputError(
                f"alpha={self.alpha}: absurdly large; typical values are 1e-4 .. 1e-1."
            )
        if not (math.isfinite(self.noise_std) and 0 <= self.noise_std <= 1e6):
            raise InputError(
                f"noise_std={self.noise_std}: must be a finite number >= 0 (e.g. 0.05)."
            )
        if self.dtype not in DTYPE_NAMES:
            raise InputError(f"dtype={self.dtype!r}: use float32 or float64.")
        if self.device not in ("auto", "cpu") and not self.device.startswith("cuda"):
            raise InputError(f"device={self.device!r}: use 'auto', 'cpu' or 'cuda'.")
        if check_device and self.device.startswith("cuda") and not _cuda_available():
            raise InputError(f"device={self.device!r}: no CUDA GPU is available; use 'cpu'.")
        if self.max_iter < 1 or self.max_iter > 10_000_000:
            raise InputError(f"max_iter={self.max_iter}: must be between 1 and 10,000,000.")
        for name in ("seed", "index"):
            value = getattr(self, name)
            if not 0 <= value < 2**63:
                raise InputError(f"{name}={value}: must be an integer between 0 and 2^63 - 1.")
        if self.report_every < 1:
            raise InputError(f"report_every={self.report_every}: must be at least 1.")
        if self.threads is not None and not 1 <= self.threads <= 256:
            raise InputError(f"threads={self.threads}: must be between 1 and 256.")
        self._validate_shapes()
        sources = [s for s in (self.image, self.truth, self.data) if s]
        if len(sources) > 1:
            raise InputError("give at most one of image, truth and data.")
        options = self.solver_options()
        self.stop_rule()  # tol, tol_mode, time_budget
        work = self.max_iter * options.n_inner
        if work > MAX_TOTAL_STEPS and self.time_budget is None:
            # each bound alone allows a run of days: a record or session from someone else
            # must not be able to ask for that without saying so
            raise InputError(
                f"max_iter={self.max_iter:,} x n_inner={options.n_inner:,} = {work:,} inner "
                f"steps, more than {MAX_TOTAL_STEPS:,}; lower max_iter or n_inner, or give "
                "time_budget (--time-budget SECONDS) to stop by time instead.")
        return self

    def _validate_shapes(self) -> None:
        if self.input_shape is not None and not (
                len(self.input_shape) > 0 and all(int(s) > 0 for s in self.input_shape)):
            raise InputError(f"input_shape={list(self.input_shape)}: give positive sizes such "
                             "as [1, 28, 28].")
        if self.layer_alphas is not None and not all(
                math.isfinite(float(a)) and float(a) >= 0 for a in self.layer_alphas):
            raise InputError(f"layer_alphas={self.layer_alphas}: every entry must be a finite "
                             "number >= 0.")

    def _validate_auto_alpha(self) -> None:
        if self.alpha_rule not in ("auto", *ALPHA_RULES):
            raise InputError(f"alpha_rule={self.alpha_rule!r}: choose auto, "
                             f"{', '.join(ALPHA_RULES)}.")
        if self.noise_level is not None and not (math.isfinite(self.noise_level)
                                                 and self.noise_level > 0):
            raise InputError(f"noise_level={self.noise_level!r}: give the per-entry noise std "
                             "of the measurement, a number > 0 (e.g. 0.05).")

    def fixed_alpha(self) -> float:
        """The weight a solve starts with: the request's number; for "auto" the start of the
        path (Landweber has no prior: 0)."""
        if self.alpha != "auto":
            return float(self.alpha)
        return 0.0 if self.method == "landweber" else ALPHA_START

    def noise_std_known(self) -> float | None:
        """The noise level the alpha rule may use: the simulated std, or for measured data
        the stated ``noise_level``; None when unknown (or zero)."""
        level = self.noise_level if self.data else (self.noise_level or self.noise_std)
        return float(level) if level else None

    def resolved_device(self) -> str:
        """``auto``: CUDA when torch finds a GPU, else the CPU."""
        if self.device == "auto":
            return "cuda" if _cuda_available() else "cpu"
        return self.device

    def solver_options(self) -> SolverOptions:
        """The solver options this request asks for (``steps`` and ``options``)."""
        options: dict[str, OptionValue] = {"steps": self.steps, **self.options}
        if self.method == "layerwise" and "input_alpha" not in self.options:
            # The layer-wise input stage searches its own alpha only for alpha "auto": a typed
            # alpha is the alpha that runs (an explicit option input_alpha still wins).
            options["input_alpha"] = "given" if self.alpha != "auto" else (
                self.alpha_rule if self.alpha_rule in ("discrepancy", "quasi-optimality")
                else "quasi-optimality")
        return SolverOptions.from_dict(options)

    def stop_rule(self) -> StopRule:
        """The stop rule of ``max_iter``, ``tol``, ``tol_mode`` and ``time_budget``."""
        return StopRule(
            max_iter=self.max_iter,
            tol=self.tol,
            tol_mode=self.tol_mode,
            time_budget=self.time_budget,
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready run record, with its ``format_version`` and ``kind``."""
        data = asdict(self)
        if data["input_shape"] is not None:
            data["input_shape"] = list(data["input_shape"])
        return {"format_version": FORMAT_VERSION, "kind": "lbi-run-record", **data}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InversionRequest:
        """A request from a run record (:meth:`to_dict`'s form); raises ``FormatVersionError``
        for a record of another format and ``InputError`` for unknown fields."""
        if not isinstance(data, dict):
            raise FormatVersionError("a run record must be a JSON object.")
        data = dict(data)
        version = data.pop("format_version", None)
        data.pop("kind", None)
        if version is None:
            raise FormatVersionError(
                "the run record has no 'format_version'; it is not an lbi record."
            )
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise FormatVersionError(
                f"the run record has format_version {version!r}, which no lbi ever wrote (1 is "
                "the first); the file is damaged: export the run again."
            )
        if version > FORMAT_VERSION:
            raise FormatVersionError(
                f"the run record has format_version {version!r}, newer than this lbi understands "
                f"({FORMAT_VERSION}); update lbi to open it."
            )
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(
                f"the run record has unknown field(s) {unknown}; valid: {sorted(known)}."
            )
        hints = typing.get_type_hints(cls)
        wrong = [f"{k}={v!r} (expected {hint_name(hints[k])})" for k, v in data.items()
                 if not json_type_ok(v, hints[k])]
        if wrong:  # checked here so a damaged record never reaches a TypeError deeper down
            raise InputError(f"the run record has value(s) of the wrong type: {'; '.join(wrong)}; "
                             "fix the file or export the run again.")
        if data.get("input_shape") is not None:
            data["input_shape"] = tuple(int(v) for v in data["input_shape"])
        return cls(**data).validate()



def _cuda_available() -> bool:
    """Whether torch sees a CUDA GPU (imports torch: only asked for device "cuda"/"auto")."""
    import torch

    return bool(torch.cuda.is_available())


class ConsentIgnoredWarning(UserWarning):
    """A record or session file asked to run code from its model file; that was ignored."""


def strip_file_consent(data: dict[str, Any], source: str) -> tuple[dict[str, Any], str | None]:
    """``data`` without consent fields, and a warning when the file tried to grant consent.

    Why: consent to run a model file's code must come from the person at run time, never from
    a file that may have been sent along with the model (``"allow_pickle": true`` in a run
    record would otherwise unpickle the model without a question).
    """
    clean = {k: v for k, v in data.items() if k not in CONSENT_FIELDS}
    asked = any(data.get(k) is True for k in CONSENT_FIELDS)
    if not asked:
        return clean, None
    return clean, (f"{source} asks to run code from its model file (allow_pickle/allow_code); "
                   "a file cannot give that consent, so it was ignored. If you trust the model "
                   "file, consent for this run yourself: CLI --allow-code, Python "
                   "allow_code=True, GUI: confirm the dialog when the network is opened.")
