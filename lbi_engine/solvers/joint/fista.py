"""Accelerated proximal gradient on all blocks of the lifted objective at once (joint method).

    E(x_0, .., x_{L-1}) = f + alpha TV(x_0) + sum_l Psi_l(x_l),
    f = sum_l [1/2 ||x_l||^2 + F*_l(z_l) - <x_l, z_l>],  z_l = W_l x_{l-1} + b_l,  x_L = y_delta

(MATH.md §1.2, §5.1; the 1/2 ||y||^2 + Psi_L(y) of the last layer is a constant). f is C^1:

    grad_{x_0} f = W_1^T (sigma_1(z_1) - x_1),
    grad_{x_l} f = (x_l - z_l) + W_{l+1}^T (sigma_{l+1}(z_{l+1}) - x_{l+1}),

which costs one product with every W_l and one with every W_l^T: the same as one sweep of
coordinate descent. With the block steps 1/m_l, m_0 = ||W_1||^2 + ||W_1||,
m_l = 1 + ||W_{l+1}||^2 + ||W_l|| + ||W_{l+1}|| (block diagonal dominance of
diag(m) - hess f, since sigma' in [0, 1] for a prox activation), a FISTA step on all blocks
with the O'Donoghue–Candès gradient restart needs 5-10x fewer steps than the Gauss–Seidel
sweeps (docs/LAYERWISE.md §Joint). The TV prox of the x_0 block is the TV regulariser's own
(``TotalVariation.fgp``: FGP on its dual, warm-started at the last dual, stopped by a
duality-gap test relative to the step; compiled on the CPU, torch elsewhere), as in the
accelerated one-layer method. At a fixed point of the whole iteration the dual is a fixed
point of FGP, so the limit is exact; ``dual`` is that dual (in the unit ball), so
alpha K^T dual + grad_{x_0} f = 0 there. With a box [lo, hi] the box is inside the prox
(constrained ROF). The learned Gaussian input prior is
smooth and joins f instead (``_smooth_prior``: per-pixel steps, then the clip onto its box).
With its TV term (R = G + gamma TV) the x_0 step is then the prox of alpha gamma TV + box in
that per-pixel metric diag(1/tau), TV's FGP with the primal map clip(v + w lam div p),
w = tau / max tau (``_metric_tv_prox``; MATH.md §4.3).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import Tensor

from lbi_engine.operators import AffineMap
from lbi_engine.operators.momentum import Momentum, ScalarMomentum
from lbi_engine.protocols import Problem
from lbi_engine.regularisers import GaussianPrior, TotalVariation, TVProx
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers.joint.graph import graph_bounds, graph_gradient
from lbi_engine.solvers.joint.one_sample import OneSampleGradient
from lbi_engine.solvers.joint.records import records_objective
from lbi_engine.solvers.joint.sparse_maps import sparse_or_self

if TYPE_CHECKING:  # imports numba: imported at run time only when the step is made
    from lbi_engine.solvers.joint.compiled_step import FusedStep


def supported(problem: Problem, options: SolverOptions) -> bool:
    """TV (a box allowed: the FGP prox clips) or the Gaussian input prior (its own prox),
    one PDHG step per sweep, more than one layer."""
    inner = getattr(problem.reg, "inner", None)
    return (problem.depth > 1 and options.steps in ("auto", "accelerated")
            and options.n_inner == 1 and int(getattr(options, "anderson", 0)) == 0
            and isinstance(inner, (TotalVariation, GaussianPrior))
            and float(problem.alpha) > 0 and getattr(problem.reg, "image_shape", None)
            is not None)


class JointFista:
    """State of the accelerated joint iteration: iterates ``xs`` = [x_0, x_1, .., x_{L-1}].

    All blocks live side by side in one (B, N) buffer per iterate (``xs`` are views into it),
    so that the momentum, the restart test and the gradient step of every block are one
    tensor operation each: on the CPU a step on a 28x28 image is dominated by per-operation
    overhead, not arithmetic (docs/LAYERWISE.md §Joint).
    """

    def __init__(self, problem: Problem, xs: list[Tensor], dual: Tensor | None,
                 step_scale: float, x_prev: Tensor | None = None,
                 momentum: Tensor | None = None) -> None:
        """``x_prev`` (the previous iterates, flattened and concatenated) and ``momentum``
        ([t; last momentum coefficient] per sample) come from :meth:`momentum_state` of an
        earlier run, so that a warm-started run continues the same iteration exactly."""
        self.problem = problem
        self.layers = problem.network.layers
        self.reg = problem.reg
        self.alpha = float(problem.alpha)
        network = problem.network
        depth = len(self.layers)
        # a graph network (residual additions, concatenation; MATH.md §5.6): its terms
        self.graph_maps: list[list[tuple[int, Any]]] | None = None
        if not getattr(network, "is_chain", True):
            self.graph_maps = [[(j, sparse_or_self(cast(AffineMap, amap), xs[0]))
                                for j, amap in network.terms(i)]
                               for i in range(depth)]
            bounds = graph_bounds(network)
        else:
            norms = [float(layer.affine.norm()) for layer in self.layers]
            bounds = [norms[0] ** 2 + norms[0]] + [
                1.0 + norms[i] ** 2 + norms[i - 1] + norms[i] for i in range(1, depth)
            ]
        self.taus = [step_scale / m for m in bounds]
        self.lam = self.taus[0] * self.alpha
        self.k_norm_sq = float(self.reg.K_norm_sq())
        inner = self.reg.inner
        self._tv = isinstance(inner, TotalVariation)  # else the Gaussian prior (smooth)
        self._lo, self._hi = float(inner.lo), float(inner.hi)  # +-inf: no box
        like = xs[0]
        batch = like.shape[0]
        self._shapes = [tuple(x.shape) for x in xs]
        self._sizes = [x[0].numel() for x in xs]
        self.n0 = self._sizes[0]
        # Four (B, N) slots rotate between x, the previous x, the new x and scratch; y and
        # the gradient have their own. Block views of every slot are made once.
        self.slots = [self._flat(xs) for _ in range(4)]
        self.slot_views = [self._views(slot) for slot in self.slots]
        self.slot_x, self.slot_prev, self.slot_new, self.slot_scratch = 0, 1, 2, 3
        self.y = torch.empty_like(self.slots[0])
        self.y_views = self._views(self.y)
        self.grad = torch.empty_like(self.y)
        self.grad_views = self._views(self.grad)
        # FISTA's momentum with the restart (``operators.momentum``): (B,) tensors, or Python
        # floats rounded to the dtype for one sample
        state = None
        if x_prev is not None and momentum is not None:
            self._prev.copy_(x_prev.reshape(batch, -1))
            state = momentum.reshape(2, batch)
        rule = Momentum(batch, like, state)
        torch.addcmul(self._x, rule.coef.reshape(-1, 1), self._x - self._prev, out=self.y)
        self.momentum: Momentum | ScalarMomentum = rule
        # the per-coordinate step (each block's tau over its entries)
        self.tau = torch.cat([torch.full((n,), t, dtype=like.dtype, device=like.device)
                              for n, t in zip(self._sizes, self.taus, strict=True)])
        self._prior = self._smooth_prior(bounds[0], step_scale, like)
        if batch == 1 and like.dtype in (torch.float32, torch.float64):
            self.momentum = ScalarMomentum(like.dtype, float(rule.t[0]), float(rule.coef[0]))
        # every auxiliary block's prox a projection onto x >= 0 (ReLU): one clamp for all
        self.relu_aux = all(type(layer.activation).__name__ == "ReLU"
                            for layer in self.layers[:-1])
        # tanh/sigmoid blocks: their root-solved prox in one compiled loop per block
        self._aux_prox = _compiled_aux_proxes(self.layers, like)
        self._offsets = [sum(self._sizes[:i]) for i in range(len(self._sizes) + 1)]
        # the same maps, small convolutions as CSR matrices (2-5x cheaper on the CPU)
        # (a LiftedNetwork's layers hold AffineMaps; the Layer protocol promises an Operator)
        self.maps = [sparse_or_self(cast(AffineMap, layer.affine), like) for layer in self.layers]
        # one sample: the gradient on buffers made once, on flat 1-D views of y and grad
        self.one = None if self.graph_maps is not None else \
            OneSampleGradient.build(self.layers, self.maps, problem.y_delta, batch)
        self.y_flat = [part.view(-1) for part in self.y[0].split(self._sizes)]
        self.slot_flat = [[part.view(-1) for part in slot[0].split(self._sizes)]
                          for slot in self.slots]  # per slot, for the records
        self.grad_flat = [part.view(-1) for part in self.grad[0].split(self._sizes)]
        # the TV prox of the x_0 block, its backend (compiled on the CPU) chosen once here;
        # ``dual`` is its warm-started dual
        self.tv_prox: TVProx | None = None
        if self._tv:
            assert isinstance(inner, TotalVariation)
            self.tv_prox = inner.fgp(batch, tuple(self.reg.image_shape), like)
        elif isinstance(inner, GaussianPrior) and inner.tv > 0:
            self.tv_prox = self._metric_tv_prox(inner.tv, batch, like)
        k_shape = self.reg.K(xs[0]).shape
        self.dual = self.tv_prox.dual if self.tv_prox is not None else \
            torch.zeros(k_shape, dtype=like.dtype, device=like.device)
        if dual is not None:
            self.dual.copy_(dual.reshape(k_shape))
        self.inner_steps = 0
        self.zx: list[Tensor] | None = None
        self.zx_views: list[list[Tensor]] = []
        self._fused = self._fused_step()

    def _smooth_prior(self, bound: float, step_scale: float, like: Tensor
                      ) -> Callable[[Tensor], Tensor] | None:
        """For the Gaussian input prior: alpha Sigma^{-1} (x_0 - mu) as a map (B, n0) -> (B, n0),
        after setting the x_0 block's step per pixel to step_scale / (m_0 + alpha / d_i).

        Why the gradient and not the prox: the prior is smooth, and Sigma^{-1} <= diag(d)^{-1}
        (Sigma = U U^T + diag(d)), so m_0 I + alpha diag(d)^{-1} majorises the x_0 block's
        Hessian (block diagonal dominance as for m_0) and the step is FISTA in that diagonal
        metric, whose projection onto a box is the clip: one product with Sigma^{-1} per step,
        where the box-constrained prox needs an inner loop of them. None for TV."""
        if self._tv:
            return None
        inner = self.reg.inner
        assert isinstance(inner, GaussianPrior)  # supported() admits TV or the Gaussian prior
        prior, alpha = inner.prior, self.alpha
        self.tau[:self.n0] = step_scale / (bound + alpha * prior.inverse_diag_on(like))
        mean = prior.mean_on(like)

        def gradient(y0: Tensor) -> Tensor:
            return prior.precision_apply(y0 - mean).mul_(alpha)

        return gradient

    def _metric_tv_prox(self, gamma: float, batch: int, like: Tensor) -> TVProx:
        """The x_0 step's prox for the Gaussian prior + gamma TV: with the per-pixel steps tau
        of ``_smooth_prior`` (the metric M = diag(1/tau) of the smooth part's FISTA step),
        argmin_u 1/2 ||u - v||^2_M + alpha gamma TV(u) + box. Scaled by tau_max it is
        1/2 sum (u_i - v_i)^2 / w_i + lam TV(u) + box, w = tau / tau_max in (0, 1] and
        lam = alpha gamma tau_max: phi = the weighted distance + box is 1-strongly convex
        (w <= 1), so TV's FGP runs with the primal map u(p) = clip(v + w lam div p), the
        1-dimensional minimiser of each pixel's convex piece on its interval (``_tv_prox``'s
        weight: compiled on the CPU, torch elsewhere). (The fused one-sample step is TV's
        only: it knows no Gaussian gradient.)"""
        shape = tuple(self.reg.image_shape)
        tau0 = self.tau[:self.n0]
        top = float(tau0.max())
        self.lam = self.alpha * gamma * top
        return TVProx(True, self._lo, self._hi, batch, shape, like.dtype, like.device,
                      weight=tau0 / top)

    # -- flat buffers and their block views ------------------------------------------------
    def _flat(self, blocks: list[Tensor]) -> Tensor:
        batch = blocks[0].shape[0]
        return torch.cat([b.reshape(batch, -1) for b in blocks], dim=1)

    def _views(self, flat: Tensor) -> list[Tensor]:
        return [part.view(shape) for part, shape in
                zip(flat.split(self._sizes, dim=1), self._shapes, strict=True)]

    @property
    def _x(self) -> Tensor:
        return self.slots[self.slot_x]

    @property
    def _prev(self) -> Tensor:
        return self.slots[self.slot_prev]

    @property
    def xs(self) -> list[Tensor]:
        return self.slot_views[self.slot_x]

    @property
    def x_flat(self) -> Tensor:
        return self.slots[self.slot_x]

    @property
    def new_flat(self) -> Tensor:
        """The last step's iterate as one (B, N) tensor (its blocks are what step() returned)."""
        return self.slots[self.slot_new]

    @property
    def ys(self) -> list[Tensor]:
        return self.y_views

    @property
    def prev(self) -> list[Tensor]:
        return self.slot_views[self.slot_prev]

    # -- the iteration -----------------------------------------------------------------------
    def gradient(self, ys: list[Tensor]) -> list[Tensor]:
        """grad f at ``ys`` (blocks), as blocks of one (B, N) tensor (a fresh one)."""
        grad = torch.empty_like(self.grad)
        self._gradient(ys, self._views(grad))
        return self._views(grad)

    def _gradient(self, ys: list[Tensor], g_blocks: list[Tensor]) -> None:
        if self.graph_maps is not None:
            return self._graph_gradient(ys, g_blocks)
        layers, depth, maps = self.layers, len(self.layers), self.maps
        z_prev = None
        for i, layer in enumerate(layers):
            z = maps[i].apply(ys[i])
            target = ys[i + 1] if i + 1 < depth else self.problem.y_delta
            g_blocks[i].copy_(maps[i].adjoint(layer.activation.sigma(z) - target)
                              .reshape(g_blocks[i].shape))
            if z_prev is not None:  # the x_i - z_i part of the Bregman term of layer i
                g_blocks[i].add_(ys[i]).sub_(z_prev.reshape(ys[i].shape))
            z_prev = z

    def _graph_gradient(self, ys: list[Tensor], g_blocks: list[Tensor]) -> None:
        assert self.graph_maps is not None
        graph_gradient(self.layers, self.graph_maps, self.problem.y_delta, ys, g_blocks)

    def objective_parts(self) -> dict[str, Tensor]:
        """``problem.objective_parts`` at the current iterates (``records``)."""
        return records_objective(self)

    def tv_value(self, x0: Tensor) -> Tensor:
        """R(x_0) per sample (the prox's TV loop; the iterate is in the box, so the raw value
        is the value)."""
        if self.tv_prox is None or not self._tv:
            return self.reg.value(x0)
        return self.tv_prox.value(x0)

    def _tv_prox(self, v: Tensor, y: Tensor) -> Tensor:
        """The TV (+ box) prox of ``v`` with weight lam, warm-started at ``dual``; ``y`` is
        the point the step started from (the prox's accuracy is relative to u - y)."""
        prox = self.tv_prox
        assert prox is not None  # step() calls this for TV only
        prox.v.copy_(v.reshape(prox.v.shape))
        prox.y.copy_(y.reshape(prox.y.shape))
        self.inner_steps += prox(self.lam)
        return prox.u

    def step(self) -> list[Tensor]:
        """The new iterates (not yet accepted): one prox-gradient step from ``ys``."""
        if self.one is not None:
            self.one(self.y_flat, self.grad_flat)
        else:
            self._gradient(self.y_views, self.grad_views)
        new = self.slots[self.slot_new]
        blocks = self.slot_views[self.slot_new]
        if self._prior is not None:  # the Gaussian prior's gradient, then the box
            self.grad[:, :self.n0].add_(self._prior(self.y[:, :self.n0]))
            torch.addcmul(self.y, self.grad, self.tau, value=-1.0, out=new)
            if self.tv_prox is not None:  # its TV term: the metric prox, the box inside
                blocks[0].copy_(self._tv_prox(blocks[0], self.y_views[0])
                                .reshape(blocks[0].shape))
            elif self._lo > -math.inf or self._hi < math.inf:
                new[:, :self.n0].clamp_(min=self._lo if self._lo > -math.inf else None,
                                         max=self._hi if self._hi < math.inf else None)
        else:
            torch.addcmul(self.y, self.grad, self.tau, value=-1.0, out=new)
            blocks[0].copy_(self._tv_prox(blocks[0], self.y_views[0]).reshape(blocks[0].shape))
        if self.relu_aux:
            new[:, self.n0:].clamp_(min=0.0)
        else:
            for i in range(1, len(self.layers)):
                fast = self._aux_prox[i - 1]
                if fast is not None:  # in place on the block's columns of the slot
                    fast(new[:, self._offsets[i]:self._offsets[i + 1]], self.taus[i])
                else:
                    blocks[i].copy_(self.layers[i - 1].activation.prox(blocks[i], self.taus[i]))
        return blocks

    def accept(self, new: list[Tensor]) -> None:
        """Momentum with the gradient restart per sample (<y - x+, x+ - x> > 0 restarts)."""
        slot = self.slot_views[self.slot_new]
        for n, b in zip(new, slot, strict=True):
            if n is not b:  # a block replaced by the caller (frozen samples)
                b.copy_(n)
        self.accept_flat(self.slots[self.slot_new])

    def accept_flat(self, new: Tensor) -> None:
        """accept() for the step's iterate given as one (B, N) tensor."""
        mine = self.slots[self.slot_new]
        if new is not mine:
            mine.copy_(new)
        x, scratch = self._x, self.slots[self.slot_scratch]
        step = torch.sub(mine, x, out=scratch)
        dot = torch.sub(self.y, mine, out=self.grad).mul_(step).sum(dim=1)
        if isinstance(self.momentum, ScalarMomentum):  # one sample: Python numbers
            self._accept_scalar(float(dot), mine, step)
        else:
            coef = self.momentum.advance(dot > 0)
            torch.addcmul(mine, coef.reshape(-1, 1), step, out=self.y)
        # rotate: new -> x, x -> prev, prev -> free slot for the next step
        self.slot_x, self.slot_prev, self.slot_new = self.slot_new, self.slot_x, self.slot_prev

    def step_one(self) -> bool:
        """step() and accept_one() for one sample: the gradient on buffers (``one_sample``),
        everything after it in compiled loops (``compiled_step.FusedStep``) where numba is
        usable. Returns False, keeping the current iterate, when the step is not finite."""
        if self._fused is None:
            self.step()
            return self.accept_one()
        one, zx, zy = self.one, self.zx, self.zy
        assert one is not None and zx is not None  # _fused is only made with them
        # z at y = x + c (x - x_prev) from those of the iterates (z is affine in x), all
        # layers in one operation on the flat buffers
        assert isinstance(self.momentum, ScalarMomentum)  # _fused is made for one sample
        coef = self.momentum.coef
        if coef == 0.0:
            zy.copy_(zx[self.slot_x])
        else:
            torch.lerp(zx[self.slot_prev], zx[self.slot_x], 1.0 + coef, out=zy)
        one.from_pre_activations(self.y_flat, self.zy_views, self.grad_flat)
        dot = self._fused.step(self)
        if not math.isfinite(dot):
            return False
        one.forward_into(self.slot_flat[self.slot_new], self.zx_views[self.slot_new])  # W x+ + b
        self.slot_x, self.slot_prev, self.slot_new = self.slot_new, self.slot_x, self.slot_prev
        return True

    def _fused_step(self) -> FusedStep | None:
        """A ``compiled_step.FusedStep`` for one sample with ReLU auxiliary blocks on the CPU
        with numba (its kernels loaded here, outside any stopwatch); else None."""
        if self.one is None or not self.relu_aux or not self._tv or self.tv_prox is None or \
                not self.tv_prox.compiled:
            return None
        from lbi_engine.solvers.joint.compiled_step import FusedStep

        # the pre-activations W_l x_l + b_l of each slot's iterate, and of y: one flat buffer
        # each, with per-layer views
        sizes = [int(z.numel()) for z in self.one.z]
        self.zx = [torch.empty(sum(sizes), dtype=self.y.dtype) for _ in self.slots]
        self.zy = torch.empty(sum(sizes), dtype=self.y.dtype)
        self.zx_views = [list(z.split(sizes)) for z in self.zx]
        self.zy_views = list(self.zy.split(sizes))
        for slot in (self.slot_x, self.slot_prev):
            self.one.forward_into(self.slot_flat[slot], self.zx_views[slot])
        return FusedStep(self)

    def accept_one(self) -> bool:
        """accept() of the step's iterate for one sample, whose finiteness it checks for free:
        the restart test's <y - x+, x+ - x> is finite iff x+ is (x and y are). Returns False,
        keeping the current iterate, when it is not (the caller stops the run as diverged);
        the per-step norms of RunMonitor.accept then need not be taken."""
        mine, x, scratch = self.slots[self.slot_new], self._x, self.slots[self.slot_scratch]
        step = torch.sub(mine, x, out=scratch)
        # one pass over both vectors (a product and a sum would be two)
        dot = float(torch.dot(torch.sub(self.y, mine, out=self.grad).view(-1), step.view(-1)))
        if not math.isfinite(dot):
            return False
        self._accept_scalar(dot, mine, step)
        self.slot_x, self.slot_prev, self.slot_new = self.slot_new, self.slot_x, self.slot_prev
        return True

    @property
    def one_sample(self) -> bool:
        """Whether :meth:`accept_one` applies (one sample, momentum in Python numbers)."""
        return isinstance(self.momentum, ScalarMomentum)

    @property
    def restarts(self) -> int:
        """Momentum restarts so far, summed over the samples."""
        return self.momentum.restarts

    def last_change(self) -> Tensor:
        """||x - x_prev|| / ||x|| per sample: the last accepted step's relative change."""
        batch = self._x.shape[0]
        # the difference in the gradient's buffer, which the next step overwrites anyway
        diff = torch.linalg.vector_norm(torch.sub(self._x, self._prev, out=self.grad), dim=1)
        size = torch.linalg.vector_norm(self._x.reshape(batch, -1), dim=1)
        return diff / size.clamp_min(1e-12)

    def _accept_scalar(self, dot: float, mine: Tensor, step: Tensor) -> None:
        """accept_flat's momentum for B = 1 on Python floats (``ScalarMomentum``)."""
        assert isinstance(self.momentum, ScalarMomentum)  # made for one sample
        coef = self.momentum.advance(dot > 0)
        torch.add(mine, step, alpha=coef, out=self.y)

    @property
    def momentum_state(self) -> tuple[Tensor, Tensor]:
        """(previous iterates flattened and concatenated, [t; coefficient]) for warm starts.
        The first is the live buffer, not a copy: the records copy what they keep (a copy
        here as well cost a second pass over 2M values per record at 128x128)."""
        rule = self.momentum
        state = rule.state_on(self._x) if isinstance(rule, ScalarMomentum) else rule.state
        return self._prev, state

    @staticmethod
    def _per_sample(v: Tensor, like: Tensor) -> Tensor:
        return v.reshape(-1, *([1] * (like.dim() - 1)))


def _compiled_aux_proxes(layers: Any, like: Tensor) -> list[Any]:
    """Per auxiliary block, ``kernels.activation_prox.compiled_prox`` of its activation (tanh and
    sigmoid, whose prox is root-solved), or None; numba is imported only when one is."""
    if not any(type(layer.activation).__name__ in ("Tanh", "Sigmoid") for layer in layers[:-1]):
        return [None] * (len(layers) - 1)
    from lbi_engine.solvers.kernels.activation_prox import compiled_prox

    return [compiled_prox(layer.activation, like) for layer in layers[:-1]]
