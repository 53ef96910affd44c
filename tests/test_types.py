"""Static checks in the default suite, so that CI enforces them.

- mypy, configured by ``[tool.mypy]`` in pyproject.toml, reports no error on the whole of
  ``lbi_engine`` and of ``lbi_gui`` (no module excluded). It runs in-process through
  ``mypy.api``; its cache is the repository's ``.mypy_cache`` (about 20-40 s cold, a few
  seconds warm).
- In the same run, a small program checks that the concrete classes satisfy the Protocols of
  ``lbi_engine.protocols``, and that a class lacking a protocol method is rejected (a needed
  ``type: ignore``: with ``warn_unused_ignores`` an unneeded one is an error, so the check
  cannot pass vacuously).
- ruff with RUF100 added to the project's rules finds no ``noqa`` that suppresses nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

CONFORMANCE = '''\
"""Each concrete class of lbi_engine assigned to the protocol it implements."""

from torch import Tensor

from lbi_engine import protocols as P
from lbi_engine.activations import ProximalActivation
from lbi_engine.models.network import LiftedLayer, LiftedNetwork
from lbi_engine.operators import AffineMap
from lbi_engine.problem import InversionProblem, ShapedRegulariser
from lbi_engine.regularisers import Regulariser
from lbi_engine.solvers import METHODS


def conforms(op: AffineMap, act: ProximalActivation, layer: LiftedLayer, net: LiftedNetwork,
             reg: Regulariser, shaped: ShapedRegulariser, problem: InversionProblem) -> None:
    operator: P.Operator = op
    activation: P.Activation = act
    lifted: P.Layer = layer
    network: P.Network = net
    regulariser: P.Regulariser = reg
    on_input: P.InputRegulariser = shaped
    inversion: P.Problem = problem
    solvers: list[P.Solver] = list(METHODS.values())
    print(operator, activation, lifted, network, regulariser, on_input, inversion, solvers)


class NoAdjoint:
    """An operator without W^T: the protocol must reject it."""

    in_shape: tuple[int, ...] = (1,)
    out_shape: tuple[int, ...] = (1,)

    def linear(self, x: Tensor) -> Tensor:
        return x

    def apply(self, x: Tensor) -> Tensor:
        return x

    def norm(self) -> float:
        return 1.0


rejected: P.Operator = NoAdjoint()  # type: ignore[assignment]
'''


def test_mypy_clean_on_lbi_engine_and_lbi_gui(tmp_path: Path) -> None:
    try:
        from mypy import api
    except ImportError:
        pytest.skip("mypy is not installed (pip install -c constraints.txt -e '.[test]')")
    program = tmp_path / "lbi_protocol_conformance.py"
    program.write_text(CONFORMANCE, encoding="utf-8")
    stdout, stderr, status = api.run([
        "--config-file", str(ROOT / "pyproject.toml"),
        "--cache-dir", str(ROOT / ".mypy_cache"),
        str(ROOT / "lbi_engine"), str(ROOT / "lbi_gui"), str(program),
    ])
    assert status == 0, f"mypy found errors (exit {status}):\n{stdout}{stderr}"


def _ruff() -> str | None:
    """The ruff next to this Python (the venv's), else the one on PATH."""
    name = "ruff.exe" if os.name == "nt" else "ruff"
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.is_file() else shutil.which("ruff")


def test_no_dead_noqa() -> None:
    ruff = _ruff()
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -c constraints.txt -e '.[test]')")
    # --extend-select keeps the project's rules: with RUF100 alone, every noqa for one of them
    # would count as "non-enabled".
    result = subprocess.run(
        [ruff, "check", "--no-cache", "--extend-select", "RUF100", "lbi_engine", "lbi_gui"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, (
        "ruff (with RUF100) failed; remove dead noqa with `ruff check --extend-select RUF100 "
        f"--fix lbi_engine lbi_gui`:\n{result.stdout}{result.stderr}"
    )
