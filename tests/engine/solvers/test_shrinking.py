"""A batch that sheds its stopped samples (``solvers.shrinking``) against two independent runs
of the same samples: each sample alone (B = 1: another code path, the one `lbi invert` takes)
and the whole batch with stopped samples frozen (``solve``). Every sample must stop at the
same iteration for the same reason, at the same iterate."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import GaussianPrior, LowRankGaussian, make_regulariser
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers.shrinking import problem_rows, solve_shrinking
from tests.engine._nets import relu_mlp
from tests.engine._solver_cases import disc, noisy

SIDE = 8


def _truths(batch: int) -> torch.Tensor:
    """Discs of different radii and brightness: samples that converge at different speeds."""
    return torch.stack([(0.4 + 0.1 * (i % 5)) * disc(SIDE, 1.5 + 0.5 * i).reshape(-1)
                        for i in range(batch)])


def _prior() -> LowRankGaussian:
    g = torch.Generator().manual_seed(4)
    n = SIDE * SIDE
    return LowRankGaussian(torch.full((n,), 0.3, dtype=torch.float64),
                           0.1 * torch.randn(n, 3, generator=g, dtype=torch.float64),
                           0.01 + 0.01 * torch.rand(n, generator=g, dtype=torch.float64))


def _problem(reg: str, batch: int = 6) -> InversionProblem:
    net = relu_mlp((SIDE * SIDE, 40, 20), seed=3, gain=1.5)
    x_true = _truths(batch)
    y_delta, delta = noisy(net, x_true, 0.05, seed=2)
    regulariser = GaussianPrior(_prior(), 0.0, 1.0) if reg == "gaussian" else \
        make_regulariser("tv+box")
    return InversionProblem(net, y_delta, regulariser, 0.02 if reg == "gaussian" else 0.01,
                            x_true=x_true, delta=delta, image_shape=(1, SIDE, SIDE))


@pytest.mark.parametrize("reg", ["gaussian", "tv"])
def test_every_sample_stops_where_it_stops_alone(reg: str) -> None:
    problem = _problem(reg)
    stop = StopRule(max_iter=3000, tol=1e-5, tol_mode="objective")
    shrunk = solve_shrinking(problem, "joint", stop=stop, report_every=10)
    counts = shrunk.extras["stop_iterations"]
    assert len(set(counts)) > 2  # the samples stopped at different iterations: rows left
    whole = final(solve(problem, "joint", stop=stop, report_every=10))
    assert shrunk.stop_reasons == whole.stop_reasons
    assert shrunk.iteration == whole.iteration == max(counts)
    # the whole batch froze each sample at its stop: the same iterate, all blocks
    assert torch.allclose(shrunk.x, whole.x, rtol=0, atol=1e-12)
    for mine, theirs in zip(shrunk.aux, whole.aux, strict=True):
        assert torch.allclose(mine, theirs, rtol=0, atol=1e-12)
    assert torch.allclose(shrunk.objective, whole.objective, rtol=1e-12, atol=0)
    for i in range(problem.batch):
        alone = final(solve(problem_rows(problem, torch.tensor([i])), "joint", stop=stop,
                            report_every=10))
        assert alone.iteration == counts[i], i
        assert alone.stop_reasons == [shrunk.stop_reasons[i]] == ["tolerance"]
        assert torch.allclose(alone.x[0], shrunk.x[i], rtol=0, atol=1e-9), i
        assert float(alone.psnr[0]) == pytest.approx(float(shrunk.psnr[i]), abs=1e-8)
    assert np.isfinite(shrunk.ssim.numpy()).all()


def test_a_sample_at_the_cap_keeps_the_cap_and_its_reason() -> None:
    problem = _problem("tv", batch=3)
    stop = StopRule(max_iter=25, tol=1e-12, tol_mode="objective")
    shrunk = solve_shrinking(problem, "joint", stop=stop, report_every=10)
    assert shrunk.extras["stop_iterations"] == [25, 25, 25]
    assert shrunk.stop_reasons == ["max_iterations"] * 3
    whole = final(solve(problem, "joint", stop=stop, report_every=10))
    assert torch.allclose(shrunk.x, whole.x, rtol=0, atol=1e-12)


def test_other_methods_run_as_one_batch() -> None:
    problem = _problem("tv", batch=2)
    stop = StopRule(max_iter=7, tol=0.0)
    shrunk = solve_shrinking(problem, "landweber", stop=stop, report_every=10)
    assert shrunk.extras["stop_iterations"] == [7, 7]
    whole = final(solve(problem, "landweber", stop=stop, report_every=10))
    assert torch.equal(shrunk.x, whole.x)


@pytest.mark.parametrize("reg", ["gaussian", "tv"])
def test_shares_solved_at_once_merge_to_the_whole_batch(reg: str) -> None:
    from lbi_engine.solvers.shrinking import solve_shrinking_split

    problem = _problem(reg, batch=7)
    stop = StopRule(max_iter=3000, tol=1e-5, tol_mode="objective")
    whole = solve_shrinking(problem, "joint", stop=stop, report_every=10)
    split = solve_shrinking_split(problem, "joint", 2, stop=stop, report_every=10)
    assert split.extras["stop_iterations"] == whole.extras["stop_iterations"]
    assert split.stop_reasons == whole.stop_reasons
    assert split.iteration == whole.iteration
    for mine, theirs in ((split.x, whole.x), (split.objective, whole.objective),
                         (split.psnr, whole.psnr), (split.ssim, whole.ssim),
                         *zip(split.aux, whole.aux, strict=True)):
        assert torch.allclose(mine, theirs, rtol=0, atol=1e-12)
