"""The joint method's fast path: sparse convolutions and the flat-buffer FISTA state.

* the CSR form of a convolution is the same linear map (``linear``, ``adjoint``, ``apply``
  against the map's own kernels, and <W x, r> = <x, W^T r>), for one sample and a batch;
* maps that are not small convolutions are left alone;
* a joint run continued from a record's momentum state takes exactly the steps of an
  uninterrupted run, and a batch whose samples stop at different times keeps the stopped
  samples frozen (the flat buffers copy the monitor's frozen blocks back);
* on the paper's CNN encoder a run with the CSR convolutions takes the same steps as one on
  the maps' own kernels, and its records' objective (computed with the CSR maps) is the
  problem's;
* the CSR matrices and the back-projection start are built once and rebuilt when their
  inputs change.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from lbi_engine.operators import LinearMap
from lbi_engine.solvers import StopRule, final, solve, warm_start
from lbi_engine.solvers.joint.sparse_maps import SparseLinear, sparse_or_self
from tests.engine._nets import lift, seeded_cnn_encoder
from tests.engine._solver_cases import disc, problem_for


def _conv_map(bias: bool) -> object:
    torch.manual_seed(3)
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1, bias=bias).double()
    net = lift(nn.Sequential(conv, nn.ReLU(), nn.Flatten(), nn.Linear(3 * 5 * 5, 4).double()),
               (2, 9, 9))
    return net.layers[0].affine


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch", [1, 3])
def test_sparse_form_is_the_same_map(bias: bool, batch: int) -> None:
    affine = _conv_map(bias)
    fast = sparse_or_self(affine, torch.zeros(1, dtype=torch.float64))
    assert isinstance(fast, SparseLinear)
    assert sparse_or_self(affine, torch.zeros(1, dtype=torch.float64)) is fast  # cached
    gen = torch.Generator().manual_seed(batch)
    x = torch.randn(batch, *affine.in_shape, dtype=torch.float64, generator=gen)
    r = torch.randn(batch, *affine.out_shape, dtype=torch.float64, generator=gen)
    torch.testing.assert_close(fast.linear(x), affine.linear(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(fast.apply(x), affine.apply(x), rtol=0, atol=1e-12)
    torch.testing.assert_close(fast.adjoint(r), affine.adjoint(r), rtol=0, atol=1e-12)
    lhs = (fast.linear(x) * r).sum()
    rhs = (x * fast.adjoint(r)).sum()
    assert abs(float(lhs - rhs)) < 1e-12 * float(lhs.abs() + 1)


def test_the_cache_does_not_keep_maps_alive() -> None:
    import gc
    import weakref

    affine = _conv_map(True)
    assert isinstance(sparse_or_self(affine, torch.zeros(1, dtype=torch.float64)), SparseLinear)
    ref = weakref.ref(affine)
    del affine
    gc.collect()
    assert ref() is None


def test_other_maps_are_left_alone() -> None:
    dense = LinearMap(torch.randn(4, 6, dtype=torch.float64), None, (6,))
    assert sparse_or_self(dense, torch.zeros(1, dtype=torch.float64)) is dense
    conv = _conv_map(True)
    assert sparse_or_self(conv, torch.zeros(1, dtype=torch.float64, device="meta")) is conv


def _cnn_problem(batch: int = 1, alpha: float = 1e-3,
                 dtype: torch.dtype = torch.float64) -> object:
    net = lift(seeded_cnn_encoder(), (1, 28, 28), dtype)
    x_true = disc(28, 8.0, dtype).reshape(1, 1, 28, 28)
    if batch > 1:
        x_true = torch.cat([x_true * (1.0 + 0.5 * k) for k in range(batch)])
    return problem_for(net, x_true, alpha, std=0.01)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_warm_start_continues_the_accelerated_joint_run_exactly(dtype: torch.dtype) -> None:
    problem = _cnn_problem(dtype=dtype)
    straight = final(solve(problem, "joint", stop=StopRule(max_iter=60, tol=0)))
    first = final(solve(problem, "joint", stop=StopRule(max_iter=25, tol=0)))
    resumed = final(solve(problem, "joint", stop=StopRule(max_iter=35, tol=0),
                          init=warm_start(first.to_numpy(), problem)))
    assert straight.extras["steps"] == "accelerated" and resumed.iteration == 60
    assert resumed.x.dtype == dtype
    torch.testing.assert_close(resumed.x, straight.x, rtol=0, atol=0)
    for a, b in zip(resumed.aux, straight.aux, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_records_carry_the_warm_state_and_the_weight_as_typed_fields() -> None:
    """The dual, the previous iterates and the momentum a warm start needs are the record's
    ``warm`` (copies, in to_numpy() too), and the hidden weight its ``hidden_weight``;
    none of them is an ``extras`` key."""
    problem = _cnn_problem(batch=2)
    records = list(solve(problem, "joint", stop=StopRule(max_iter=20, tol=0), report_every=10))
    last = records[-1]
    assert last.warm is not None and last.hidden_weight == 1.0
    assert not {"dual", "x_prev", "momentum", "hidden_weight"} & set(last.extras)
    n = problem.zeros_input()[0].numel() + sum(a[0].numel() for a in last.aux)
    assert last.warm.x_prev.shape == (2, n) and last.warm.momentum.shape == (2, 2)
    assert last.warm.dual.shape[0] == 2
    assert records[0].warm.dual.data_ptr() != last.warm.dual.data_ptr()  # copies
    arrays = last.to_numpy()
    assert arrays["hidden_weight"] == 1.0
    assert arrays["warm"]["momentum"].shape == (2, 2)


def test_stopped_samples_stay_frozen_under_the_relative_rule() -> None:
    """Under the relative rule the monitor vets each block; a sample that stopped keeps its
    iterate in the state itself (its blocks are copied into the step's slot), so it stays
    put in every later record while the other goes on."""
    problem = _cnn_problem(batch=2, alpha=1e-2)
    records = list(solve(problem, "joint", stop=StopRule(max_iter=1500, tol=1e-4,
                                                         tol_mode="relative"),
                         options={"steps": "accelerated"}, report_every=5))
    stops = [max(r.iteration for r in records if bool(r.active[i])) for i in range(2)]
    assert stops[0] != stops[1], stops
    early = 0 if stops[0] < stops[1] else 1
    frozen = [r for r in records if r.iteration > stops[early]]
    assert len(frozen) > 1
    for r in frozen:
        assert torch.equal(r.x[early], frozen[0].x[early])
        for a, b in zip(r.aux, frozen[0].aux, strict=True):
            assert torch.equal(a[early], b[early])
    assert not torch.equal(frozen[-1].x[1 - early], frozen[0].x[1 - early])


def test_stopped_samples_stay_frozen_in_a_batch() -> None:
    problem = _cnn_problem(batch=2, alpha=1e-2)
    # the accelerated step named: without numba (LBI_NO_NUMBA=1) "auto" is the paper's
    # coordinate descent, which needs far more than 1500 sweeps here
    records = list(solve(problem, "joint", stop=StopRule(max_iter=1500, tol=1e-4),
                         options={"steps": "accelerated"}, report_every=5))
    last = records[-1]
    assert last.stop_reasons == ["tolerance", "tolerance"]
    stops = [max(r.iteration for r in records if bool(r.active[i])) for i in range(2)]
    assert stops[0] != stops[1]
    early = 0 if stops[0] < stops[1] else 1
    frozen = [r for r in records if r.iteration > stops[early]]
    assert frozen and all(torch.equal(r.x[early], frozen[0].x[early]) for r in frozen)
    assert all(torch.equal(r.aux[1][early], frozen[0].aux[1][early]) for r in frozen)


def test_sparse_convolutions_take_the_same_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """The run with CSR convolutions against the same run on the maps' own kernels."""
    from lbi_engine.solvers.joint import fista as _joint_accel

    problem = _cnn_problem(alpha=1e-2)
    stop = StopRule(max_iter=150, tol=0)
    fast = final(solve(problem, "joint", stop=stop))
    monkeypatch.setattr(_joint_accel, "sparse_or_self", lambda affine, like: affine)
    plain = final(solve(problem, "joint", stop=stop))
    assert fast.extras["steps"] == plain.extras["steps"] == "accelerated"
    torch.testing.assert_close(fast.x, plain.x, rtol=0, atol=1e-9)
    torch.testing.assert_close(fast.objective, plain.objective, rtol=1e-12, atol=0)


def test_new_maps_around_the_same_weights_reuse_the_matrices() -> None:
    """Every run makes new map objects around a network's weights; the CSR build (~20 ms on
    the zoo's CNN) happens once per weight tensor and geometry, and a changed weight or a
    freed one leaves no stale matrices."""
    import copy
    import gc

    from lbi_engine.solvers.joint import sparse_maps as _sparse_maps

    affine = _conv_map(True)
    fast = sparse_or_self(affine, torch.zeros(1, dtype=torch.float64))
    twin = copy.copy(affine)  # a new object around the same weight tensor
    assert twin is not affine and sparse_or_self(twin, torch.zeros(1, dtype=torch.float64)) is fast
    with torch.no_grad():
        affine.weight.mul_(2.0)  # in place: the tensor's version changes
    rebuilt = sparse_or_self(affine, torch.zeros(1, dtype=torch.float64))
    assert rebuilt is not fast
    x = torch.randn(1, *affine.in_shape, dtype=torch.float64)
    torch.testing.assert_close(rebuilt.apply(x), affine.apply(x))
    gc.collect()  # earlier tests' networks that are garbage already leave first
    before = len(_sparse_maps._CACHE)
    del affine, twin, fast, rebuilt
    gc.collect()
    assert len(_sparse_maps._CACHE) == before - 1


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_the_records_objective_with_the_step_maps_is_the_problems(dtype: torch.dtype) -> None:
    from lbi_engine.solvers.joint.fista import JointFista

    problem = _cnn_problem(alpha=1e-2, dtype=dtype)
    torch.manual_seed(0)
    x = torch.rand_like(problem.zeros_input())
    aux = [a.clamp_min(0) + 0.1 * torch.rand_like(a) for a in problem.forward_aux(x)]
    mine = JointFista(problem, [x, *aux]).objective_parts()
    theirs = problem.objective_parts(x, aux)
    tol = 1e-12 if problem.dtype == torch.float64 else 1e-5
    for key in ("bregman", "reg", "total", "discrepancy"):
        torch.testing.assert_close(mine[key], theirs[key], rtol=tol, atol=tol)


def test_the_back_projection_start_is_computed_once_per_code() -> None:
    from lbi_engine.solvers.joint import start as _joint_start

    problem = _cnn_problem(alpha=1e-2)
    calls = []
    real = _joint_start.compute_backprojection_start

    def counted(p):
        calls.append(1)
        return real(p)

    _joint_start.compute_backprojection_start = counted
    try:
        first = _joint_start.backprojection_start(problem)
        again = _joint_start.backprojection_start(problem)
        assert len(calls) == 1 and torch.equal(first, again) and first is not again
        problem.y_delta.mul_(1.5)  # an in-place change of the code: computed anew
        changed = _joint_start.backprojection_start(problem)
        assert len(calls) == 2 and torch.equal(changed, real(problem))
    finally:
        _joint_start.compute_backprojection_start = real


@pytest.mark.parametrize("batch", [1, 3])
def test_the_back_projection_start_is_the_best_scale_of_the_grid(batch: int) -> None:
    """The batched search over the candidates (s v, then mid-grey + s v, s on the grid) picks,
    per sample, the clipped image that fits the code best: checked against one forward pass
    per candidate."""
    from lbi_engine.solvers.joint.start import SCALES, compute_backprojection_start

    problem = _cnn_problem(batch=batch, alpha=1e-2)
    start = compute_backprojection_start(problem)
    r = problem.y_delta
    for layer in reversed(problem.network.layers):
        zero = torch.zeros((1, *layer.affine.in_shape), dtype=r.dtype)
        r = layer.affine.adjoint(r - layer.affine.apply(zero)).reshape(-1, *layer.affine.in_shape)
    v = r.reshape(start.shape)
    lo, hi = -problem.display_offset, problem.data_range - problem.display_offset
    candidates = [(c, s) for c in (0.0, 0.5 * (lo + hi))
                  for s in torch.logspace(-4, 1, SCALES, dtype=v.dtype).tolist()]
    for b in range(batch):
        misfits = [float((problem.network.forward((c + s * v[b:b + 1]).clamp(lo, hi))
                          - problem.y_delta[b:b + 1]).pow(2).sum()) for c, s in candidates]
        c, s = candidates[min(range(len(candidates)), key=misfits.__getitem__)]
        torch.testing.assert_close(start[b], (c + s * v[b]).clamp(lo, hi), rtol=0, atol=1e-12)


def test_without_numba_the_accelerated_joint_run_converges_to_the_same_point(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The torch backend of the TV prox stops by the compiled kernel's duality-gap test:
    with a fixed 5 FGP steps per prox the run never met tol 1e-4 (6000 steps here)."""
    problem = _cnn_problem(alpha=1e-2)
    stop = StopRule(max_iter=1500, tol=1e-4)
    options = {"steps": "accelerated"}
    compiled = final(solve(problem, "joint", stop=stop, options=options))
    monkeypatch.setenv("LBI_NO_NUMBA", "1")
    plain = final(solve(problem, "joint", stop=stop, options=options))
    assert compiled.stop_reasons == plain.stop_reasons == ["tolerance"]
    assert plain.iteration < 1500
    # both at the minimiser to within the tolerance's accuracy
    gap = float((plain.x - compiled.x).norm() / compiled.x.norm())
    assert gap < 1e-3
    rel = abs(float(plain.objective[0]) / float(compiled.objective[0]) - 1.0)
    assert rel < 1e-4
