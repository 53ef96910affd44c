"""PDHG (Condat–Vũ) for one layer: min_x B_Psi(data, W x + b) + alpha R(x)  (MATH.md §3).

The x_0 block of the joint method is the same iteration with the next auxiliary variable as
data, so :class:`PrimalDualBlock` is shared by both.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import (
    CancelToken,
    IterateRecord,
    StopReason,
    StopRule,
    relative_change,
)
from lbi_engine.solvers.options import SolverOptions

# Primal step for a regulariser without a dual part (plain forward-backward): any
# tau < 2/L converges; 1.9/L keeps a margin for the 1 % slack of power iteration.
FORWARD_BACKWARD_SAFE = 1.9
PAPER_PRIMAL = 1.99


def step_sizes(rule: str, lipschitz: float, alpha: float, k_norm_sq: float) -> tuple[float, float]:
    """(tau_x, tau_z) for f L-smooth and h(alpha K x), by rule (see SolverOptions.steps).

    Condat–Vũ converges when 1/tau_x - tau_z ||alpha K||^2 > L/2 (MATH.md §3.2).
    """
    lipschitz = max(float(lipschitz), 1e-30)
    if k_norm_sq <= 0 or alpha <= 0:  # no dual part: forward-backward splitting
        factor = PAPER_PRIMAL if rule == "paper" else FORWARD_BACKWARD_SAFE
        return factor / lipschitz, 0.0
    if rule == "paper":
        return PAPER_PRIMAL / lipschitz, 1.0 / (8.0 * alpha)
    if rule == "conservative":
        tau_z = 1.0 / (8.0 * alpha)
        return 0.99 / (lipschitz / 2.0 + tau_z * alpha**2 * k_norm_sq), tau_z
    # "safe": balanced; 1/tau_x - tau_z alpha^2 ||K||^2 = L - 0.495 L > L/2.
    return 1.0 / lipschitz, 0.99 * lipschitz / (2.0 * alpha**2 * k_norm_sq)


def paper_steps_warning(lipschitz: float, alpha: float, k_norm_sq: float) -> str | None:
    """The paper's steps are provably convergent only when ||W||^2 > 398 alpha ||K||^2/8."""
    if alpha <= 0 or k_norm_sq <= 0:
        return None
    bound = 398.0 * alpha * k_norm_sq / 8.0
    if lipschitz > bound:
        return None
    return (
        f"the paper's step sizes are not provably convergent here (||W||^2 = {lipschitz:.4g} "
        f"<= 398 alpha ||K||^2/8 = {bound:.4g}); use steps='safe' if the run oscillates"
    )


class PrimalDualBlock:
    """One Condat–Vũ iteration on x for a single lifted layer and the problem's regulariser."""

    def __init__(
        self,
        layer: object,
        problem: object,
        options: SolverOptions,
        x: Tensor,
        z: Tensor | None = None,
    ) -> None:
        self.affine = layer.affine
        self.activation = layer.activation
        self.reg = problem.reg
        self.alpha = float(problem.alpha)
        self.tol_mode = "relative"
        self.lipschitz = float(self.affine.norm()) ** 2
        self.use_dual = self.reg.has_dual and self.alpha > 0
        k_norm_sq = self.reg.K_norm_sq() if self.use_dual else 0.0
        self.tau_x, self.tau_z = step_sizes(options.steps, self.lipschitz, self.alpha, k_norm_sq)
        self.tau_x *= options.step_scale
        self.warning = (
            paper_steps_warning(self.lipschitz, self.alpha, k_norm_sq)
            if options.steps == "paper"
            else None
        )
        self.x = x
        if self.use_dual:
            self.z = z if z is not None else torch.zeros_like(self.reg.K(x))
        else:
            self.z = None

    def step(self, data: Tensor, monitor: RunMonitor) -> tuple[Tensor, Tensor | None]:
        """One iteration; returns the per-sample changes of x and z.

        x+ = prox_{tau g}(x - tau (grad f(x) + alpha K^T z)),
        z+ = prox_{tau_z h*}(z + tau_z alpha K (2 x+ - x)).
        """
        x, z = self.x, self.z
        residual = self.activation.sigma(self.affine.apply(x)) - data
        grad = self.affine.adjoint(residual)
        if self.use_dual:
            grad = grad + self.alpha * self.reg.KT(z)
        x_new = self.reg.prox_primal(x - self.tau_x * grad, self.tau_x, self.alpha)
        if self.use_dual:
            extrapolated = self.reg.K(2.0 * x_new - x)
            z_new = self.reg.prox_dual(
                z + (self.tau_z * self.alpha) * extrapolated, self.tau_z, self.alpha
            )
            x_new, z_new = monitor.guard_finite([x_new, z_new], [x, z])
            x_new, z_new = monitor.freeze(x_new, x), monitor.freeze(z_new, z)
            dz = relative_change(z_new, z, monitor.stop.tol_mode)
        else:
            (x_new,) = monitor.guard_finite([x_new], [x])
            x_new = monitor.freeze(x_new, x)
            z_new, dz = None, None
        dx = relative_change(x_new, x, monitor.stop.tol_mode)
        self.x, self.z = x_new, z_new
        return dx, dz

    def optimality(self, data: Tensor) -> Tensor:
        """Per-sample fixed-point residual ||x - prox(x - tau(grad f + alpha K^T z))|| / tau,
        relative to ||grad f||: zero exactly at a saddle point."""
        x = self.x
        grad_f = self.affine.adjoint(self.activation.sigma(self.affine.apply(x)) - data)
        grad = grad_f + self.alpha * self.reg.KT(self.z) if self.use_dual else grad_f
        moved = self.reg.prox_primal(x - self.tau_x * grad, self.tau_x, self.alpha)
        batch = x.shape[0]
        res = (x - moved).reshape(batch, -1).norm(dim=1) / self.tau_x
        return res / grad_f.reshape(batch, -1).norm(dim=1).clamp_min(1e-12)


def run_pdhg(
    problem: object,
    stop: StopRule,
    options: SolverOptions,
    init: dict | None,
    cancel: CancelToken | None,
    report_every: int,
) -> Iterator[IterateRecord]:
    """PDHG on a one-layer network (the paper's eq. 12)."""
    if problem.depth != 1:
        raise InputError(
            f"method 'pdhg' inverts a single layer, but '{problem.network.name}' has "
            f"{problem.depth} layers; use method 'joint' or 'layerwise'."
        )
    init = init or {}
    start = int(init.get("iteration", 0))
    monitor = RunMonitor(problem, "pdhg", stop, cancel, report_every, start_iteration=start)
    x0 = init.get("x", problem.zeros_input())
    block = PrimalDualBlock(problem.network.layers[0], problem, options, x0, init.get("dual"))
    _describe_steps(monitor, block)
    yield _record(monitor, block, problem)
    monitor.watch.start()
    with torch.no_grad():
        while monitor.before_iteration():
            dx, dz = block.step(problem.y_delta, monitor)
            monitor.iteration += 1
            monitor.converged(dx, dz)
            if stop.residual_tol is not None and monitor.due():
                small = block.optimality(problem.y_delta) < stop.residual_tol
                monitor.finish(small, StopReason.TOLERANCE)
            if monitor.running and monitor.due():
                yield _record(monitor, block, problem)
    monitor.watch.pause()
    yield _record(monitor, block, problem, final=True)


def _describe_steps(monitor: RunMonitor, block: PrimalDualBlock) -> None:
    monitor.extras["tau_x"] = block.tau_x
    monitor.extras["tau_z"] = block.tau_z
    monitor.extras["lipschitz"] = block.lipschitz
    if block.warning:
        monitor.extras["warning"] = block.warning


def _record(
    monitor: RunMonitor, block: PrimalDualBlock, problem: object, final: bool = False
) -> IterateRecord:
    monitor.extras["dual"] = block.z
    if problem.depth == 1 and (final or monitor.due()):
        with torch.no_grad():
            monitor.extras["optimality"] = block.optimality(problem.y_delta)
    return monitor.record(block.x, [], final=final)
