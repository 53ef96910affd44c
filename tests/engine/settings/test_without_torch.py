"""The run record (``lbi_engine.request``) and the solver settings it checks load without torch
(issue #15), and the solvers use those very definitions (no second copy to drift)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lbi_engine.errors import InputError
from lbi_engine.request import InversionRequest
from lbi_engine.settings import solver as solver_settings

_PROBE = """
import sys
from lbi_engine.errors import InputError
from lbi_engine.request import InversionRequest
import lbi_engine
assert lbi_engine.InversionRequest is InversionRequest  # the package's lazy name, torch-free too
req = InversionRequest(method="joint", alpha=0.01, tol_mode="relative").validate()
back = InversionRequest.from_dict(req.to_dict())
assert back == req, (back, req)
assert back.solver_options().steps == "auto" and back.stop_rule().tol_mode == "relative"
for bad in ({"method": "newton"}, {"tol_mode": "sometimes"}, {"dtype": "float16"},
            {"alpha_rule": "guess", "alpha": "auto"}, {"options": {"n_inner": 0}}):
    try:
        InversionRequest(**bad).validate()
    except InputError:
        pass
    else:
        raise AssertionError(f"{bad} was accepted")
print("torch" in sys.modules)
"""


def test_request_builds_validates_and_round_trips_without_importing_torch() -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_solvers_use_the_torch_free_definitions() -> None:
    from lbi_engine import solvers
    from lbi_engine.solvers import alpha, base

    assert tuple(solvers.METHODS) == solver_settings.METHOD_NAMES
    assert solvers.DESCRIPTIONS is solver_settings.DESCRIPTIONS
    assert solvers.SolverOptions is solver_settings.SolverOptions
    assert base.StopRule is solver_settings.StopRule is solvers.StopRule
    assert alpha.RULES == solver_settings.ALPHA_RULES
    assert alpha.ALPHA_START == solver_settings.ALPHA_START


def test_validate_refuses_a_stop_rule_the_solver_would_refuse() -> None:
    """Checked up front now (before, a bad tol_mode passed validate and failed in prepare)."""
    with pytest.raises(InputError, match="tol_mode='sometimes'"):
        InversionRequest(tol_mode="sometimes").validate()
    with pytest.raises(InputError, match="time_budget=-1"):
        InversionRequest(time_budget=-1.0).validate()


def test_dtypes_are_still_served_to_the_engine() -> None:
    import torch

    from lbi_engine.api import DTYPES

    assert DTYPES == {"float32": torch.float32, "float64": torch.float64}
