"""alpha "auto" (lbi_engine/solvers/alpha/whole.py): the path, the rules, and the run record.

Properties checked, not stored numbers: the discrepancy search's answer meets its target
and is the crossing found by an independent bisection on cold solves, from starts above,
below and at the first guess; the residuals it visited grow with alpha (a convex problem's
residual is monotone in alpha); path solves stop once settled; quasi-optimality picks the
path point with the smallest step to its neighbour (recomputed here from independent cold
solves); and result.json repeats the run with the chosen alpha frozen.
"""

from __future__ import annotations

import json
import math

import pytest
import torch

from lbi_engine.settings.solver import ALPHA_START
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers.alpha import (
    GUESS,
    GUESS_BOX,
    MATCH,
    MAX_POINTS,
    PATH_MIN_STEPS,
    PATH_REPORT,
    RHO_KNEE,
    TAU,
    TAU_MIN,
    TAU_SLOPE,
    expected_noise_norm,
    first_guess,
    stream_alpha,
    tau_for,
)
from tests.engine._solver_cases import disc, problem_for, relu_perceptron

SIDE = 8


def _problem(std: float = 0.05):
    net = relu_perceptron(SIDE, 40, 0)
    x_true = disc(SIDE, 2.5).reshape(1, -1)
    return problem_for(net, x_true, 1.0, std=std, reg="tv")


def _runner(tol: float = 1e-6):
    def run(problem, init, path_tol=None):
        return solve(problem, "one-layer", stop=StopRule(max_iter=20_000, tol=tol), init=init)
    return run


def _residual_at(problem, alpha: float) -> float:
    """An independent cold solve's residual at ``alpha``, run to a tight tolerance."""
    from dataclasses import replace

    last = final(solve(replace(problem, alpha=alpha), "one-layer",
                       stop=StopRule(max_iter=40_000, tol=1e-9)))
    return float(last.discrepancy[0])


def _bisect_crossing(problem, target: float, lo: float = 1e-4, hi: float = 10.0) -> float:
    """The alpha with residual == target by bisection in log alpha on cold solves."""
    for _ in range(14):
        mid = math.sqrt(lo * hi)
        if _residual_at(problem, mid) > target:
            hi = mid
        else:
            lo = mid
    return math.sqrt(lo * hi)


def test_discrepancy_search_meets_its_target_at_the_bisected_crossing() -> None:
    problem = _problem()
    records = list(stream_alpha(problem, _runner(), noise_std=0.05, start=1.0, alpha_min=1e-4))
    last = records[-1]
    assert last.final and sum(r.final for r in records) == 1
    path = last.choice.path
    assert 1 <= len(path) <= MAX_POINTS
    target = last.choice.target
    delta = expected_noise_norm(problem, 0.05)
    assert target == pytest.approx(tau_for(problem, delta) * delta)
    # the final (converged) residual meets the target to the search's match (3 %, log)
    assert abs(math.log(float(last.discrepancy[0]) / target)) <= MATCH + 0.01
    # and the alpha is the root found independently (residual slope ~0.5: 3 % -> ~6 %)
    assert last.choice.alpha == pytest.approx(_bisect_crossing(problem, target), rel=0.1)
    # a convex problem's residual grows with alpha: the visited points, sorted, agree
    ordered = sorted(path, key=lambda p: p["alpha"])
    residuals = [p["discrepancy"] for p in ordered]
    assert all(b >= a * (1 - 1e-2) for a, b in zip(residuals[:-1], residuals[1:], strict=True))
    assert last.choice.rule == "discrepancy"


def test_starts_above_and_below_the_target_end_at_the_same_alpha() -> None:
    problem = _problem()
    down = list(stream_alpha(problem, _runner(), noise_std=0.05, start=1.0))[-1]
    up = list(stream_alpha(problem, _runner(), noise_std=0.05, start=1e-4))[-1]
    guessed = list(stream_alpha(problem, _runner(), noise_std=0.05))[-1]
    target = up.choice.target
    assert up.choice.path[0]["discrepancy"] < target  # it did start below
    assert down.choice.path[0]["discrepancy"] > target  # and above
    for run in (up, guessed):
        assert run.choice.alpha == pytest.approx(down.choice.alpha, rel=0.12)
    # the first guess lands near the crossing: fewer solves than a start a decade off
    assert len(guessed.choice.path) <= len(down.choice.path)


def test_first_guess_scales_with_the_target_and_falls_back_without_a_prior_value(
        monkeypatch) -> None:
    problem = _problem()
    one, two = first_guess(problem, 0.1), first_guess(problem, 0.2)
    assert 0 < one < two and two == pytest.approx(2 * one, rel=1e-6)  # alpha ~ delta
    # its formula, recomputed: GUESS * target * ||y|| / TV(x_bp)
    from lbi_engine.solvers.joint.start import backprojection_start

    x_bp = backprojection_start(problem)
    tv = float(problem.reg.value(x_bp)[0])
    assert one == pytest.approx(GUESS * 0.1 * float(problem.y_delta.norm()) / tv, rel=1e-5)
    # a flat start has TV 0: no scale to read, the fixed start instead
    from lbi_engine.solvers.joint import start as _joint_start

    monkeypatch.setattr(_joint_start, "backprojection_start", lambda p: p.zeros_input())
    assert first_guess(problem, 0.1) == ALPHA_START


@pytest.mark.parametrize(("reg", "factor"), [("tv+box", GUESS_BOX), ("tv+nonneg", GUESS)])
def test_first_guess_of_a_boxed_prior_starts_lower(reg: str, factor: float) -> None:
    """A box (both bounds finite) keeps the residual up, so its crossing lies at a smaller
    alpha: the guess uses GUESS_BOX; a one-sided constraint keeps GUESS."""
    from lbi_engine.solvers.joint.start import backprojection_start

    plain = _problem()
    problem = problem_for(plain.network, plain.x_true, 1.0, std=0.05, reg=reg)
    x_bp = backprojection_start(problem)
    tv = float(problem.reg.value(x_bp)[0])
    assert math.isfinite(tv) and tv > 0
    want = factor * 0.1 * float(problem.y_delta.norm()) / tv
    assert first_guess(problem, 0.1) == pytest.approx(want, rel=1e-5)
    assert GUESS_BOX < GUESS


def test_a_path_solve_stops_once_its_residual_has_settled() -> None:
    problem = _problem()
    seen = []

    def counting(p, init, path_tol=None):
        for record in solve(p, "one-layer", stop=StopRule(max_iter=20_000, tol=0.0), init=init,
                            report_every=PATH_REPORT):
            seen.append(record.iteration)
            yield record

    last = list(stream_alpha(problem, counting, noise_std=0.05, start=1.0))[-1]
    path = last.choice.path
    # without a tolerance the runner would go to 20,000 per solve; settling ends each path
    # solve, and only the final (own stop rule: none here) runs to the cap
    assert all(p["iterations"] < 20_000 for p in path)
    assert all(p["iterations"] >= PATH_MIN_STEPS for p in path)


def test_tau_below_one_and_the_chosen_alpha_grows_with_the_noise() -> None:
    # a good estimate fits part of the noise, so its residual lies below the noise norm
    # (alpha/whole.py's docstring); tau is a fraction, not Morozov's worst-case factor >= 1, and
    # the fraction shrinks with the relative noise (more of a smaller noise is fitted)
    problem = _problem()
    y_norm = float(problem.y_delta.norm())
    taus = [tau_for(problem, rho * y_norm) for rho in (1e-4, 0.01, 0.03, 0.06, 0.12, 0.5, 3.0)]
    assert all(TAU_MIN <= t <= TAU < 1.0 for t in taus)
    assert taus == sorted(taus) and taus[0] == TAU_MIN and taus[-1] == TAU
    assert taus[3] == pytest.approx(TAU + TAU_SLOPE * math.log10(0.06 / RHO_KNEE))
    chosen = []
    for std in (0.01, 0.03, 0.09):  # the same truth, noise x3 per step
        last = list(stream_alpha(_problem(std), _runner(), noise_std=std))[-1]
        assert last.choice.rule == "discrepancy"
        # the chosen alpha's residual meets its target tau * E||noise||
        assert float(last.discrepancy[0]) == pytest.approx(last.choice.target,
                                                           rel=0.05)
        chosen.append(last.choice.alpha)
    assert chosen[0] < chosen[1] < chosen[2]


def test_expected_noise_norm_matches_the_realised_one_for_relu_outputs() -> None:
    # clipped Gaussian noise on 40 ReLU outputs; the estimate uses y_delta only
    values = []
    for seed in range(30):
        net = relu_perceptron(SIDE, 40, 0)
        problem = problem_for(net, disc(SIDE, 2.5).reshape(1, -1), 1.0, std=0.05, seed=seed)
        values.append(float(problem.delta[0]) / expected_noise_norm(problem, 0.05))
    assert sum(values) / len(values) == pytest.approx(1.0, abs=0.1)


def test_quasi_optimality_picks_the_smallest_neighbour_step() -> None:
    problem = _problem(std=0.0)
    last = list(stream_alpha(problem, _runner(), noise_std=None, start=0.3, alpha_min=3e-3,
                             factor=0.5))[-1]
    path = last.choice.path
    assert last.choice.rule == "quasi-optimality"
    alphas = [p["alpha"] for p in path]
    assert alphas[-1] >= 3e-3 > alphas[-1] * 0.5  # walked down to alpha_min
    # independent cold solves at the path's alphas
    from dataclasses import replace

    xs = [final(solve(replace(problem, alpha=a), "one-layer",
                      stop=StopRule(max_iter=20_000, tol=1e-7))).x[0].double() for a in alphas]
    steps = [float((b - a).norm()) for a, b in zip(xs[:-1], xs[1:], strict=True)]
    best = min(range(len(steps)), key=steps.__getitem__)
    assert last.choice.alpha == pytest.approx(alphas[best])


def test_result_json_repeats_the_run_with_the_chosen_alpha_frozen(tmp_path, capsys) -> None:
    from lbi_engine.cli import main

    args = ["invert", "--network", "mnist-perceptron-ae", "--sample", "5", "--noise-std",
            "0.05", "--threads", "1", "-q"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    first = json.loads((tmp_path / "a" / "result.json").read_text())
    m = first["metrics"]
    assert first["request"]["alpha"] == m["alpha"] and m["alpha_rule"] == "discrepancy"
    assert m["method_run"] == "one-layer" and len(m["alpha_path"]) >= 2
    assert math.isfinite(m["alpha"]) and m["alpha"] > 0
    assert main(["invert", "--record", str(tmp_path / "a" / "result.json"), "-q",
                 "--out", str(tmp_path / "b")]) == 0
    again = json.loads((tmp_path / "b" / "result.json").read_text())["metrics"]
    assert again["alpha_rule"] == "fixed" and again["alpha"] == m["alpha"]
    # the same alpha, solved cold instead of warm from the path: the same minimiser
    assert again["objective"] == pytest.approx(m["objective"], rel=2e-3)


def test_measured_data_without_a_noise_level_uses_quasi_optimality(tmp_path) -> None:
    import numpy as np

    from lbi_engine.cli import main

    code = torch.rand(1, 100).numpy().astype(np.float32)
    np.save(tmp_path / "code.npy", code)
    assert main(["invert", "--network", "mnist-perceptron-ae", "--data",
                 str(tmp_path / "code.npy"), "--threads", "1", "-q",
                 "--out", str(tmp_path / "q")]) == 0
    m = json.loads((tmp_path / "q" / "result.json").read_text())["metrics"]
    assert m["alpha_rule"] == "quasi-optimality"
    assert main(["invert", "--network", "mnist-perceptron-ae", "--data",
                 str(tmp_path / "code.npy"), "--noise-level", "0.05", "--threads", "1", "-q",
                 "--out", str(tmp_path / "d")]) == 0
    m = json.loads((tmp_path / "d" / "result.json").read_text())["metrics"]
    assert m["alpha_rule"] == "discrepancy"


def test_sweep_cells_keyed_auto_record_the_chosen_alpha(tmp_path) -> None:
    import csv

    from lbi_engine.cli import main

    assert main(["sweep", "--network", "mnist-perceptron-ae", "--methods", "auto",
                 "--alphas", "0.02,auto", "--noise-stds", "0.05", "--samples", "5", "-q",
                 "--out", str(tmp_path / "s")]) == 0
    with open(tmp_path / "s" / "results.csv", newline="") as fh:
        rows = {r["alpha"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"0.02", "auto"}
    assert float(rows["auto"]["alpha_chosen"]) > 0 and rows["auto"]["alpha_rule"] == "discrepancy"
    assert rows["0.02"]["alpha_chosen"] == ""
    # the same sample and noise draw as a single run with --alpha auto (the sweep reports, and
    # so checks the stop rule, every 50 iterations instead of 10: the paths stop a few
    # iterations apart)
    assert main(["invert", "--network", "mnist-perceptron-ae", "--sample", "5", "--seed", "5",
                 "--threads", "1", "-q", "--out", str(tmp_path / "one")]) == 0
    one = json.loads((tmp_path / "one" / "result.json").read_text())["metrics"]
    assert float(rows["auto"]["alpha_chosen"]) == pytest.approx(one["alpha"], rel=1e-2)


def test_quasi_optimality_path_solves_end_by_their_objective_rule_not_by_settling() -> None:
    """The discrepancy search's path solves run without a tolerance (0) and are ended by the
    settle test; quasi-optimality's run to the objective rule at QUASI_TOL (their own final
    record), since the rule compares neighbouring iterates; the chosen alpha's solve gets the
    run's own rule (None)."""
    from lbi_engine.solvers.alpha import QUASI_TOL

    asked: list[float | None] = []
    ended: list[bool] = []

    def recording(p, init, path_tol=None):
        asked.append(path_tol)
        tol = 1e-6 if path_tol is None else path_tol
        last = None
        for last in solve(p, "one-layer", stop=StopRule(max_iter=20_000, tol=tol), init=init,
                          report_every=PATH_REPORT):
            yield last
        ended.append(last is not None and last.final)

    list(stream_alpha(_problem(std=0.0), recording, noise_std=None, start=0.3,
                      alpha_min=3e-3, factor=0.5))
    assert asked[:-1] == [QUASI_TOL] * (len(asked) - 1) and asked[-1] is None
    assert all(ended)  # no quasi-optimality path solve was cut short
    asked.clear()
    ended.clear()
    list(stream_alpha(_problem(), recording, noise_std=0.05, start=1.0))
    assert set(asked[:-1]) == {0.0} and asked[-1] is None


def test_the_final_record_counts_every_step_of_the_search() -> None:
    """choice.solver_steps: the path solves' steps and the final solve's, which the
    final record's iteration (counted from the path point it continued) does not hold."""
    from lbi_engine.api import InversionRequest, iterate, prepare
    from lbi_engine.models.zoo import load_zoo

    request = InversionRequest(network="mnist-cnn-ae", regulariser="tv",
                               split="train", index=7, noise_std=0.02,
                               report_every=5)
    records = list(iterate(prepare(request, load_zoo("mnist-cnn-ae"))))
    last = records[-1]
    path = last.choice.path
    # every solve starts at the iteration its warm start carries: count the steps between
    # consecutive records of the same stage
    steps, previous = 0, None
    for record in records:
        if previous is not None and record.iteration > previous.iteration:
            steps += record.iteration - previous.iteration
        previous = record
    assert last.choice.solver_steps == steps
    assert last.choice.solver_steps >= sum(p["iterations"] for p in path)


def test_an_implausible_measured_slope_falls_back_to_the_prior_one() -> None:
    """Two path points whose slope lies outside [MIN_SLOPE, MAX_SLOPE] (one of them not
    settled) give SLOPE, not the clipped value; a plausible pair gives its own slope."""
    from lbi_engine.solvers.alpha import MIN_SLOPE, SLOPE, PathPoint, _local_slope

    def point(alpha: float, residual: float) -> PathPoint:
        return PathPoint(alpha, residual, 0.0, 0.0, 20, 0.0)

    plausible = [point(1e-3, 1.10), point(2e-3, 1.10 * 2 ** 0.3)]
    assert _local_slope(plausible, 1.0) == pytest.approx(0.3)
    flat = [point(1.08e-3, 1.043), point(0.965e-3, 1.035)]  # slope 0.07
    assert _local_slope(flat, 1.0) == SLOPE and MIN_SLOPE > 0.07
    steep = [point(1e-3, 1.1), point(1.1e-3, 2.0)]
    assert _local_slope(steep, 1.0) == SLOPE
    assert _local_slope(plausible[:1], 1.0) == SLOPE
    # a search's own prior (the weighted search's RAISED_SLOPE) replaces SLOPE in both cases
    assert _local_slope(plausible[:1], 1.0, 0.15) == 0.15
    assert _local_slope(flat, 1.0, 0.15) == 0.15
    assert _local_slope(plausible, 1.0, 0.15) == pytest.approx(0.3)


def _settle_steps(residuals: list[float]) -> int | None:
    """The iteration at which ``alpha._Settled`` ends a path solve whose records (every
    PATH_REPORT steps) carry these residuals (objective = residual), or None."""
    from types import SimpleNamespace

    from lbi_engine.solvers.alpha import PATH_REPORT, _Settled

    settled = _Settled()
    records = [SimpleNamespace(iteration=PATH_REPORT * k, discrepancy=torch.tensor([d]),
                               objective=torch.tensor([d])) for k, d in enumerate(residuals)]
    for record in records:
        if settled(record, records[0]):
            return int(record.iteration)
    return None


def test_a_creeping_residual_is_not_settled_until_its_tail_is_small() -> None:
    from lbi_engine.solvers.alpha import CREEP_RATIO, PATH_MIN_STEPS, PATH_RTOL

    # moves of 0.1 % per span, shrinking by 0.99 per span: each below PATH_RTOL, but the
    # geometric tail (q / (1 - q) = 99 moves) is 10 % of d: not settled until it is small
    q = 0.99
    creeping = [1.0 - 1e-3 * sum(q ** j for j in range(k)) for k in range(2000)]
    steps = _settle_steps(creeping)
    assert steps is not None and steps > 10 * PATH_MIN_STEPS
    k = steps // 5
    tail = 1e-3 * q ** (k - 1) * q / (1 - q)
    assert tail <= PATH_RTOL * creeping[k] * 1.01  # it ended where the tail met the rule
    # the same first moves shrinking fast (ratio below CREEP_RATIO): settled at the minimum
    fast = [1.0 - 1e-3 * sum((0.5 * CREEP_RATIO) ** j for j in range(k)) for k in range(50)]
    assert _settle_steps(fast) == PATH_MIN_STEPS
    # moves at rounding level never count as creeping: a flat residual settles at once
    flat = [0.5 + 1e-9 * (-1) ** k for k in range(50)]
    assert _settle_steps(flat) == PATH_MIN_STEPS


def test_an_unreachable_target_keeps_the_largest_alpha_that_fits_as_well() -> None:
    """When the residual stays above the discrepancy target down to alpha_min, the search
    keeps the largest alpha whose residual is within FIT_FLOOR of the smallest reached, not
    alpha_min: below it the data are fitted no better and only the noise comes in."""
    from lbi_engine.solvers.alpha import FIT_FLOOR, PathPoint, _fit_floor

    def point(alpha: float, residual: float) -> PathPoint:
        return PathPoint(alpha, residual, 0.0, 0.0, 20, 0.0)

    # a residual that flattens at 14.8 below alpha 1e-2 (target 9.85 is out of reach)
    path = [point(3e-2, 19.0), point(1.2e-2, 15.6), point(3e-3, 15.0), point(1e-4, 14.8)]
    assert 15.6 <= (1 + FIT_FLOOR) * 14.8 < 19.0
    assert path[_fit_floor(path)].alpha == 1.2e-2
    # a residual still falling steeply at alpha_min: alpha_min it is
    falling = [point(1e-2, 40.0), point(1e-3, 20.0), point(1e-4, 10.0)]
    assert path[_fit_floor(path)].alpha == 1.2e-2 and falling[_fit_floor(falling)].alpha == 1e-4


def _flattening_search(monkeypatch, residual_of, target: float, start: float):
    """_discrepancy_search over a scalar model residual(alpha): each 'solve' is one fake
    record; returns the alphas solved at and the chosen one."""
    from types import SimpleNamespace

    from lbi_engine.solvers.alpha import whole

    solved: list[float] = []

    def fake_solve_at(problem, alpha, solve, init, stage, offset, path_tol=0.0):
        solved.append(alpha)
        record = SimpleNamespace(alpha=alpha, stop_reason="settled")
        return record, record
        yield  # a generator, as the real one

    monkeypatch.setattr(whole, "_solve_at", fake_solve_at)
    monkeypatch.setattr(whole, "_warm", lambda record, problem: {})
    monkeypatch.setattr(whole, "_point", lambda alpha, first, last: whole.PathPoint(
        alpha, residual_of(alpha), 0.0, 0.0, 20, 0.0))
    search = whole._discrepancy_search(None, None, target, start, whole.ALPHA_MIN)
    try:
        while True:
            next(search)
    except StopIteration as done:
        path, _, chosen, near = done.value
    return solved, chosen, path[near].alpha


def test_a_flattened_residual_ends_the_search_at_its_closest_fit(monkeypatch) -> None:
    """The path a random vgg11 slice took (64x64 colour, std 0.05, target 7.69): the
    residual falls 2 % per step below alpha 2.4e-3. The search stops after two flat steps
    and keeps the largest alpha whose residual is within MATCH of the one nearest the
    target (2.4e-3 / 1.5e-3 there: 19.8 / 20.4 dB on the path), where it used to walk six
    more solves down to 2e-4 (16.2 dB)."""
    from lbi_engine.solvers.alpha import MATCH

    def residual(alpha: float) -> float:  # 9.2 at 1.5e-3, slope 0.045 below 0.024
        return 9.2 * (alpha / 1.5e-3) ** 0.045 if alpha < 0.024 else 10.52 * (alpha / 0.024) ** 0.11

    solved, chosen, near = _flattening_search(monkeypatch, residual, 7.69, 0.0727)
    assert len(solved) <= 5 and chosen == near
    closest = min(residual(a) for a in solved)
    assert chosen == max(a for a in solved if math.log(residual(a) / closest) <= MATCH)
    assert 1e-3 < chosen < 2.5e-2


def test_a_residual_that_rises_as_alpha_falls_keeps_its_smallest_fit(monkeypatch) -> None:
    """A lifted solve's residual through the network can rise as alpha falls (a random
    resnet18 stem without its pool: 12.3 at 3.5e-3, 12.7 at 2e-3, 13.2 at 1e-3, target 9.8):
    the search stops and keeps the smallest residual's alpha, not the last one."""
    import math as m

    def residual(alpha: float) -> float:  # a minimum of 12.3 at 3.5e-3 in log alpha
        return 12.3 + 1.5 * m.log(alpha / 3.5e-3) ** 2

    solved, chosen, near = _flattening_search(monkeypatch, residual, 9.8, 0.25)
    best = min(solved, key=residual)
    assert chosen == near == best and chosen != solved[-1]
    assert abs(m.log(chosen / 3.5e-3)) < m.log(10)


def test_a_steep_residual_still_walks_to_its_crossing(monkeypatch) -> None:
    """A power law of slope 0.4 crosses its target: the out-of-reach stop never fires, and
    the search ends within MATCH of the crossing (alpha 1e-3 here)."""
    from lbi_engine.solvers.alpha import MATCH

    solved, chosen, _ = _flattening_search(monkeypatch, lambda a: 5.0 * (a / 1e-3) ** 0.4,
                                           5.0, 0.1)
    assert abs(math.log(chosen / 1e-3)) * 0.4 <= MATCH + 1e-12


def test_one_flat_step_is_not_out_of_reach() -> None:
    """A single flat step (a path solve that settled early) does not stop the search; two
    consecutive flat steps whose extrapolation needs alpha below alpha_min do."""
    from lbi_engine.solvers.alpha import ALPHA_MIN, PathPoint
    from lbi_engine.solvers.alpha.residual_path import _out_of_reach

    def point(alpha: float, residual: float) -> PathPoint:
        return PathPoint(alpha, residual, 0.0, 0.0, 20, 0.0)

    one_flat = [point(1e-1, 20.0), point(1e-2, 10.0), point(5e-3, 9.9)]
    two_flat = [point(2.4e-2, 10.52), point(2.4e-3, 9.40), point(1.47e-3, 9.195)]
    assert not _out_of_reach(one_flat, 7.69, ALPHA_MIN)
    assert _out_of_reach(two_flat, 7.69, ALPHA_MIN)
    # flat, but the target is close enough that the steeper slope reaches it above alpha_min
    assert not _out_of_reach(two_flat, 9.0, ALPHA_MIN)


@pytest.mark.parametrize(("reg", "factor"), [("tv+box", "TAU_BOX"), ("tv+nonneg", None)])
def test_a_boxed_prior_aims_at_a_larger_residual(reg: str, factor: str | None) -> None:
    """The discrepancy target of a prior with a box is TAU_BOX times TV's (the box keeps the
    residual up at the same alpha); a one-sided constraint keeps TV's target. Read from the
    runs' own alpha_target, on the same code."""
    from lbi_engine import api
    from lbi_engine.solvers import final
    from lbi_engine.solvers.alpha import whole

    def target(regulariser: str) -> float:
        request = api.InversionRequest(network="mnist-cnn-ae", dataset="mnist", split="train",
                                       index=7, seed=7, noise_std=0.1, regulariser=regulariser,
                                       max_iter=60)
        prepared = api.prepare(request)
        return float(api.final_metrics(prepared, final(api.iterate(prepared))).alpha_target)

    want = getattr(whole, factor) if factor else 1.0
    assert 1.0 < whole.TAU_BOX <= 1.2
    assert target(reg) / target("tv") == pytest.approx(want, rel=1e-9)


def test_an_unreachable_target_on_a_graph_raises_the_hidden_weight_and_searches_again(
        monkeypatch) -> None:
    """MATH.md §5.7: hidden weight "auto" is 1 until the discrepancy search ends above its
    target (beyond MATCH) on a network the api marked (extras[AUTO_WEIGHT] = 1): then the
    search runs again at HIDDEN_WEIGHT_RAISED, and the final solve, its record and the step
    count say so. A reached target, or an unmarked problem, keeps weight 1."""
    import dataclasses
    from types import SimpleNamespace

    from lbi_engine.models.rescale import AUTO_WEIGHT, HIDDEN_WEIGHT_RAISED
    from lbi_engine.solvers.alpha import whole

    def run(extras: dict, residual: float) -> tuple[list[float], object]:
        searched: list[float] = []

        def fake_search(problem, solve, target, alpha, alpha_min, spent=0.0, init=None,
                        slope=None):
            weight = problem.extras.get(AUTO_WEIGHT, 1.0)
            searched.append(weight)
            # the weighted search starts from a flatter residual curve (RAISED_SLOPE)
            assert slope == (None if weight == 1.0 else whole.RAISED_SLOPE)
            reached = residual if weight == 1.0 else target
            point = whole.PathPoint(0.01, reached, 0.0, 0.0, 100, 1.0)
            return [point], [SimpleNamespace(iteration=100)], 0.01, 0
            yield  # a generator, as the real one

        def fake_solve(problem, init, path_tol):
            yield SimpleNamespace(final=True, elapsed=0.0, iteration=120, extras={},
                                  hidden_weight=problem.extras.get(AUTO_WEIGHT, 1.0), stage="")

        monkeypatch.setattr(whole, "_discrepancy_search", fake_search)
        monkeypatch.setattr(whole, "_warm", lambda record, problem: {})
        monkeypatch.setattr(whole, "first_guess", lambda problem, target: 0.01)
        problem = dataclasses.replace(_problem(), extras=extras)
        target = whole.tau_for(problem, whole.expected_noise_norm(problem, 0.05)) * \
            whole.expected_noise_norm(problem, 0.05)
        records = list(whole.stream_alpha(problem, fake_solve, noise_std=0.05))
        return searched, records[-1], target

    searched, last, target = run({AUTO_WEIGHT: 1.0}, residual=1e6)
    assert searched == [1.0, HIDDEN_WEIGHT_RAISED]
    assert last.hidden_weight == HIDDEN_WEIGHT_RAISED
    assert "raised to 100" in last.choice.hidden_weight_rule
    assert last.choice.path_unweighted == [whole.PathPoint(0.01, 1e6, 0.0, 0.0, 100, 1.0).to_dict()]
    assert last.choice.solver_steps == 100 + 100 + 20  # both paths and the final solve
    searched, last, _ = run({AUTO_WEIGHT: 1.0}, residual=target)  # reached at weight 1
    assert searched == [1.0] and last.hidden_weight == 1.0
    searched, last, _ = run({}, residual=1e6)  # a chain or a fixed weight: never raised
    assert searched == [1.0] and last.choice.hidden_weight_rule is None
    assert last.choice.path_unweighted is None


def test_the_time_split_adds_up_to_the_run_and_records_name_their_stage() -> None:
    """result.json's time_split (lbi_engine/solvers/alpha/time_split.py): a start, one
    entry per search solve (the path's points, in order) and the final solve, whose
    iterations add up to the run's solver_steps and seconds to its solver time; the search's
    records say which solve they belong to, the final solve's say so."""
    from lbi_engine.api import InversionRequest, final_metrics, iterate, prepare
    from lbi_engine.models.zoo import load_zoo

    request = InversionRequest(network="mnist-cnn-ae", regulariser="tv", split="train",
                               index=7, noise_std=0.02, report_every=5)
    prepared = prepare(request, load_zoo("mnist-cnn-ae"))
    records = list(iterate(prepared))
    last = records[-1]
    metrics = final_metrics(prepared, last).to_dict()
    split = metrics["time_split"]
    path = last.choice.path
    assert [s["stage"] for s in split] == ["start"] + ["alpha search"] * len(path) + \
        ["final solve"]
    assert [s["alpha"] for s in split[1:-1]] == [p["alpha"] for p in path]
    assert [s["point"] for s in split[1:-1]] == list(range(1, len(path) + 1))
    assert split[-1]["alpha"] == last.choice.alpha
    assert sum(s["iterations"] for s in split) == last.choice.solver_steps
    assert sum(s["seconds"] for s in split) == pytest.approx(last.elapsed, rel=1e-6)
    assert all(s["seconds"] >= 0 for s in split)
    assert metrics["timings"]["alpha_search"] == pytest.approx(
        sum(s["seconds"] for s in split[1:-1]))
    assert metrics["timings"]["final_solve"] == split[-1]["seconds"]
    search = [r for r in records[:-1] if getattr(r.position, "stage", None) == "alpha search"]
    assert sorted({r.position.point for r in search}) == list(range(1, len(path) + 1))
    assert all(r.position.points_at_most == MAX_POINTS for r in search)
    assert last.position.stage == "final solve"
    copied = last.to_numpy()  # the GUI's copy of a record carries both, the choice its own
    assert copied["choice"] == last.choice and copied["choice"] is not last.choice
    assert copied["position"] == last.position
