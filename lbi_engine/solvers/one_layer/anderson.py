"""Safeguarded Anderson acceleration of the Condat–Vũ fixed-point map (type II, per sample).

PDHG is a fixed-point iteration u+ = T(u), u = (x, z), with T averaged. Anderson mixing
extrapolates from the last m secant pairs (du_i, dg_i) of the residual g(u) = T(u) - u:

    gamma = argmin || g_k - dG gamma ||_D,    u_{k+1} = T(u_k) - (dU + dG) gamma,

in the diagonal metric D = diag(1/tau_x, 1/tau_z) of the iteration. Safeguards, following
Zhang, O'Donoghue & Boyd (2020, "Globally convergent type-I Anderson acceleration for
nonsmooth fixed-point iterations"):

* a mixing step is taken only while the residual stays under the envelope
  D_ENV * ||g_0|| * (n + 1)^-(1 + EPS) (n: mixing steps so far), so the mixing steps are
  summable and, between them, the plain steps converge as Condat–Vũ does;
* a sample whose residual grows after a mixing step takes plain steps for the rest of the
  window; a singular least-squares system gives a plain step;
* the memory restarts every WINDOW iterations, counted on the absolute iteration number, so a
  run warm-started at a multiple of WINDOW continues exactly like an uninterrupted one.

After mixing, x is clipped to the box (if any) and z is projected onto the dual ball (TV), so
every reported iterate is feasible; the secant pairs use the projected points. The m x m
least-squares systems are solved in float64 with NumPy (a LAPACK call through torch costs
~0.25 ms on these sizes, NumPy ~10 us). Cost and benefit: benchmarks/RESULTS.md.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch
from torch import Tensor

WINDOW = 20  # memory restart period (iterations); a multiple of the default report period
D_ENV = 1e6  # envelope constant (as Zhang et al.): binds only on pathological runs
EPS = 1e-6
REG = 1e-8  # Tikhonov regularisation of the Gram matrix, relative to its mean diagonal


class MixedBlock(Protocol):
    """What Anderson mixing reads and calls of its ``one_layer.primal_dual.PrimalDualBlock`` (a
    protocol, not that class: ``one_layer.primal_dual`` imports this module)."""

    batch: int
    use_dual: bool
    tau_x: float
    tau_z: float
    @property
    def x_slots(self) -> list[Tensor]:
        """The iterate slots x[k]."""
    @property
    def x_pairs(self) -> list[Tensor]:
        """Per slot k: (2, B, *x_shape), the iterate and the change into it."""
    @property
    def z_pairs(self) -> list[Tensor]:
        """The same for the dual (empty without one)."""

    def project(self, k: int) -> None: ...


class Anderson:
    """Anderson mixing state for one PrimalDualBlock (buffers and views made once)."""

    def __init__(self, block: MixedBlock, memory: int) -> None:
        self.m = m = int(memory)
        batch = block.batch
        parts = 2 if block.use_dual else 1
        slots = [[block.x_pairs[k]] + ([block.z_pairs[k]] if block.use_dual else [])
                 for k in (0, 1)]
        like = block.x_slots[0]
        self._g: list[Tensor] = []  # per part: [dG | g_prev] (B, m+1, N) and dU + dG (B, m, N)
        self._c: list[Tensor] = []
        for part in slots[0]:
            n = part[0][0].numel()
            self._g.append(torch.zeros(batch, m + 1, n, dtype=like.dtype, device=like.device))
            self._c.append(torch.zeros(batch, m, n, dtype=like.dtype, device=like.device))
        self._g_t = [g.transpose(1, 2) for g in self._g]
        self._g_cols = [[g[:, j] for j in range(m + 1)] for g in self._g]
        self._c_cols = [[c[:, j] for j in range(m)] for c in self._c]
        # per slot k and part: (change view (B, N), iterate view (B, 1, N), iterate, change)
        self._views = [[(p[1].view(batch, -1), p[0].view(batch, 1, -1), p[0], p[1])
                        for p in slots[k]] for k in (0, 1)]
        self._parts = parts
        self._count = 0  # complete columns in this window (filled in order 0, 1, ...)
        self._next = 0  # ring position of the next column
        self._have_prev = False
        self._ok = np.ones(batch, dtype=bool)
        self._prev_res: np.ndarray | None = None
        self._last_mixed = np.zeros(batch, dtype=bool)
        self._ref: np.ndarray | None = None  # ||g_0|| per sample (envelope)
        self._mixed = np.zeros(batch)
        self.mixing_steps = 0  # total over samples, for reports

    def restart(self) -> None:
        self._count, self._next, self._have_prev = 0, 0, False
        self._ok[:] = True
        self._prev_res = None
        self._last_mixed[:] = False

    def apply(self, block: MixedBlock, cur: int, nxt: int, iteration: int) -> None:
        """Called after T wrote T(u) into slot nxt (its change g in the pair's second half)."""
        if iteration % WINDOW == 0:
            self.restart()
        m, j = self.m, self._next
        new, old = self._views[nxt], self._views[cur]
        for p in range(self._parts):
            g, g_cols, c_cols = new[p][0], self._g_cols[p], self._c_cols[p]
            if self._have_prev:  # complete the secant pair of the previous step
                torch.sub(g, g_cols[m], out=g_cols[j])
                torch.add(old[p][0], g_cols[j], out=c_cols[j])
            g_cols[m].copy_(g)
        if self._have_prev:
            self._count = min(self._count + 1, m)
            self._next = (j + 1) % m
        self._have_prev = True
        # Gram matrix of [dG | g] in the metric D: one batched product per part
        weights = (1.0 / block.tau_x, 1.0 / block.tau_z)
        gram = torch.bmm(self._g[0], self._g_t[0])
        if self._parts == 2:
            gram.baddbmm_(self._g[1], self._g_t[1], beta=weights[0], alpha=weights[1])
        else:
            gram.mul_(weights[0])
        gamma = self._coefficients(gram.cpu().numpy().astype(np.float64))
        if gamma is None:
            return
        like = block.x_slots[0]
        coef = torch.from_numpy(gamma).to(device=like.device, dtype=like.dtype)
        c = self._count
        for p in range(self._parts):
            new[p][1].baddbmm_(coef, self._c[p][:, :c], alpha=-1.0)
        block.project(nxt)
        for p in range(self._parts):  # the change actually made
            torch.sub(new[p][2], old[p][2], out=new[p][3])

    def _coefficients(self, gram: np.ndarray) -> np.ndarray | None:
        """(B, 1, c) mixing coefficients (0 for samples that take a plain step), or None."""
        m, c = self.m, self._count
        res = np.sqrt(np.maximum(gram[:, m, m], 0.0))  # ||g_k||_D
        if self._ref is None:
            self._ref = res.copy()
        if self._prev_res is not None:  # a mixing step that made the residual grow: stop
            self._ok &= ~(self._last_mixed & (res > self._prev_res))
        self._prev_res = res
        self._last_mixed = np.zeros_like(self._last_mixed)
        if c == 0:
            return None
        envelope = D_ENV * self._ref * (self._mixed + 1.0) ** -(1.0 + EPS)
        take = self._ok & (res <= envelope)
        if not take.any():
            return None
        a = gram[:, :c, :c].copy()
        rhs = gram[:, :c, m]
        diag = np.einsum("bii->bi", a)
        diag += (REG * np.maximum(diag.mean(axis=1), 1e-300))[:, None]
        try:
            gamma = np.linalg.solve(a, rhs[..., None])[..., 0]
        except np.linalg.LinAlgError:  # some sample's system is singular: least squares
            gamma = np.stack([np.linalg.lstsq(a[b], rhs[b], rcond=None)[0]
                              for b in range(a.shape[0])])
        take &= np.isfinite(gamma).all(axis=1)
        gamma[~take] = 0.0
        self._mixed += take
        self._last_mixed = take
        self.mixing_steps += int(take.sum())
        return gamma[:, None, :]
