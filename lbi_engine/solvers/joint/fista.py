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
smooth and joins f instead (``prior_step``: per-pixel steps, then the clip onto its box; with
its TV term, the prox of alpha gamma TV + box in that per-pixel metric; MATH.md §4.3).

How a step is taken (torch operations on the batch, one sample on buffers, or compiled
loops) is a ``steps.JointStep`` chosen once, when the state is made; :meth:`JointFista.step`
delegates to it.
"""

from __future__ import annotations

import math
from typing import Any, cast

import torch
from torch import Tensor

from lbi_engine.operators import AffineMap
from lbi_engine.operators.momentum import Momentum, ScalarMomentum
from lbi_engine.protocols import Problem
from lbi_engine.regularisers import GaussianPrior, TotalVariation, TVProx
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import WarmStart
from lbi_engine.solvers.driver import Changes
from lbi_engine.solvers.joint.graph import graph_bounds, graph_gradient
from lbi_engine.solvers.joint.one_sample import OneSampleGradient
from lbi_engine.solvers.joint.prior_step import metric_tv_prox, smooth_prior_gradient
from lbi_engine.solvers.joint.records import records_objective
from lbi_engine.solvers.joint.sparse_maps import sparse_or_self
from lbi_engine.solvers.joint.state import FistaState
from lbi_engine.solvers.joint.steps import BatchStep, JointStep, OneSampleStep

__all__ = ["JointFista", "choose_step", "graph_bounds", "supported"]


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

    def __init__(self, problem: Problem, xs: list[Tensor], step_scale: float = 1.0, *,
                 warm: WarmStart | None = None, tol_mode: str = "objective",
                 compiled: bool = True) -> None:
        """``warm``: the dual, previous iterates and momentum of an earlier run's record
        (:meth:`warm_state`), so that a warm-started run continues the same iteration
        exactly. ``tol_mode`` (the stop rule's) and ``compiled`` (False: torch operations
        only) choose how a step is taken (``steps.choose``)."""
        warm = warm or WarmStart()
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
        inner = self.reg.inner
        #: whether the image block's prior is TV (else the Gaussian prior, smooth)
        self.tv = isinstance(inner, TotalVariation)
        self.lo, self.hi = float(inner.lo), float(inner.hi)  # +-inf: no box
        like = xs[0]
        batch = like.shape[0]
        self.shapes = [tuple(x.shape) for x in xs]
        self.sizes = [x[0].numel() for x in xs]
        self.n0 = self.sizes[0]
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
        if warm.x_prev is not None and warm.momentum is not None:
            self.slots[self.slot_prev].copy_(warm.x_prev.reshape(batch, -1))
            state = warm.momentum.reshape(2, batch)
        rule = Momentum(batch, like, state)
        torch.addcmul(self.x_flat, rule.coef.reshape(-1, 1),
                      self.x_flat - self.slots[self.slot_prev], out=self.y)
        self.momentum: Momentum | ScalarMomentum = rule
        # the per-coordinate step (each block's tau over its entries)
        self.tau = torch.cat([torch.full((n,), t, dtype=like.dtype, device=like.device)
                              for n, t in zip(self.sizes, self.taus, strict=True)])
        self.prior_gradient = None
        if isinstance(inner, GaussianPrior):
            self.prior_gradient = smooth_prior_gradient(inner, self.alpha, bounds[0], step_scale,
                                                        self.tau[:self.n0], like)
        if batch == 1 and like.dtype in (torch.float32, torch.float64):
            self.momentum = ScalarMomentum(like.dtype, float(rule.t[0]), float(rule.coef[0]))
        # every auxiliary block's prox a projection onto x >= 0 (ReLU): one clamp for all
        self.relu_aux = all(type(layer.activation).__name__ == "ReLU"
                            for layer in self.layers[:-1])
        # tanh/sigmoid blocks: their root-solved prox in one compiled loop per block
        self.aux_prox = _compiled_aux_proxes(self.layers, like)
        self.offsets = [sum(self.sizes[:i]) for i in range(len(self.sizes) + 1)]
        # the same maps, small convolutions as CSR matrices (2-5x cheaper on the CPU)
        # (a LiftedNetwork's layers hold AffineMaps; the Layer protocol promises an Operator)
        self.maps = [sparse_or_self(cast(AffineMap, layer.affine), like) for layer in self.layers]
        # one sample: the gradient on buffers made once, on flat 1-D views of y and grad
        self.one = None if self.graph_maps is not None else \
            OneSampleGradient.build(self.layers, self.maps, problem.y_delta, batch)
        self.y_flat = [part.view(-1) for part in self.y[0].split(self.sizes)]
        self.slot_flat = [[part.view(-1) for part in slot[0].split(self.sizes)]
                          for slot in self.slots]  # per slot, for the records
        self.grad_flat = [part.view(-1) for part in self.grad[0].split(self.sizes)]
        # the TV prox of the x_0 block, its backend (compiled on the CPU) chosen once here;
        # ``dual`` is its warm-started dual
        self.tv_prox: TVProx | None = None
        if isinstance(inner, TotalVariation):
            self.tv_prox = inner.fgp(batch, tuple(self.reg.image_shape), like)
        elif isinstance(inner, GaussianPrior) and inner.tv > 0:
            self.tv_prox, self.lam = metric_tv_prox(inner, self.alpha, self.tau[:self.n0], batch,
                                                    tuple(self.reg.image_shape), like)
        k_shape = self.reg.K(xs[0]).shape
        self.dual = self.tv_prox.dual if self.tv_prox is not None else \
            torch.zeros(k_shape, dtype=like.dtype, device=like.device)
        if warm.dual is not None:
            self.dual.copy_(warm.dual.reshape(k_shape))
        self.inner_steps = 0
        #: how a step is taken, chosen once (``steps``, :func:`choose_step`)
        self.stepper = choose_step(self, tol_mode, compiled)

    # -- flat buffers and their block views ------------------------------------------------
    def _flat(self, blocks: list[Tensor]) -> Tensor:
        batch = blocks[0].shape[0]
        return torch.cat([b.reshape(batch, -1) for b in blocks], dim=1)

    def _views(self, flat: Tensor) -> list[Tensor]:
        return [part.view(shape) for part, shape in
                zip(flat.split(self.sizes, dim=1), self.shapes, strict=True)]

    @property
    def xs(self) -> list[Tensor]:
        return self.slot_views[self.slot_x]

    @property
    def x_flat(self) -> Tensor:
        return self.slots[self.slot_x]

    @property
    def new_flat(self) -> Tensor:
        """The proposed iterate as one (B, N) tensor (its blocks are what propose() returned)."""
        return self.slots[self.slot_new]

    def rotate(self) -> None:
        """The proposed iterate becomes x, x the previous one, the previous slot free."""
        self.slot_x, self.slot_prev, self.slot_new = self.slot_new, self.slot_x, self.slot_prev

    # -- the iteration -----------------------------------------------------------------------
    def step(self, monitor: RunMonitor) -> Changes:
        """One accelerated step, vetted by ``monitor`` (finiteness, frozen samples); returns
        the per-sample change of the iterate (inf where only the records measure it:
        :attr:`measures_change`)."""
        return self.stepper.step(self, monitor)

    @property
    def measures_change(self) -> bool:
        """Whether :meth:`step` measures the change (else :meth:`last_change` gives it)."""
        return self.stepper.measures_change

    @property
    def pre_activations(self) -> list[Tensor] | None:
        """W_l x_l + b_l of the current iterate per layer, where the step keeps them."""
        return self.stepper.pre_activations(self)

    def gradient(self, ys: list[Tensor]) -> list[Tensor]:
        """grad f at ``ys`` (blocks), as blocks of one (B, N) tensor (a fresh one)."""
        grad = torch.empty_like(self.grad)
        self._gradient(ys, self._views(grad))
        return self._views(grad)

    def _gradient(self, ys: list[Tensor], g_blocks: list[Tensor]) -> None:
        if self.graph_maps is not None:
            graph_gradient(self.layers, self.graph_maps, self.problem.y_delta, ys, g_blocks)
            return
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

    def objective_parts(self) -> dict[str, Tensor]:
        """``problem.objective_parts`` at the current iterates (``records``)."""
        return records_objective(self)

    def tv_value(self, x0: Tensor) -> Tensor:
        """R(x_0) per sample (the prox's TV loop; the iterate is in the box, so the raw value
        is the value)."""
        if self.tv_prox is None or not self.tv:
            return self.reg.value(x0)
        return self.tv_prox.value(x0)

    def _tv_prox(self, v: Tensor, y: Tensor) -> Tensor:
        """The TV (+ box) prox of ``v`` with weight lam, warm-started at ``dual``; ``y`` is
        the point the step started from (the prox's accuracy is relative to u - y)."""
        prox = self.tv_prox
        assert prox is not None  # propose() calls this with a TV prox only
        prox.v.copy_(v.reshape(prox.v.shape))
        prox.y.copy_(y.reshape(prox.y.shape))
        self.inner_steps += prox(self.lam)
        return prox.u

    def propose(self) -> list[Tensor]:
        """The next iterate (not yet accepted) in the free slot, by blocks: one
        prox-gradient step from y. The strategies of ``steps`` accept it."""
        if self.one is not None:
            self.one(self.y_flat, self.grad_flat)
        else:
            self._gradient(self.y_views, self.grad_views)
        new = self.slots[self.slot_new]
        blocks = self.slot_views[self.slot_new]
        lo, hi = self.lo, self.hi
        if self.prior_gradient is not None:  # the Gaussian prior's gradient, then the box
            self.grad[:, :self.n0].add_(self.prior_gradient(self.y[:, :self.n0]))
            torch.addcmul(self.y, self.grad, self.tau, value=-1.0, out=new)
            if self.tv_prox is not None:  # its TV term: the metric prox, the box inside
                blocks[0].copy_(self._tv_prox(blocks[0], self.y_views[0])
                                .reshape(blocks[0].shape))
            elif lo > -math.inf or hi < math.inf:
                new[:, :self.n0].clamp_(min=lo if lo > -math.inf else None,
                                         max=hi if hi < math.inf else None)
        else:
            torch.addcmul(self.y, self.grad, self.tau, value=-1.0, out=new)
            blocks[0].copy_(self._tv_prox(blocks[0], self.y_views[0]).reshape(blocks[0].shape))
        if self.relu_aux:
            new[:, self.n0:].clamp_(min=0.0)
        else:
            for i in range(1, len(self.layers)):
                fast = self.aux_prox[i - 1]
                if fast is not None:  # in place on the block's columns of the slot
                    fast(new[:, self.offsets[i]:self.offsets[i + 1]], self.taus[i])
                else:
                    blocks[i].copy_(self.layers[i - 1].activation.prox(blocks[i], self.taus[i]))
        return blocks

    @property
    def restarts(self) -> int:
        """Momentum restarts so far, summed over the samples."""
        return self.momentum.restarts

    def last_change(self) -> Tensor:
        """||x - x_prev|| / ||x|| per sample: the last accepted step's relative change."""
        x, prev = self.x_flat, self.slots[self.slot_prev]
        batch = x.shape[0]
        # the difference in the gradient's buffer, which the next step overwrites anyway
        diff = torch.linalg.vector_norm(torch.sub(x, prev, out=self.grad), dim=1)
        size = torch.linalg.vector_norm(x.reshape(batch, -1), dim=1)
        return diff / size.clamp_min(1e-12)

    def warm_state(self) -> WarmStart:
        """The dual, the previous iterates (flattened and concatenated) and [t; coefficient]
        for a warm start. The tensors are the live buffers, not copies: the records copy
        what they keep (a copy here as well cost a second pass over 2M values per record at
        128x128)."""
        rule = self.momentum
        state = rule.state_on(self.x_flat) if isinstance(rule, ScalarMomentum) else rule.state
        return WarmStart(dual=self.dual, x_prev=self.slots[self.slot_prev], momentum=state)


def choose_step(state: FistaState, tol_mode: str, compiled: bool = True) -> JointStep:
    """How ``state`` takes its steps (``steps``): one sample (momentum in Python numbers)
    under the objective rule on buffers, compiled where it can be (``compiled``: allowed to:
    numba usable, TV, ReLU blocks, a chain); else torch operations on the batch."""
    if tol_mode != "objective" or not isinstance(state.momentum, ScalarMomentum):
        return BatchStep(whole=tol_mode == "objective")
    prox = state.tv_prox
    if compiled and state.one is not None and state.relu_aux and state.tv \
            and prox is not None and prox.compiled:
        from lbi_engine.solvers.joint.compiled_step import CompiledStep  # imports numba

        return CompiledStep(state)
    return OneSampleStep(state)


def _compiled_aux_proxes(layers: Any, like: Tensor) -> list[Any]:
    """Per auxiliary block, ``kernels.activation_prox.compiled_prox`` of its activation (tanh and
    sigmoid, whose prox is root-solved), or None; numba is imported only when one is."""
    if not any(type(layer.activation).__name__ in ("Tanh", "Sigmoid") for layer in layers[:-1]):
        return [None] * (len(layers) - 1)
    from lbi_engine.solvers.kernels.activation_prox import compiled_prox

    return [compiled_prox(layer.activation, like) for layer in layers[:-1]]
