"""lbi_engine.operators.backend: one switch (LBI_NO_NUMBA) that every numba path obeys, and the
one ``jit`` every kernel module is compiled with."""

from __future__ import annotations

import ast
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from lbi_engine.operators import backend
from lbi_engine.operators.backend import FUSED_TV_ENV
from lbi_engine.regularisers import TVProx, make_regulariser
from lbi_engine.solvers.joint import one_sample as _joint_one
from lbi_engine.solvers.one_layer.inplace import fused_tv_plan

ENGINE = Path(backend.__file__).resolve().parents[1]


def _fused_plan() -> object:
    xp = [torch.zeros(2, 3, 1, 4, 4, dtype=torch.float64) for _ in range(2)]
    zp = [torch.zeros(2, 3, 2, 1, 4, 4, dtype=torch.float64) for _ in range(2)]
    return fused_tv_plan(make_regulariser("tv"), xp, zp, (1, 4, 4), 1.0, 1.0, 1.0, False)


@pytest.mark.parametrize("value", ["1", "yes"])
def test_no_numba_turns_every_numba_path_off(monkeypatch: pytest.MonkeyPatch,
                                             value: str) -> None:
    monkeypatch.setenv(FUSED_TV_ENV, "1")  # the fused PDHG step wherever it applies
    monkeypatch.delenv(backend.NO_NUMBA_ENV, raising=False)
    assert backend.numba_enabled()
    assert _fused_plan() is not None
    assert TVProx.compiles_on("cpu")
    assert make_regulariser("tv").fgp(1, (4, 4), torch.zeros(1)).compiled
    assert _joint_one._compiled_sums() is not None
    monkeypatch.setenv(backend.NO_NUMBA_ENV, value)
    assert not backend.numba_enabled()
    assert _fused_plan() is None  # the PDHG kernels used to ignore LBI_NO_NUMBA
    assert not TVProx.compiles_on("cpu")
    assert not make_regulariser("tv").fgp(1, (4, 4), torch.zeros(1)).compiled
    assert _joint_one._compiled_sums() is None


@pytest.mark.parametrize("value", ["", "0", " 0 "])
def test_an_empty_or_zero_switch_leaves_numba_on(monkeypatch: pytest.MonkeyPatch,
                                                 value: str) -> None:
    monkeypatch.setenv(backend.NO_NUMBA_ENV, value)
    assert backend.numba_enabled()


def test_numba_that_does_not_import_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(backend.NO_NUMBA_ENV, raising=False)
    monkeypatch.setitem(__import__("sys").modules, "numba", None)  # import numba: ImportError
    assert not backend.numba_enabled()


def _sum_is_finite(a):  # unannotated: numba types it from the call
    s = 0.0
    for v in a:
        s += v
    return math.isfinite(s)


def _divide_numpy(a, b):
    return a / b


def _divide_python(a, b):
    return a / b


def test_jit_fastmath_keeps_inf_and_nan_visible() -> None:
    """fastmath=True is backend.FAST, without nnan/ninf: with numba's own fastmath=True the
    test below folds to True, and a diverging run would not be seen."""
    assert {"nnan", "ninf"}.isdisjoint(backend.FAST)
    finite = backend.jit(fastmath=True)(_sum_is_finite)
    assert finite(np.array([1.0, 2.0])) is True
    assert finite(np.array([1.0, np.inf])) is False
    assert finite(np.array([1.0, np.nan])) is False


def test_jit_error_model() -> None:
    assert backend.jit(error_model="numpy")(_divide_numpy)(1.0, 0.0) == math.inf
    with pytest.raises(ZeroDivisionError):
        backend.jit()(_divide_python)(1.0, 0.0)


def test_only_the_backend_calls_numba_jit() -> None:
    """One decorator: no other engine module builds numba functions itself."""
    offenders = []
    for path in ENGINE.rglob("*.py"):
        if path.name == "backend.py" and path.parent.name == "operators":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and node.attr in ("njit", "jit") and \
                    isinstance(node.value, ast.Name) and node.value.id == "numba":
                offenders.append(f"{path.relative_to(ENGINE)}:{node.lineno}")
            if isinstance(node, ast.ImportFrom) and node.module == "numba" and \
                    any(alias.name in ("njit", "jit") for alias in node.names):
                offenders.append(f"{path.relative_to(ENGINE)}:{node.lineno}")
    assert not offenders, f"numba.njit/jit outside operators/backend.py: {offenders}"
