"""Alpha "auto" by continuation on the exact problem, then the lifted solve (MATH.md §5.8).

Checked against independent computations: the smooth TV against lbi's TV (its limit as
eps -> 0) and its gradient against finite differences; the path's rule against the path's
own residuals; the lifted solve's start against the forward states (a feasible point: every
hidden Bregman term 0) and its end against the lifted objective (it only goes down).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.errors import InputError
from lbi_engine.models.network import LiftedNetwork
from lbi_engine.models.rescale import AUTO_WEIGHT, HIDDEN_WEIGHT_RAISED
from lbi_engine.settings.solver import SolverOptions, StopRule
from lbi_engine.solvers import solve
from lbi_engine.solvers.alpha import continuation
from tests.engine._solver_cases import problem_for


def _net() -> LiftedNetwork:
    torch.manual_seed(3)
    module = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU(),
                           nn.Conv2d(6, 4, 3, padding=1, stride=2), nn.ReLU())
    return LiftedNetwork.from_module(module.double().eval(), (3, 10, 10))


def _fitting_net() -> LiftedNetwork:
    """400 outputs of 300 inputs and no stride: the noise's share a fit can leave lies below
    the discrepancy target, so the principle has a solution."""
    torch.manual_seed(3)
    module = nn.Sequential(nn.Conv2d(3, 5, 3, padding=1), nn.ReLU(),
                           nn.Conv2d(5, 4, 3, padding=1), nn.ReLU())
    return LiftedNetwork.from_module(module.double().eval(), (3, 10, 10))


def _truth() -> torch.Tensor:
    yy, xx = torch.meshgrid(torch.linspace(0, 1, 10, dtype=torch.float64),
                            torch.linspace(0, 1, 10, dtype=torch.float64), indexing="ij")
    channels = [0.5 + 0.3 * torch.sin(3 * xx + c) * torch.cos(2 * yy) for c in range(3)]
    return torch.stack(channels).reshape(1, 3, 10, 10)


def _run(problem, noise_std: float | None) -> list:
    def path_solve(p, init, path_tol=None):
        return solve(p, "joint", stop=StopRule(max_iter=20000, tol=1e-4), init=init,
                     report_every=10)

    return list(continuation.stream_continuation(problem, path_solve, noise_std=noise_std))


def test_smooth_tv_tends_to_lbi_tv_and_bounds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    problem = problem_for(_net(), _truth(), alpha=1e-3, std=0.01)
    x = torch.rand(1, 3, 10, 10, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    exact = float(problem.reg.value(x)[0])
    smooth = float(continuation._smooth_tv(problem, x))
    # sqrt(a + e^2) lies in [sqrt(a), sqrt(a) + e] per pixel
    assert exact <= smooth <= exact + 100 * continuation.EPSILON + 1e-12
    monkeypatch.setattr(continuation, "EPSILON", 1e-9)
    assert float(continuation._smooth_tv(problem, x)) == pytest.approx(exact, rel=1e-9)


def test_smooth_tv_gradient_matches_finite_differences() -> None:
    problem = problem_for(_net(), _truth(), alpha=1e-3, std=0.01)
    x = torch.rand(1, 3, 10, 10, dtype=torch.float64,
                   generator=torch.Generator().manual_seed(2)).requires_grad_(True)
    assert torch.autograd.gradcheck(lambda v: continuation._smooth_tv(problem, v), (x,))


@pytest.mark.parametrize("std", [0.005, 0.01])  # the walk goes down, then up
def test_discrepancy_path_brackets_the_target_and_the_lifted_solve_starts_feasible(
        std: float) -> None:
    problem = problem_for(_fitting_net(), _truth(), alpha=1.0, std=std,
                          extras={AUTO_WEIGHT: 1.0})  # as the api marks a weighable network
    records = _run(problem, std)
    last = records[-1]
    assert last.final and last.stop_reason in ("tolerance", "finished")
    assert last.ssim is not None
    choice = last.choice
    path = choice.path
    alphas = [p["alpha"] for p in path]
    residuals = [p["discrepancy"] for p in path]
    assert choice.rule == "continuation: discrepancy"
    target = choice.target
    # the walk is monotone in alpha (down from the first alpha, or up where the first one
    # already fitted the target) and its last step crossed the target
    walk, fits = alphas[:-1], residuals[:-1]
    steps = [b / a for a, b in zip(walk, walk[1:], strict=False)]
    assert steps and all(math.isclose(q, steps[0], rel_tol=1e-9) for q in steps)
    assert (fits[-1] <= target) != (fits[-2] <= target)
    assert all((r <= target) == (fits[0] <= target) for r in fits[:-1])
    # the chosen alpha lies between the crossing's ends, its residual between theirs
    assert alphas[-1] == choice.alpha
    assert min(walk[-2:]) <= choice.alpha <= max(walk[-2:])
    assert min(fits[-2:]) * 0.95 <= residuals[-1] <= max(fits[-2:]) * 1.05
    first_lifted = next(r for r in records if getattr(r.position, "stage", None) == "final solve")
    steps = last.iteration - first_lifted.iteration
    assert steps <= continuation.REFINE_STEPS
    assert last.stop_reason == "tolerance" or steps == continuation.REFINE_STEPS
    hidden = first_lifted.bregman_terms[0, :-1]
    assert float(hidden.abs().max()) < 1e-3 * float(first_lifted.objective[0])
    assert float(last.objective[0]) <= float(first_lifted.objective[0]) + 1e-12
    assert last.hidden_weight == HIDDEN_WEIGHT_RAISED
    split = choice.time_split
    assert [s.stage for s in split] == (["start"] + ["alpha search"] * len(path)
                                           + ["final solve"])


def test_without_a_noise_level_the_walk_ends_at_the_residual_floor() -> None:
    problem = problem_for(_net(), _truth(), alpha=1.0, std=0.0)
    last = _run(problem, None)[-1]
    *path, end = last.choice.path
    assert last.choice.rule == "continuation: floor"
    # the walk's end is solved on at its alpha (FINAL_ITERATIONS > POINT_ITERATIONS)
    assert end["alpha"] == path[-1]["alpha"] == last.choice.alpha
    assert end["evaluations"] <= continuation.FINAL_ITERATIONS
    r = [p["discrepancy"] for p in path]
    at_end = len(path) == continuation.MAX_POINTS or \
        path[-1]["alpha"] * continuation.FACTOR < path[0]["alpha"] * continuation.LOWEST
    assert at_end or r[-1] >= (1 - continuation.FLOOR_DROP) * r[-2]
    assert all(q < p * (1 - continuation.FLOOR_DROP) for p, q in zip(r[:-2], r[1:-1],
                                                                     strict=True))


def test_the_first_alpha_is_the_data_gradient_scaled() -> None:
    problem = problem_for(_net(), _truth(), alpha=1.0, std=0.01)
    x = torch.full_like(problem.zeros_input(), 0.5).requires_grad_(True)
    loss = 0.5 * (problem.network.forward(x) - problem.y_delta).pow(2).sum()
    (g,) = torch.autograd.grad(loss, x)
    expected = continuation.FIRST * float(g.norm())
    assert continuation.first_alpha(problem, x.detach()) == pytest.approx(expected, rel=1e-12)


def test_it_applies_to_tv_on_multi_layer_image_networks_only() -> None:
    problem = problem_for(_net(), _truth(), alpha=1.0, std=0.01)
    assert continuation.applies(problem)
    assert not continuation.applies(dataclasses.replace(problem, regulariser=_l1()))
    with pytest.raises(InputError, match="start"):
        SolverOptions(start="somewhere")


def _l1():
    from lbi_engine.regularisers import make_regulariser

    return make_regulariser("l1")


def test_lbi_invert_on_an_onnx_file_uses_it_and_the_option_switches_it_off(tmp_path) -> None:
    pytest.importorskip("onnx")
    from PIL import Image

    from lbi_engine.cli import main

    torch.manual_seed(0)
    module = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(),
                           nn.Conv2d(4, 4, 3, padding=1, stride=2), nn.ReLU()).eval()
    net = tmp_path / "net.onnx"
    import contextlib
    import io
    import warnings

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.rand(1, 3, 16, 16),), str(net))
    image = tmp_path / "img.png"
    pixels = (255 * _truth_image(16)).astype(np.uint8)
    Image.fromarray(pixels).save(image)
    rules = {}
    for start in ("auto", "back-projection"):
        out = tmp_path / start
        assert main(["invert", "--network", str(net), "--image", str(image), "--noise-std",
                     "0.01", "--out", str(out), "--option", f"start={start}"]) == 0
        import json

        rules[start] = json.loads((out / "result.json").read_text())["metrics"]["alpha_rule"]
    assert rules["auto"].startswith("continuation")
    assert not rules["back-projection"].startswith("continuation")


def _truth_image(side: int) -> np.ndarray:
    yy, xx = np.meshgrid(np.linspace(0, 1, side), np.linspace(0, 1, side), indexing="ij")
    return np.stack([0.5 + 0.3 * np.sin(3 * xx + c) * np.cos(2 * yy) for c in range(3)],
                    axis=-1)


def test_the_bundled_networks_keep_their_calibrated_search() -> None:
    from lbi_engine import api
    from lbi_engine.api.running import starts_by_continuation
    from lbi_engine.request import InversionRequest

    prepared = api.prepare(InversionRequest(network="natural-cnn-ae", dataset="natural",
                                            noise_std=0.05))
    assert not starts_by_continuation(prepared.problem, prepared.request, prepared.method)
    assert math.isfinite(float(prepared.problem.y_delta.sum()))


def test_max_iter_bounds_the_path_and_the_lifted_solve() -> None:
    problem = problem_for(_net(), _truth(), alpha=1.0, std=0.01)

    def path_solve(p, init, path_tol=None):
        return solve(p, "joint", stop=StopRule(max_iter=55), init=init, report_every=5)

    records = list(continuation.stream_continuation(problem, path_solve, noise_std=0.01,
                                                    max_iter=55))
    last = records[-1]
    assert last.final and last.stop_reason == "max_iterations"
    spent = sum(p["evaluations"] for p in last.choice.path)
    assert spent <= 55
    assert last.iteration - spent == 55  # the lifted solve's own cap, as after any search


def test_a_flat_start_is_not_taken_for_the_residual_floor(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """From an alpha far above the flat threshold the first points are all the flat image, so
    their residual does not move; the walk must go on until the fit begins."""
    monkeypatch.setattr(continuation, "FIRST", 1e4)
    problem = problem_for(_net(), _truth(), alpha=1.0, std=0.0)
    records = _run(problem, None)
    path = records[-1].choice.path
    flat = [p for p in path if p["discrepancy"] >= 0.95 * path[0]["discrepancy"]]
    assert len(flat) >= 2  # the start was flat for at least two points ...
    assert len(path) > len(flat)  # ... and the walk went past them
    assert path[-1]["discrepancy"] < 0.5 * path[0]["discrepancy"]
    assert float(records[-1].psnr[0]) > path[0]["psnr"] + 1.0


def test_progress_records_within_a_point_move_on_and_change_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Records every chunk (LIVE_EVERY 0) against none within points (LIVE_EVERY inf): the
    same path and the same answer; within a point the iteration (evaluations) only grows."""
    problem = problem_for(_net(), _truth(), alpha=1.0, std=0.01)
    monkeypatch.setattr(continuation, "LIVE_EVERY", math.inf)
    quiet = _run(problem, 0.01)
    monkeypatch.setattr(continuation, "LIVE_EVERY", 0.0)
    live = _run(problem, 0.01)
    searching = [r for r in live if getattr(r.position, "stage", None) == "alpha search"]
    assert len(searching) > len(quiet[-1].choice.path)  # more than one per point
    steps = [r.iteration for r in searching]
    assert steps == sorted(steps) and len(set(steps)) == len(steps)
    assert not any(r.final for r in live[:-1])
    assert torch.equal(live[-1].x, quiet[-1].x)
    assert live[-1].choice.path == [
        {**p, "seconds": q["seconds"]} for p, q in
        zip(quiet[-1].choice.path, live[-1].choice.path, strict=True)]
