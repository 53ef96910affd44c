"""The prepared run (``PreparedRun``, what :func:`lbi_engine.api.prepare` returns), the
numbers of its finished run (:func:`final_metrics`, a :class:`RunMetrics`: result.json's
``metrics``) and the arrays it turns into display images: an input in [0, 1] space, feature
maps tiled in a grid."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.problem import InversionProblem
from lbi_engine.request import InversionRequest
from lbi_engine.results.run_metrics import JsonObject, LayerStage, RunMetrics, StageTime
from lbi_engine.solvers import resolve_method
from lbi_engine.solvers.base import IterateRecord

#: The methods that run on a network with residual additions or concatenation (MATH.md §5.6).
GRAPH_METHODS = ("joint", "layerwise", "backprop")


def method_for(asked: str, problem: InversionProblem) -> str:
    """The method a run of ``asked`` runs on ``problem`` (``"auto"`` and the alias ``"pdhg"``
    resolved), refused here, in the words of ``asked``, when it cannot run there: a method
    for chains on a graph, layer-wise without what it needs (before anything runs)."""
    method = resolve_method(asked, problem)
    if not getattr(problem.network, "is_chain", True) and method not in GRAPH_METHODS:
        from lbi_engine.solvers.joint.method import graph_refusal

        raise InputError(graph_refusal(f"method {asked!r}"))
    if method == "layerwise":
        from lbi_engine.solvers.layerwise import check_ready

        check_ready(problem)
    return method


@dataclass(kw_only=True)
class PreparedRun:
    """A request made concrete: network loaded, problem built, references computed.

    Attributes:
        request: the run record it was prepared from.
        problem: the inversion problem the solver runs on.
        method: the method that runs, resolved once here from ``request.method`` for this
            problem (``"auto"`` and the alias ``"pdhg"`` never reach the solver).
        bundle: the loaded network (``lbi_engine.models.zoo.ModelBundle``: encoder,
            preprocessing, decoder); None for a problem built by hand.
        truth_image: the ground truth in display space; None without one.
        decoder_image: the network's decoder applied to the noisy code; None without one.
        decoder_psnr: that image's PSNR against the truth; None without either.
        delta: the noise level delta = sqrt(delta_squared) (MATH.md §7); None for measured
            data.
        delta_squared: the Bregman distance of the noisy code from the clean one's
            pre-activation (MATH.md §7); None for measured data.
        noise_norm: ||y_delta - y||, the norm of the noise after projection (the
            discrepancy principle's delta); None for measured data.
        y_clean: the noise-free code; None for measured data.
    """

    request: InversionRequest
    problem: InversionProblem
    method: str
    bundle: Any = None
    truth_image: np.ndarray | None = None
    decoder_image: np.ndarray | None = None
    decoder_psnr: float | None = None
    delta: float | None = None
    delta_squared: float | None = None
    noise_norm: float | None = None
    y_clean: Tensor | None = None

    def with_request(self, request: InversionRequest) -> PreparedRun:
        """The same problem under another request's solver settings (method, stop rule,
        report interval), its method resolved for this problem."""
        return dataclasses.replace(self, request=request,
                                   method=method_for(request.method, self.problem))

    def final_metrics(self, record: IterateRecord, sample: int = 0) -> RunMetrics:
        """The numbers of one sample of the finished run (:func:`final_metrics`)."""
        return final_metrics(self, record, sample)

    def to_display(self, x: Any) -> np.ndarray:
        """A network-space input (one sample, numpy or tensor, with or without batch dim) as
        a display image in [0, 1] space: (H, W) for one channel, else (C, H, W)."""
        array = x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)
        shape = self.problem.image_shape or self.problem.input_shape
        array = array.reshape(shape).astype(np.float32, copy=False)
        array = self.bundle.preprocessing.undo(array)
        array = np.asarray(array, dtype=np.float32)
        return array[0] if array.ndim == 3 and array.shape[0] == 1 else array

    def aux_images(self, aux: list[Any]) -> list[np.ndarray]:
        """Auxiliary variables as 2-D arrays: feature maps (C, H, W) tiled in a grid,
        vectors shaped into the most square rectangle."""
        return [
            tile_feature_maps(np.asarray(a.detach().cpu() if isinstance(a, Tensor) else a))
            for a in aux
        ]


def final_metrics(prepared: PreparedRun, record: IterateRecord, sample: int = 0) -> RunMetrics:
    """The numbers of one sample of a finished run, as result.json holds them
    (:meth:`RunMetrics.to_dict`; None where undefined)."""
    from lbi_engine import metrics as measures

    problem = prepared.problem
    extras = record.extras
    x = record.x[sample : sample + 1]
    image = x.reshape(1, *(problem.image_shape or problem.input_shape))

    def scalar(t: Tensor | None) -> float | None:
        if t is None:
            return None
        value = float(t[sample]) if t.dim() else float(t)
        return value if math.isfinite(value) else None

    has_image = problem.image_shape is not None
    choice = record.choice
    # the alpha search raised the hidden weight
    raised = choice is not None and choice.hidden_weight_rule is not None
    split = [s.to_dict() for s in choice.time_split] if choice and choice.time_split else None
    return RunMetrics(
        method_run=prepared.method,
        device_run=str(problem.device),
        alpha=float(problem.alpha if choice is None else choice.alpha),
        alpha_rule="fixed" if choice is None else choice.rule,
        alpha_path=None if choice is None else cast("list[JsonObject] | None", choice.path),
        alpha_target=None if choice is None else choice.target,
        alpha_path_forward=None if choice is None else choice.path_forward,
        regulariser_run=problem.extras.get("regulariser_run", prepared.request.regulariser),
        regulariser_rule=problem.extras.get("regulariser_rule", "given"),
        objective=scalar(record.objective),
        bregman_terms=[float(v) for v in record.bregman_terms[sample].tolist()],
        reg_term=scalar(record.reg_term),
        iterations=record.iteration,
        stop_reason=(record.stop_reasons[sample]
                     if record.final and record.stop_reasons else None),
        stop_rule=_stop_rule(prepared.request),
        seconds=record.elapsed,
        psnr=scalar(record.psnr),
        ssim=scalar(record.ssim),
        # x and image hold only this sample, so their (1,) metrics are read at index 0
        l2_norm=_first(measures.l2_norm(x)),
        tv_iso=_first(measures.tv_iso(image)) if has_image else None,
        tv_aniso=_first(measures.tv_aniso(image)) if has_image else None,
        discrepancy=scalar(record.discrepancy),
        delta=prepared.delta,
        delta_squared=prepared.delta_squared,
        noise_norm=prepared.noise_norm,
        decoder_psnr=prepared.decoder_psnr,
        # layer-wise: the alpha its input stage used and each stage's own stop (docs/LAYERWISE.md)
        alpha_used=problem.alpha if choice is None else choice.alpha,
        # the joint method's weight on the hidden Bregman terms (MATH.md §5.7)
        hidden_weight=record.hidden_weight,
        hidden_weight_rule=choice.hidden_weight_rule if choice and raised else None,
        alpha_path_unweighted=cast("list[JsonObject] | None", choice.path_unweighted)
        if choice and raised else None,
        # alpha "auto": seconds and iterations of the start, each search solve, the final one
        time_split=cast("list[StageTime]", split) if split else None,
        timings=_timings(split) if split else None,
        # the layer-wise method's stage summaries, with this sample's stop reason
        stages=[cast(LayerStage, {**st, "stop_reason": st["stop_reasons"][sample]})
                for st in extras["stages"]] if extras.get("stages") else None,
    )


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


def tile_feature_maps(array: np.ndarray) -> np.ndarray:
    """(C, H, W) -> grid image with a 1-px gap; (N,) -> rows x cols; one sample."""
    if array.ndim >= 1 and array.shape[0] == 1 and array.ndim in (2, 4):
        array = array[0]
    if array.ndim == 3:
        channels, height, width = array.shape
        cols = math.ceil(math.sqrt(channels))
        rows = math.ceil(channels / cols)
        grid = np.full((rows * (height + 1) - 1, cols * (width + 1) - 1), np.nan, np.float32)
        for c in range(channels):
            r, q = divmod(c, cols)
            grid[
                r * (height + 1) : r * (height + 1) + height,
                q * (width + 1) : q * (width + 1) + width,
            ] = array[c]
        return grid
    flat = array.reshape(-1).astype(np.float32)
    cols = math.ceil(math.sqrt(flat.size))
    rows = math.ceil(flat.size / cols)
    padded = np.full(rows * cols, np.nan, np.float32)
    padded[: flat.size] = flat
    return padded.reshape(rows, cols)


def squeeze_display(array: np.ndarray) -> np.ndarray:
    while array.ndim > 2 and array.shape[0] == 1:
        array = array[0]
    return array
