"""Choosing alpha from the data, for every method and stage: one machinery, two rule families.

``path.py``: the pieces every rule runs on (the geometric path of warm-started solves, the
quasi-optimality function and its global or first-local minimum, the log-linear
interpolation between bracketing alphas, the discrepancy ratio, the iteration/time budget).

``whole.py``: alpha "auto" of a whole-network run (one-layer, joint and the other methods
through ``api``): the discrepancy principle by a secant search on the residual of sample 0
with a noise-dependent tau, or quasi-optimality's global minimum on a quarter-decade path.
``residual_path.py``: how that search reads its path (slopes, brackets, and the point it
keeps when the target is out of reach); ``target.py``: the discrepancy target and the first
alpha; ``path_solve.py``: one solve of the path and when it has settled.

``stage.py``: the layer-wise method's input stage: quasi-optimality's first local minimum on a
factor-3 path, or the discrepancy principle on the mean ratio with a saturation fallback.

The two families were calibrated on different residuals (the whole network's against the
stage's, which carries the earlier stages' error), so each keeps its own constants and rule.
"""

from lbi_engine.solvers.alpha.path_solve import (
    CREEP_FLOOR,
    CREEP_RATIO,
    PATH_MIN_STEPS,
    PATH_REPORT,
    PATH_RTOL,
    PATH_SPAN,
    PathSolve,
    _Settled,
    _with_alpha,
)
from lbi_engine.solvers.alpha.residual_path import (
    FIT_FLOOR,
    MATCH,
    MAX_JUMP,
    MAX_POINTS,
    MAX_SLOPE,
    MIN_SLOPE,
    SLOPE,
    PathPoint,
    _fit_floor,
    _local_slope,
)
from lbi_engine.solvers.alpha.stage import AlphaSearch, search_alpha, sub_problem
from lbi_engine.solvers.alpha.target import (
    ALPHA_MAX,
    ALPHA_MIN,
    GUESS,
    GUESS_BOX,
    RHO_KNEE,
    TAU,
    TAU_MIN,
    TAU_SLOPE,
    expected_noise_norm,
    first_guess,
    tau_for,
)
from lbi_engine.solvers.alpha.whole import (
    ALPHA_START,
    FACTOR,
    QUASI_TOL,
    RULES,
    _warm,
    stream_alpha,
)
from lbi_engine.solvers.choice import AlphaChoice

__all__ = [
    "ALPHA_MAX", "ALPHA_MIN", "ALPHA_START", "CREEP_FLOOR", "CREEP_RATIO", "FACTOR",
    "FIT_FLOOR", "GUESS", "GUESS_BOX", "MATCH", "MAX_JUMP", "MAX_POINTS", "MAX_SLOPE",
    "MIN_SLOPE", "PATH_MIN_STEPS", "PATH_REPORT", "PATH_RTOL", "PATH_SPAN", "QUASI_TOL",
    "RHO_KNEE", "RULES", "SLOPE", "TAU", "TAU_MIN", "TAU_SLOPE", "AlphaChoice", "AlphaSearch",
    "PathPoint", "PathSolve", "_Settled", "_fit_floor", "_local_slope", "_warm", "_with_alpha",
    "expected_noise_norm", "first_guess", "search_alpha", "stream_alpha", "sub_problem",
    "tau_for",
]
