"""The final numbers of one run (:class:`RunMetrics`): what ``lbi_engine.api.final_metrics``
computes, ``SolveResult.metrics`` and the window show, and result.json holds under
``metrics`` (:meth:`RunMetrics.to_dict`, the file's keys). Torch-free: the window reads it
before the engine is loaded."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, TypedDict

#: A value of result.json as it is written: numbers, words, null, lists and objects of them.
JsonValue = float | int | str | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
#: One point of alpha "auto"'s path (its fields depend on the search that made it).
JsonObject = dict[str, JsonValue]


class StageTime(TypedDict):
    """One stage of alpha "auto"'s run (``solvers.alpha.time_split.RunStage``)."""

    stage: str
    iterations: int
    seconds: float
    alpha: float | None
    hidden_weight: float | None
    point: int | None


class LayerStage(TypedDict):
    """One stage of a layer-wise run: its iterations, the weight of its prior per sample
    (the input stage: alpha) and the rule that chose it, its momentum restarts, every
    sample's stop reason and this sample's."""

    stage: str
    iterations: int
    weight: list[float]
    weight_rule: str
    restarts: int
    stop_reasons: list[str]
    stop_reason: str

#: Written only when the run has them (a joint run's hidden weight, alpha "auto"'s time
#: split, layer-wise stages): result.json has no such key otherwise.
_WHEN_SET = ("hidden_weight", "time_split", "timings", "stages", "alpha_path_forward")
#: Written together, when the alpha search raised the hidden weight.
_RAISED = ("hidden_weight_rule", "alpha_path_unweighted")


@dataclass
class RunMetrics:
    """The numbers of one sample of a finished run (None where undefined: null in
    result.json). The defaults stand for what an older record did not hold.

    Attributes:
        method_run: the method that ran (what ``"auto"`` resolved to): ``"one-layer"``,
            ``"joint"``, ``"layerwise"``, ``"landweber"`` or ``"backprop"``.
        device_run: the device the problem ran on (``"cpu"``, ``"cuda:0"``).
        alpha: the weight the final solve used (the chosen one for alpha ``"auto"``).
        alpha_rule: how alpha was set: ``"fixed"``, or the rule that chose it
            (``"discrepancy"``, ``"quasi-optimality"``, ``"noise-scaled"``, with details).
        alpha_path: alpha ``"auto"``'s search: one entry per solve on the path (alpha,
            discrepancy, objective parts, iterations, seconds); None for a fixed alpha.
        alpha_target: the discrepancy principle's target tau * delta; None for other rules.
        alpha_path_forward: the continuation path's N(x): ``"translated module"`` (lbi's
            translation of the file's graph, checked against the lifted forward) or
            ``"lifted layers"``; None without a continuation path.
        regulariser_run: the regulariser that ran, described (what ``"auto"`` chose).
        regulariser_rule: why that regulariser: ``"given"`` or the rule of ``"auto"``.
        objective: the objective at the final iterate.
        bregman_terms: the Bregman distance of each layer at the final iterate.
        reg_term: the regulariser's value at the final iterate.
        iterations: iterations of the final solve (a warm start's count continues).
        stop_reason: why the run ended (``"tolerance"``, ``"max_iterations"``,
            ``"time_budget"``, ``"cancelled"``, ...); None for a record that was not final.
        stop_rule: what a ``"tolerance"`` stop measured, in words.
        seconds: solver time, the alpha search's solves included.
        psnr: PSNR (dB) against the ground truth; None without one.
        ssim: SSIM against the ground truth; None without one.
        l2_norm: the Euclidean norm of the reconstruction.
        tv_iso: its isotropic total variation (images only).
        tv_aniso: its anisotropic total variation (images only).
        discrepancy: the data residual at the final iterate (MATH.md §6).
        delta: the noise level delta (MATH.md §7); None for measured data.
        delta_squared: delta squared; None for measured data.
        noise_norm: the norm of the noise added; None for measured data.
        decoder_psnr: PSNR of the network's decoder on the same noisy code, for the zoo's
            autoencoders; None otherwise.
        alpha_used: the alpha the final solve used, as the record reported it (layer-wise:
            its input stage's).
        hidden_weight: the joint method's weight on the hidden Bregman terms (MATH.md
            §5.7); None when the run has no such weight.
        hidden_weight_rule: why the alpha search raised that weight; None when it did not.
        alpha_path_unweighted: the search at weight 1 before the raise; None without one.
        time_split: alpha ``"auto"``: seconds and iterations of the start, each search solve
            and the final solve; None for a fixed alpha.
        timings: solver seconds per stage kind (``start``, ``alpha_search``,
            ``final_solve``), summed from ``time_split``; None without it.
        stages: layer-wise: each stage's iterations, weight and stop reason; None for other
            methods.
    """

    method_run: str = ""
    device_run: str = ""
    alpha: float | None = None
    alpha_rule: str = "fixed"
    alpha_path: list[JsonObject] | None = None
    alpha_target: float | None = None
    alpha_path_forward: str | None = None
    regulariser_run: str | None = None
    regulariser_rule: str = "given"
    objective: float | None = None
    bregman_terms: list[float] = field(default_factory=list)
    reg_term: float | None = None
    iterations: int = 0
    stop_reason: str | None = None
    stop_rule: str = ""
    seconds: float = 0.0
    psnr: float | None = None
    ssim: float | None = None
    l2_norm: float | None = None
    tv_iso: float | None = None
    tv_aniso: float | None = None
    discrepancy: float | None = None
    delta: float | None = None
    delta_squared: float | None = None
    noise_norm: float | None = None
    decoder_psnr: float | None = None
    alpha_used: float | None = None
    hidden_weight: float | None = None
    hidden_weight_rule: str | None = None
    alpha_path_unweighted: list[JsonObject] | None = None
    time_split: list[StageTime] | None = None
    timings: dict[str, float] | None = None
    stages: list[LayerStage] | None = None

    def to_dict(self) -> dict[str, Any]:
        """result.json's ``metrics``: every field, but those of :data:`_WHEN_SET` only when
        set and the raised-weight pair only when the weight was raised."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for name in _WHEN_SET:
            if out[name] is None:
                del out[name]
        if self.hidden_weight_rule is None:
            for name in _RAISED:
                del out[name]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunMetrics:
        """The metrics of a result.json or a saved session (keys it lacks take their
        defaults; keys this version does not know are left out)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})

