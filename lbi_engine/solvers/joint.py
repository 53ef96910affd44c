"""Joint multi-layer inversion by coordinate descent (paper eqs. 13–15; MATH.md §5.3–5.4).

Each sweep: ``n_inner`` PDHG steps on x_0 against x_1, then one proximal-gradient step on
each auxiliary variable x_1 .. x_{L-1} in Gauss–Seidel order (new x_{l-1}, old x_{l+1}).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
from torch import Tensor

from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import CancelToken, IterateRecord, StopRule, relative_change
from lbi_engine.solvers.options import SolverOptions
from lbi_engine.solvers.pdhg import PAPER_PRIMAL, PrimalDualBlock

# Any tau_l < 2/||W_{l+1}||^2 makes the x_l step non-increasing (descent lemma, MATH.md §5.3).
AUX_SAFE = 1.9


def aux_step(
    layers: list,
    index: int,
    aux: list[Tensor],
    below: Tensor,
    above: Tensor,
    tau: float,
) -> Tensor:
    """The x_l update of MATH.md §5.3 (l = index + 1).

    ``below`` is the new x_{l-1}, ``above`` the old x_{l+1} (y_delta for the last one).
    """
    own, nxt = layers[index], layers[index + 1]
    x_l = aux[index]
    u = own.affine.apply(below)  # W_l x_{l-1} + b_l
    g = nxt.affine.adjoint(nxt.activation.sigma(nxt.affine.apply(x_l)) - above)
    v = (x_l - tau * (g - u)) / (1.0 + tau)
    return own.activation.prox(v, tau / (1.0 + tau))


def run_joint(
    problem: object,
    stop: StopRule,
    options: SolverOptions,
    init: dict | None,
    cancel: CancelToken | None,
    report_every: int,
) -> Iterator[IterateRecord]:
    layers = problem.network.layers
    depth = len(layers)
    init = init or {}
    monitor = RunMonitor(
        problem, "joint", stop, cancel, report_every, start_iteration=int(init.get("iteration", 0))
    )
    with torch.no_grad():
        x0 = init.get("x", problem.zeros_input())
        aux = list(init["aux"]) if init.get("aux") else problem.forward_aux(x0)
        aux = [layers[i].activation.project(a) for i, a in enumerate(aux)]
    block = PrimalDualBlock(layers[0], problem, options, x0, init.get("dual"))
    factor = PAPER_PRIMAL if options.steps == "paper" else AUX_SAFE
    taus = [
        options.step_scale * factor / max(float(layers[i + 1].affine.norm()) ** 2, 1e-30)
        for i in range(depth - 1)
    ]
    monitor.extras.update(tau_x=block.tau_x, tau_z=block.tau_z, tau_aux=taus)
    if block.warning:
        monitor.extras["warning"] = block.warning

    def record(final: bool = False) -> IterateRecord:
        monitor.extras["dual"] = block.z
        return monitor.record(block.x, aux, final=final)

    yield record()
    monitor.watch.start()
    with torch.no_grad():
        while monitor.before_iteration():
            x_before = block.x
            z_before = block.z
            data = aux[0] if depth > 1 else problem.y_delta
            for _ in range(options.n_inner):
                block.step(data, monitor)
            changes = []
            below = block.x
            new_aux = list(aux)
            for index in range(depth - 1):
                above = aux[index + 1] if index + 1 < depth - 1 else problem.y_delta
                candidate = aux_step(layers, index, new_aux, below, above, taus[index])
                (candidate,) = monitor.guard_finite([candidate], [aux[index]])
                candidate = monitor.freeze(candidate, aux[index])
                changes.append(relative_change(candidate, aux[index], stop.tol_mode))
                new_aux[index] = candidate
                below = candidate
            aux = new_aux
            monitor.iteration += 1
            dx = relative_change(block.x, x_before, stop.tol_mode)
            dz = relative_change(block.z, z_before, stop.tol_mode) if block.z is not None else None
            for change in changes:
                dz = change if dz is None else torch.maximum(dz, change)
            monitor.converged(dx, dz)
            if monitor.running and monitor.due():
                yield record()
    monitor.watch.pause()
    yield record(final=True)
