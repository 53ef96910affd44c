"""The streaming protocol every method speaks (lbi_engine/solvers/base.py): record fields and
shapes, report cadence, per-sample stopping, warm start, tolerance modes, time budget,
residual tolerance, cancel, divergence, and what every method's objective does (it falls;
batch order does not matter; one-layer PDHG in float32 ends at cvxpy's minimum).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lbi_engine.errors import InputError
from lbi_engine.problem import InversionProblem
from lbi_engine.solvers import (
    CancelToken,
    IterateRecord,
    StopReason,
    StopRule,
    final,
    resolve_method,
    solve,
    warm_start,
)
from tests.engine._solver_cases import (
    cvx_bregman,
    cvx_solve,
    cvx_tv,
    dense,
    disc,
    problem_for,
    relu_mlp,
    relu_perceptron,
    run,
    tv_numpy,
    with_feature_prior,
)

METHODS = ("pdhg", "joint", "layerwise", "landweber", "backprop")
ALPHA = 0.05


def _x_true(batch: int = 2) -> torch.Tensor:
    return torch.stack([disc(6, 2.0) * 0.2, disc(6, 2.0)])[:batch].reshape(batch, 36)


def _problem(method: str, batch: int = 2, std: float = 0.05, truth: bool = True):
    """A perceptron for PDHG, a two-layer ReLU net (36 -> 72 -> 108) for the others.

    ``truth=False`` drops x_true, so records skip PSNR/SSIM (SSIM per record is the
    dominant cost of a run that reports every iteration)."""
    if method == "pdhg":
        net = relu_perceptron(6, 40, 0)
    else:
        net = relu_mlp((36, 72, 108), 0)
    problem = problem_for(net, _x_true(batch), ALPHA, std=std)
    if method == "layerwise":
        with_feature_prior(problem)
    if not truth:
        problem.x_true = None
    return problem


# -- fields, shapes, cadence ---------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_records_have_the_documented_fields_and_shapes(method: str) -> None:
    problem = _problem(method)
    depth = problem.depth
    records = run(problem, method, stop=StopRule(max_iter=12, tol=0), report_every=4)
    assert isinstance(records[0], IterateRecord) and records[-1].final
    assert sum(r.final for r in records) == 1
    elapsed = [r.elapsed for r in records]
    assert elapsed == sorted(elapsed) and elapsed[0] >= 0
    for r in records:
        assert r.method == resolve_method(method, problem)  # pdhg: alias of one-layer
        assert r.x.shape == (2, 36) and r.x.dtype == torch.float64
        aux_shapes = [tuple(a.shape) for a in r.aux]
        assert aux_shapes == ([(2, 72)] if method in ("joint", "layerwise") else [])
        # SSIM: on the first and the final record, live at most every SSIM_LIVE_SPAN steps
        measured = ("ssim",) if r is records[0] or r.final else ()
        if r.ssim is None:
            assert not measured
        for name in ("objective", "reg_term", "discrepancy", "primal_residual",
                     "dual_residual", "psnr", *measured):
            assert getattr(r, name).shape == (2,), name
            assert getattr(r, name).dtype == torch.float64, name
        assert r.bregman_terms.shape == (2, depth)
        assert r.active.dtype == torch.bool and r.active.shape == (2,)
        assert (r.stop_reasons is None) is (not r.final)
        assert isinstance(r.extras, dict)
        data = r.to_numpy()
        assert isinstance(data["x"], np.ndarray) and data["stop_reason"] == r.stop_reason
        assert data["choice"] == r.choice and data["position"] == r.position
        if method == "layerwise" and r.stage != "layer 1/2":
            continue  # stage records report the stage's own objective (checked elsewhere)
        # Full-problem records: objective = sum of Bregman terms + alpha TV(x), and the
        # discrepancy is ||N(x) - y_delta||, both recomputed here.
        torch.testing.assert_close(r.objective, r.bregman_terms.sum(dim=1) + r.reg_term)
        tv = np.array([tv_numpy(v, 6, 6) for v in r.x.numpy()])
        # layer-wise's input stage records the alpha it chose (discrepancy principle)
        alpha = ALPHA if r.choice is None else r.choice.alpha
        np.testing.assert_allclose(r.reg_term.numpy(), alpha * tv, rtol=1e-12, atol=1e-15)
        residual = problem.network.forward(r.x) - problem.y_delta
        torch.testing.assert_close(r.discrepancy, residual.norm(dim=1))
    last = records[-1]
    assert len(last.stop_reasons) == 2
    assert set(last.stop_reasons) <= {reason.value for reason in StopReason}
    assert not bool(last.active.any())


@pytest.mark.parametrize("method", ["pdhg", "joint", "landweber", "backprop"])
def test_records_come_every_report_every_iterations(method: str) -> None:
    records = run(_problem(method), method, stop=StopRule(max_iter=30, tol=0), report_every=7)
    assert [r.iteration for r in records if not r.final] == [0, 7, 14, 21, 28]
    assert records[-1].iteration == 30 and records[-1].stop_reasons == ["max_iterations"] * 2


def test_layerwise_reports_every_report_every_iterations_of_each_stage() -> None:
    records = run(_problem("layerwise"), "layerwise", stop=StopRule(max_iter=20, tol=0),
                  report_every=4, options={"input_alpha": "given"})
    seen = [(r.stage, r.iteration) for r in records if not r.final]
    # every stage ends with a record of its result (here at its cap, 10)
    assert seen == [("layer 2/2", 0), ("layer 2/2", 4), ("layer 2/2", 8), ("layer 2/2", 10),
                    ("layer 1/2", 10), ("layer 1/2", 14), ("layer 1/2", 18)]
    assert records[-1].iteration == 20 and records[-1].stage == "layer 1/2"


# -- per-sample stopping -------------------------------------------------------------------------
def _stop_iterations(records: list[IterateRecord]) -> list[int]:
    """For each sample, the first iteration whose record shows it inactive."""
    out = []
    for k in range(records[0].x.shape[0]):
        out.append(min(r.iteration for r in records if not bool(r.active[k])))
    return out


@pytest.mark.parametrize("method, reason", [("pdhg", "tolerance"), ("joint", "tolerance"),
                                            ("landweber", "discrepancy")])
def test_samples_of_a_batch_stop_independently(method: str, reason: str) -> None:
    """Sample 0 (a faint disc) and sample 1 (a bright one) converge at different speeds."""
    records = run(_problem(method, truth=False), method,
                  stop=StopRule(max_iter=3000, tol=1e-6), report_every=1)
    stops = _stop_iterations(records)
    assert records[-1].stop_reasons == [reason, reason]
    assert stops[0] != stops[1]
    early, late = (0, 1) if stops[0] < stops[1] else (1, 0)
    assert records[-1].iteration == stops[late]
    frozen = [r for r in records if r.iteration >= stops[early]]
    for r in frozen:
        torch.testing.assert_close(r.x[early], frozen[0].x[early], rtol=0, atol=0)
        for a, a0 in zip(r.aux, frozen[0].aux, strict=True):
            torch.testing.assert_close(a[early], a0[early], rtol=0, atol=0)
    assert not torch.equal(frozen[0].x[late], frozen[-1].x[late])  # the other one went on


# -- warm start ----------------------------------------------------------------------------------
@pytest.mark.parametrize("method", ["pdhg", "joint", "landweber"])
@pytest.mark.parametrize("via_numpy", [False, True])
def test_warm_start_continues_the_same_iteration(method: str, via_numpy: bool) -> None:
    problem = _problem(method)
    stop = StopRule(max_iter=40, tol=0)
    straight = run(problem, method, stop=StopRule(max_iter=80, tol=0), report_every=10)
    first = final(solve(problem, method, stop=stop, report_every=10))
    state = first.to_numpy() if via_numpy else first
    init = warm_start(state, problem)
    assert init["iteration"] == 40
    resumed = run(problem, method, stop=stop, init=init, report_every=10)
    assert resumed[0].iteration == 40
    torch.testing.assert_close(resumed[0].objective, first.objective, rtol=1e-14, atol=0)
    assert [r.iteration for r in resumed if not r.final] == [40, 50, 60, 70, 80]
    # The state (x, z, aux) is complete: 40 + 40 iterations equal 80 in one go.
    torch.testing.assert_close(resumed[-1].x, straight[-1].x, rtol=0, atol=1e-12)
    for a, b in zip(resumed[-1].aux, straight[-1].aux, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-12)


def test_warm_started_backprop_starts_at_the_previous_objective() -> None:
    problem = _problem("backprop")
    first = final(solve(problem, "backprop", stop=StopRule(max_iter=30, tol=0)))
    resumed = run(problem, "backprop", stop=StopRule(max_iter=30, tol=0),
                  init=warm_start(first, problem), report_every=10)
    assert resumed[0].iteration == 30 and resumed[-1].iteration == 60
    torch.testing.assert_close(resumed[0].objective, first.objective, rtol=1e-14, atol=0)
    assert bool((resumed[-1].objective < first.objective).all())


# -- tolerance modes, time budget, residual tolerance --------------------------------------------
@pytest.mark.parametrize("mode, tol", [("relative", 1e-4), ("absolute", 1e-5)])
def test_tolerance_modes_measure_and_stop_as_documented(mode: str, tol: float) -> None:
    """relative: ||dx||/||x|| and ||dz||/||z||; absolute (the paper's): ||dx|| and ||dz||."""
    problem = _problem("pdhg", batch=1, truth=False)
    records = run(problem, "pdhg", stop=StopRule(max_iter=5000, tol=tol, tol_mode=mode),
                  report_every=1)
    # One record per iteration (the stopping iteration has only the final record).
    regular = list({r.iteration: r for r in records}.values())
    assert [r.iteration for r in regular] == list(range(len(regular)))
    for prev, cur in zip(regular[:-1], regular[1:], strict=True):
        dx = float((cur.x - prev.x).norm())
        dz = float((cur.warm.dual - prev.warm.dual).norm())
        if mode == "relative":
            dx, dz = dx / float(cur.x.norm()), dz / float(cur.warm.dual.norm())
        assert float(cur.primal_residual[0]) == pytest.approx(dx, rel=1e-9, abs=1e-300)
        assert float(cur.dual_residual[0]) == pytest.approx(dz, rel=1e-9, abs=1e-300)
    small = [r.iteration for r in regular[1:]
             if float(r.primal_residual[0]) < tol and float(r.dual_residual[0]) < tol
             and r.iteration >= 2]
    last = records[-1]
    assert last.stop_reasons == ["tolerance"]
    assert last.iteration == small[0]


@pytest.mark.parametrize("method", METHODS)
def test_time_budget_stops_every_method(method: str) -> None:
    budget = 0.15
    problem = _problem(method)
    problem.delta = None  # Landweber would stop by the discrepancy principle first
    if method == "layerwise":  # without a noise level its stage weights must be given
        problem.layer_alphas = [1e-3]
    last = final(solve(problem, method,
                       stop=StopRule(max_iter=10**7, tol=0, time_budget=budget)))
    assert last.stop_reasons == ["time_budget", "time_budget"]
    # At least the budget was used; how soon after it the run ends is a wall-clock figure
    # (it fails on a loaded machine): tests/reliability/test_cancel_latency.py, -m timing.
    assert last.elapsed >= budget


def test_residual_tolerance_stops_pdhg_at_a_saddle_point() -> None:
    problem = _problem("pdhg")
    records = run(problem, "pdhg", stop=StopRule(max_iter=20000, tol=0, residual_tol=1e-6),
                  report_every=10)
    last = records[-1]
    assert last.stop_reasons == ["tolerance", "tolerance"]
    assert float(last.extras["optimality"].max()) < 1e-6
    assert float(records[-3].extras["optimality"].max()) >= 1e-6
    # optimality = ||W^T(sigma(Wx+b) - y) + alpha K^T z|| / ||W^T(sigma(Wx+b) - y)||.
    a, b = dense(problem.network.layers[0].affine)
    p = problem.reg.KT(last.warm.dual).reshape(2, -1).numpy()
    for k in range(2):
        x = last.x[k].numpy()
        grad = a.T @ (np.maximum(a @ x + b, 0) - problem.y_delta[k].numpy())
        expected = np.linalg.norm(grad + ALPHA * p[k]) / np.linalg.norm(grad)
        assert float(last.extras["optimality"][k]) == pytest.approx(expected, rel=1e-6)


# -- cancel and divergence -----------------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_cancel_stops_before_the_next_iteration(method: str) -> None:
    token = CancelToken()
    seen = []
    for record in solve(_problem(method), method, stop=StopRule(max_iter=1000, tol=0),
                        cancel=token, report_every=1):
        seen.append(record)
        if record.iteration == 3:
            token.cancel()
    assert [r.iteration for r in seen] == [0, 1, 2, 3, 3]
    assert seen[-1].final and seen[-1].stop_reasons == ["cancelled", "cancelled"]
    torch.testing.assert_close(seen[-1].x, seen[-2].x, rtol=0, atol=0)


def test_cancelled_before_the_start_runs_no_iteration() -> None:
    token = CancelToken()
    token.cancel()
    records = run(_problem("joint"), "joint", cancel=token)
    assert [r.iteration for r in records] == [0, 0]
    assert records[-1].stop_reason == "cancelled"


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("report_every", [1, 1000])
def test_forced_divergence_stops_with_the_last_finite_iterate(method: str,
                                                              report_every: int) -> None:
    options = {"optimizer": "gd", "lr": 1e8} if method == "backprop" else {"step_scale": 1e6}
    records = run(_problem(method), method, stop=StopRule(max_iter=3000), options=options,
                  report_every=report_every)
    last = records[-1]
    assert last.stop_reasons == ["diverged", "diverged"]
    assert last.iteration < 3000
    assert bool(torch.isfinite(last.x).all())
    assert all(bool(torch.isfinite(a).all()) for a in last.aux)


# -- errors --------------------------------------------------------------------------------------
def test_bad_calls_raise_input_errors() -> None:
    problem = _problem("joint")
    with pytest.raises(InputError, match="unknown method"):
        solve(problem, "newton")
    with pytest.raises(InputError, match="single layer"):
        list(solve(problem, "pdhg"))
    with pytest.raises(InputError, match="report_every"):
        solve(problem, "joint", report_every=0)
    with pytest.raises(InputError, match="n_inner"):
        solve(problem, "joint", options={"n_inner": 0})
    with pytest.raises(InputError, match="unknown solver option"):
        solve(problem, "joint", options={"tau": 1.0})
    with pytest.raises(InputError, match="tol_mode"):
        StopRule(tol_mode="percent")


# -- what the objective does (properties; no stored curves) -------------------------------------
# Float trajectories differ between machines (CPU kernels, thread counts, library versions):
# an Adam curve differed by 0.19 % between two fresh installs with identical versions. So these
# runs check what holds on every machine, not the digits of one.
RUNS: dict[str, dict[str, object]] = {
    "pdhg": {"stop": StopRule(max_iter=300, tol=0)},
    # The x_0 block solved to convergence (100 PDHG steps per sweep): block-coordinate descent.
    "joint": {"stop": StopRule(max_iter=30, tol=0), "options": {"n_inner": 100}},
    # the input stage at the given alpha (the discrepancy search: test_solver_layerwise.py)
    "layerwise": {"stop": StopRule(max_iter=150, tol=0), "options": {"input_alpha": "given"}},
    "landweber": {"stop": StopRule(max_iter=300, tol=0)},
    "backprop": {"stop": StopRule(max_iter=300, tol=0)},
}


def _reversed_batch(problem: InversionProblem) -> InversionProblem:
    """The same problem with the samples in the opposite order (same data, same noise)."""
    delta = problem.delta.flip(0) if problem.delta is not None else None
    return InversionProblem(problem.network, problem.y_delta.flip(0), problem.regulariser,
                            problem.alpha, delta=delta, feature_priors=problem.feature_priors)


@pytest.mark.parametrize("method", METHODS)
def test_every_method_lowers_the_objective(method: str) -> None:
    records = run(_problem(method, truth=False), method, report_every=5, **RUNS[method])
    stages: dict[str, list[np.ndarray]] = {}
    for r in records:  # layer-wise: each stage reports its own objective
        stages.setdefault(r.stage, []).append(r.objective.numpy())
    for stage, values in stages.items():
        curve = np.array(values)  # (reports, samples)
        assert np.isfinite(curve).all(), (method, stage)
        assert (curve[-1] < curve[0]).all(), (method, stage)
    if method == "joint":
        # Exact block minimisation never increases the objective (MATH.md); float64 rounding
        # in a sum of ~250 terms of size <= the start value allows ~1e-13 relative.
        curve = np.array(stages[""])
        assert (np.diff(curve, axis=0) <= 1e-12 * curve[0]).all()


@pytest.mark.parametrize("method", ["pdhg", "joint", "layerwise", "landweber"])
def test_batch_order_does_not_change_any_samples_result(method: str) -> None:
    """Samples of a batch are independent problems. (Not asserted for backprop: Adam divides
    each gradient entry by its running RMS, so rounding-level gradients become full-size steps
    and the iterate depends on the order of float operations: no tolerance follows from the
    arithmetic. That is the 0.19 % machine-to-machine drift of its curve.)"""
    problem = _problem(method, truth=False)
    forward = final(solve(problem, method, report_every=50, **RUNS[method]))
    backward = final(solve(_reversed_batch(problem), method, report_every=50, **RUNS[method]))
    # Identical arithmetic per sample up to the order a BLAS kernel blocks the rows in:
    # differences of a few float64 ulps, which contracting iterations do not amplify.
    torch.testing.assert_close(backward.x.flip(0), forward.x, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(backward.objective.flip(0), forward.objective,
                               rtol=1e-9, atol=0.0)


def test_float32_pdhg_ends_at_the_convex_optimum() -> None:
    """One ReLU layer + TV is convex: cvxpy (Clarabel, interior point, an independent code
    path) gives the minimum. Tolerance: the objective is a sum of nonnegative terms (40
    Bregman terms, 2 x 36 TV differences), so evaluating it in float32 is exact to
    n u = 112 x 6e-8 = 7e-6 relative (Higham, summation); cvxpy's gap is ~1e-8."""
    import cvxpy as cp

    problem = _problem("pdhg", truth=False)
    a, b = dense(problem.network.layers[0].affine)
    oracle = []
    for y in problem.y_delta.numpy():
        x = cp.Variable(36)
        oracle.append(cvx_solve(cvx_bregman("relu", y, a @ x + b) + ALPHA * cvx_tv(x, 6, 6)))
    single = InversionProblem(problem.network.to(dtype=torch.float32), problem.y_delta.float(),
                              problem.regulariser, problem.alpha)
    rec = final(solve(single, "pdhg", report_every=100, **RUNS["pdhg"]))
    assert rec.objective.dtype == torch.float32
    np.testing.assert_allclose(rec.objective.double().numpy(), oracle, rtol=1e-5)
