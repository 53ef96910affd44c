"""Parameter checks and small numerics shared by the elementwise activation kinds.

A room of ``lbi_engine.activations._kinds``: the piecewise-linear and the smooth kinds both
validate user parameters (from JSON, CLI flags or imported modules) the same way, and both
split Bregman losses by signs, so these helpers live here instead of in either of them.
"""

from __future__ import annotations

import math
from typing import Any

from torch import Tensor

from lbi_engine.errors import InputError

__all__ = ["LN2", "number_param", "unit_slope_param", "sign_parts"]

LN2 = math.log(2.0)


def number_param(kind: str, pname: str, value: Any) -> float:
    """A finite float parameter, or InputError naming the activation and parameter."""
    try:
        out = float(value)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{kind}: parameter {pname}={value!r} is not a number.") from exc
    if not math.isfinite(out):
        raise InputError(f"{kind}: parameter {pname}={value!r} must be finite.")
    return out


def unit_slope_param(kind: str, pname: str, value: Any, why: str,
                     label: str | None = None) -> float:
    """A slope parameter in (0, 1]: outside it sigma is steeper than 1 or not monotone, so it
    is not a proximal map (MATH.md §2.1). ``why`` says what goes wrong for this kind and
    ``label`` how the message names the parameter; the message also points at 'relu', the
    limit at 0."""
    out = number_param(kind, pname, value)
    if not 0.0 < out <= 1.0:
        raise InputError(
            f"{kind}: {label or pname}={out!r} must satisfy 0 < {pname} <= 1 ({why}); use "
            f"'relu' for {pname} = 0."
        )
    return out


def sign_parts(t: Tensor) -> tuple[Tensor, Tensor]:
    """(t_+, t_-) with t = t_+ - t_-, both >= 0: Bregman losses split by signs so that every
    term is >= 0 and float32 does not cancel large terms against each other."""
    return t.clamp_min(0), (-t).clamp_min(0)
