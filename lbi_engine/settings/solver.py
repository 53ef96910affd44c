"""What a run asks of a solver, importable without torch: the method names, the step rules,
:class:`SolverOptions`, :class:`StopRule` and the names of the alpha rules.

Why apart from ``lbi_engine.solvers``: the run record (``request.py``), the command line's
parser and the GUI's panels validate and offer these before torch is imported (the window is
on screen and ``lbi --help`` answers in a fraction of a second); the solvers import them from
here, so there is one definition of each. Imports nothing but ``lbi_engine.errors``.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from lbi_engine.errors import InputError

#: A solver option's value as a request or a script gives it by name (``--option KEY=VALUE``):
#: :class:`SolverOptions` checks the names and holds the typed fields.
OptionValue = float | int | str | None

#: Method name -> what it runs, in the order the help texts list them. The solvers' registry
#: (``lbi_engine.solvers.METHODS``) maps the same names to their run functions.
DESCRIPTIONS = {
    "auto": "one-layer for one lifted layer, joint for several (default)",
    "one-layer": "one-layer network (paper eq. 12): accelerated proximal gradient for TV, "
                 "else PDHG",
    "pdhg": "alias of one-layer",
    "joint": "all layers jointly by coordinate descent (paper eqs. 13-15)",
    "layerwise": "layer by layer from the output down (paper's remark)",
    "landweber": "Landweber with the discrepancy principle (baseline)",
    "backprop": "gradient descent through the network with autograd (baseline)",
}
METHOD_NAMES = tuple(DESCRIPTIONS)

#: Rules for alpha "auto" (lbi_engine/solvers/alpha/whole.py) and the start of its path, which is
#: also the weight a solve starts with before the rule has chosen.
ALPHA_RULES = ("discrepancy", "quasi-optimality")
ALPHA_START = 0.1

TOL_MODES = ("objective", "relative", "absolute")

#: What ``tol`` measures, per mode (for help texts and result.json's ``stop_rule``).
TOL_MEANING = {
    "objective": "max relative change of the objective over the second half of the run",
    "relative": "relative change of x and of the dual in one iteration",
    "absolute": "absolute change of x and of the dual in one iteration (paper)",
}


@dataclass(frozen=True)
class StopRule:
    """When to stop.

    ``tol_mode="objective"`` (default): a sample stops when its objective E has moved by less
    than ``tol * |E_k|`` over the second half of the run so far, i.e. when
    ``max_{k/2 <= j <= k} |E_j - E_k| <= tol |E_k|`` over the reported iterates j. It is
    checked at every record (every ``report_every`` iterations; with this rule on, records
    come at least every 50 iterations, ``_monitor.OBJECTIVE_CHECK_MAX``). For a method
    converging at rate O(1/k) or faster, E_{k/2} - E_k bounds the remaining gap E_k - E* from
    above (O(1/k): equal; O(1/k^2) or linear: larger), and the max also covers methods whose
    objective oscillates (Condat–Vũ). Unlike a step-change rule it fires in float32: the objective
    settles to rounding level while the dual keeps moving. The default 1e-4 leaves the
    objective within about 1e-4 relative of the optimum (tests/engine/test_stop_rule.py
    checks 1e-3 against independent solutions).
    ``"relative"``: ‖Δx‖/max(‖x‖,1e-12) < tol **and** ‖Δz‖/max(‖z‖,1e-12) < tol for the primal x
    and dual z in one iteration; ``"absolute"`` is the paper's rule (‖Δx‖ < tol and ‖Δz‖ < tol),
    which on the circle problem never fires (MATH.md §3.3).
    ``residual_tol`` additionally (or, with ``tol=0``, only) stops on the optimality residuals.

    Attributes:
        max_iter: iteration cap; a run that reaches it stops with ``"max_iterations"``.
        tol: the tolerance of ``tol_mode`` (0: never stop on it).
        tol_mode: ``"objective"``, ``"relative"`` or ``"absolute"`` (above).
        residual_tol: stop when the optimality residuals fall below it (None: not used).
        time_budget: solver seconds after which a run stops with ``"time_budget"`` (None: none).
        min_iter: iterations run before any tolerance may stop a sample.
    """

    max_iter: int = 10_000
    tol: float = 1e-4
    tol_mode: str = "objective"
    residual_tol: float | None = None
    time_budget: float | None = None  # seconds
    min_iter: int = 2

    def __post_init__(self) -> None:
        if self.max_iter < 1:
            raise InputError(f"max_iter={self.max_iter}: must be at least 1.")
        if not (self.tol >= 0):
            raise InputError(f"tol={self.tol}: must be a number >= 0 (e.g. 1e-5).")
        if self.tol_mode not in TOL_MODES:
            raise InputError(f"tol_mode={self.tol_mode!r}: use one of {', '.join(TOL_MODES)}.")
        if self.time_budget is not None and not (self.time_budget > 0):
            raise InputError(f"time_budget={self.time_budget}: must be > 0 seconds or None.")


#: hidden_weight's range: beyond it the blocks' step sizes differ by more than float32 carries
HIDDEN_WEIGHT_RANGE = (1e-4, 1e6)

STEP_RULES = ("auto", "accelerated", "balanced", "safe", "conservative", "paper")


#: Upper bound of n_inner: more PDHG steps per sweep than this is a typo, not a setting.
MAX_INNER = 10_000
#: SolverOptions.start's values
STARTS = ("auto", "continuation", "back-projection")


@dataclass(frozen=True)
class SolverOptions:
    """Method options; each method reads the ones it needs and ignores the rest.

    steps:
        ``"auto"`` (default): ``"accelerated"`` for method pdhg, ``"balanced"`` for the input
        stage of layerwise, ``"safe"`` for the x_0 block of the joint method.
        ``"accelerated"``: FISTA with an inexact, warm-started TV prox and adaptive restart
        (lbi_engine/solvers/one_layer/accelerated.py): 9-19x fewer products with W than "balanced"
        (benchmarks/RESULTS.md section 3). Used for TV without box constraints and without
        Anderson mixing; other regularisers and options run "balanced" Condat–Vũ.
        ``"balanced"``: tau_z = 0.99 L / (alpha^2 ||K||^2) (twice "safe"'s), tau_x =
        0.99 / (L/2 + tau_z alpha^2 ||K||^2); measured 2.2x fewer iterations than "safe" on
        the circle problem (benchmarks/RESULTS.md).
        ``"safe"``: balanced Condat–Vũ steps tau_x = 1/L, tau_z = 0.99 L / (2 alpha^2 ||K||^2)
        (MATH.md §3.3).
        ``"conservative"``: tau_z = 1/(8 alpha), tau_x = 0.99 / (L/2 + tau_z alpha^2 ||K||^2).
        ``"paper"``: tau_x = 1.99/||W||^2, tau_z = 1/(8 alpha) (may not converge when
        ||W||^2 < 398 alpha; a warning is recorded in the first record's extras).
        All but "paper" satisfy 1/tau_x - tau_z ||alpha K||^2 > L/2 (Condat–Vũ).
    n_inner: PDHG steps on the x_0 block per coordinate-descent sweep (joint method).
    step_scale: multiplies every primal step (for experiments; > 1 can diverge).
    eta: discrepancy-principle factor for Landweber (stop when ||residual|| <= eta * delta).
    optimizer / lr / tv_smoothing: the backpropagation baseline (Adam or gradient descent).
    layer_tikhonov: beta/2 ||x_l||^2 added to the layer-wise stages' learned feature priors
        (default 0: the Gaussian prior already makes every stage well-posed; docs/LAYERWISE.md).
    inner_max_iter: iteration cap of each intermediate stage of the layer-wise method.
    input_alpha: the layer-wise input stage's alpha when the noise level is known:
        ``"quasi-optimality"`` (default: the first local minimum of ||x_k - x_{k+1}|| on a
        geometric search, lbi_engine/solvers/alpha/stage.py says why), ``"discrepancy"``
        (the largest alpha whose result reproduces the code to eta times the noise level) or
        ``"given"`` (the run's alpha).
    anderson: memory of the safeguarded Anderson acceleration of PDHG (methods pdhg and the
        input stage of layerwise; 0 = off). See lbi_engine/solvers/one_layer/anderson.py.
    hidden_weight: the joint method's weight on every hidden layer's Bregman term against the
        last one's (MATH.md §5.7). ``"auto"`` (default): 1, the paper's objective, except on
        a network with a hidden state that scales (chain or graph) whose discrepancy
        target the alpha search finds out of reach at weight 1: there the search runs
        again at 100. A number
        in [1e-4, 1e6] applies to any network. It acts on layers whose activation is
        positively homogeneous (ReLU, leaky ReLU, identity, clip, soft-shrink); others keep
        weight 1. lbi_engine/models/rescale.py says why.
    start: how the joint method with alpha "auto" starts and chooses alpha.
        ``"auto"`` (default): ``"continuation"`` on a network read from a file with the TV
        regulariser, else ``"back-projection"``. ``"continuation"``: alpha from a
        warm-started L-BFGS path on the exact problem (1/2 ||N(x) - y||^2 + alpha TV_eps),
        then the lifted solve from the path's end (MATH.md §5.8,
        lbi_engine/solvers/alpha/continuation.py). ``"back-projection"``: the lifted alpha
        search from the scaled back-projection of the code (MATH.md §5.7).
    """

    steps: str = "auto"
    n_inner: int = 1
    step_scale: float = 1.0
    eta: float = 1.05
    optimizer: str = "adam"
    lr: float = 1e-2
    tv_smoothing: float = 1e-3
    layer_tikhonov: float = 0.0
    inner_max_iter: int | None = None
    input_alpha: str = "quasi-optimality"
    anderson: int = 0
    hidden_weight: float | str = "auto"
    start: str = "auto"

    def __post_init__(self) -> None:
        self._check_types()
        if self.steps not in STEP_RULES:
            raise InputError(f"steps={self.steps!r}: choose one of {', '.join(STEP_RULES)}.")
        if not 1 <= self.n_inner <= MAX_INNER:
            raise InputError(f"n_inner={self.n_inner}: must be between 1 and {MAX_INNER:,} "
                             "(PDHG steps per sweep; 1-10 is typical).")
        if self.inner_max_iter is not None and not 1 <= self.inner_max_iter <= 10_000_000:
            raise InputError(f"inner_max_iter={self.inner_max_iter}: must be between 1 and "
                             "10,000,000 (or left unset: the stages share max_iter).")
        if not (math.isfinite(self.step_scale) and 0 < self.step_scale <= 1e30):
            raise InputError(f"step_scale={self.step_scale}: must be a number in (0, 1e30] "
                             "(1 is the provably convergent step; > 1 can diverge).")
        if not self.eta > 1:
            raise InputError(f"eta={self.eta}: the discrepancy factor must be > 1 (e.g. 1.05).")
        if self.optimizer not in ("adam", "gd"):
            raise InputError(f"optimizer={self.optimizer!r}: use 'adam' or 'gd'.")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise InputError(f"lr={self.lr}: the learning rate must be a finite number > 0.")
        if not (self.tv_smoothing > 0 and math.isfinite(self.tv_smoothing)):
            raise InputError(f"tv_smoothing={self.tv_smoothing}: must be > 0 (e.g. 1e-3).")
        if not (isinstance(self.anderson, int) and 0 <= self.anderson <= 50):
            raise InputError(f"anderson={self.anderson!r}: give a memory between 0 (off) and 50.")
        if self.input_alpha not in ("quasi-optimality", "discrepancy", "given"):
            raise InputError(f"input_alpha={self.input_alpha!r}: use 'quasi-optimality', "
                             "'discrepancy' or 'given'.")
        if not (self.layer_tikhonov >= 0 and math.isfinite(self.layer_tikhonov)):
            raise InputError(f"layer_tikhonov={self.layer_tikhonov}: must be >= 0.")
        if self.start not in STARTS:
            raise InputError(f"start={self.start!r}: use {', '.join(repr(s) for s in STARTS)}.")
        self._check_hidden_weight()

    def _check_hidden_weight(self) -> None:
        value = self.hidden_weight
        if value == "auto":
            return
        lo, hi = HIDDEN_WEIGHT_RANGE
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                not (math.isfinite(value) and lo <= value <= hi):
            raise InputError(f"hidden_weight={value!r}: give 'auto' or a number in [{lo:g}, "
                             f"{hi:g}] (1 is the paper's objective).")

    def _check_types(self) -> None:
        """InputError (not a TypeError deeper down) for a value of the wrong kind, e.g.
        ``--option n_inner=abc`` or ``n_inner=2.5``."""
        for f in fields(self):
            value = getattr(self, f.name)
            if (value is None and f.name == "inner_max_iter") or f.name == "hidden_weight":
                continue  # (hidden_weight: a number or "auto", _check_hidden_weight)
            kind = type(f.default) if f.default is not None else int
            if kind is float:
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            else:
                ok = isinstance(value, kind) and not (kind is int and isinstance(value, bool))
            if not ok:
                raise InputError(f"solver option {f.name}={value!r}: must be {kind.__name__}, "
                                 f"not {type(value).__name__}.")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict | None) -> SolverOptions:
        if not data:
            return cls()
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise InputError(
                f"unknown solver option(s) {sorted(unknown)}; valid options: {sorted(known)}."
            )
        return cls(**data)
