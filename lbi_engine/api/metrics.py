"""The numbers of a finished run, as result.json holds them (``final_metrics``)."""

from __future__ import annotations

import math
from typing import Any

from torch import Tensor

from lbi_engine.api.prepared import PreparedRun
from lbi_engine.request import InversionRequest
from lbi_engine.solvers.base import IterateRecord


def final_metrics(prepared: PreparedRun, record: IterateRecord, sample: int = 0) -> dict[str, Any]:
    """The numbers written to result.json (null where undefined)."""
    from lbi_engine import metrics

    problem = prepared.problem
    x = record.x[sample : sample + 1]
    image = x.reshape(1, *(problem.image_shape or problem.input_shape))

    def scalar(t: Tensor | None) -> float | None:
        if t is None:
            return None
        value = float(t[sample]) if t.dim() else float(t)
        return value if math.isfinite(value) else None

    has_image = problem.image_shape is not None
    return {
        "method_run": prepared.method,
        "device_run": str(problem.device),
        "alpha": float(record.extras.get("alpha", problem.alpha)),
        "alpha_rule": record.extras.get("alpha_rule", "fixed"),
        "alpha_path": record.extras.get("alpha_path"),
        "alpha_target": record.extras.get("alpha_target"),
        "regulariser_run": problem.extras.get("regulariser_run", prepared.request.regulariser),
        "regulariser_rule": problem.extras.get("regulariser_rule", "given"),
        "objective": scalar(record.objective),
        "bregman_terms": [float(v) for v in record.bregman_terms[sample].tolist()],
        "reg_term": scalar(record.reg_term),
        "iterations": record.iteration,
        "stop_reason": (record.stop_reasons[sample]
                        if record.final and record.stop_reasons else None),
        "stop_rule": _stop_rule(prepared.request),
        "seconds": record.elapsed,
        "psnr": scalar(record.psnr),
        "ssim": scalar(record.ssim),
        # x and image hold only this sample, so their (1,) metrics are read at index 0
        "l2_norm": _first(metrics.l2_norm(x)),
        "tv_iso": _first(metrics.tv_iso(image)) if has_image else None,
        "tv_aniso": _first(metrics.tv_aniso(image)) if has_image else None,
        "discrepancy": scalar(record.discrepancy),
        "delta": prepared.delta,
        "delta_squared": prepared.delta_squared,
        "noise_norm": prepared.noise_norm,
        "decoder_psnr": prepared.decoder_psnr,
        # layer-wise: the alpha its input stage used and each stage's own stop (docs/LAYERWISE.md)
        "alpha_used": record.extras.get("alpha", prepared.problem.alpha),
        # the joint method's weight on the hidden Bregman terms (MATH.md §5.7)
        **({"hidden_weight": float(record.extras["hidden_weight"])}
           if "hidden_weight" in record.extras else {}),
        **({"hidden_weight_rule": record.extras["hidden_weight_rule"],
            "alpha_path_unweighted": record.extras.get("alpha_path_unweighted")}
           if "hidden_weight_rule" in record.extras else {}),
        # alpha "auto": seconds and iterations of the start, each search solve, the final one
        **({"time_split": record.extras["time_split"],
            "timings": _timings(record.extras["time_split"])}
           if record.extras.get("time_split") else {}),
        **({"stages": [{**st, "stop_reason": st["stop_reasons"][sample]}
                       for st in record.extras["stages"]]} if record.extras.get("stages") else {}),
    }


def _stop_rule(request: InversionRequest) -> str:
    """What a "tolerance" stop_reason measured, in words (result.json)."""
    from lbi_engine.solvers.base import TOL_MEANING

    return f"{TOL_MEANING[request.tol_mode]} < {request.tol:g} (tol_mode {request.tol_mode})"


def _timings(split: list[dict[str, Any]]) -> dict[str, float]:
    """Solver seconds per stage kind (start, alpha_search, final_solve), from time_split."""
    out = {"start": 0.0, "alpha_search": 0.0, "final_solve": 0.0}
    for stage in split:
        out[str(stage["stage"]).replace(" ", "_")] += float(stage["seconds"])
    return out


def _first(t: Tensor) -> float | None:
    value = float(t[0])
    return value if math.isfinite(value) else None
