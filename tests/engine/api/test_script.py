"""lbi_engine.solve, the script's call: a request or a problem in, a typed SolveResult out,
by the same path as ``lbi invert`` (api.prepare / iterate / final_metrics)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from lbi_engine import api
from lbi_engine.errors import InputError
from lbi_engine.request import InversionRequest
from lbi_engine.settings.solver import StopRule


def _request(**overrides: object) -> InversionRequest:
    return InversionRequest(network="mnist-perceptron-ae", dataset="mnist", split="val",
                            index=0, noise_std=0.05, seed=0, **overrides)  # type: ignore[arg-type]


def test_solve_of_a_request_is_run_to_end_typed() -> None:
    import lbi_engine as lbi

    assert lbi.solve is api.solve and lbi.SolveResult is api.SolveResult
    request = _request(alpha=0.02, max_iter=300)
    prepared, final, records = api.run_to_end(request)
    expected = api.final_metrics(prepared, final)
    result = lbi.solve(request)
    assert isinstance(result, api.SolveResult)
    assert torch.equal(result.x, final.x)
    assert [r.iteration for r in result.history] == [r.iteration for r in records]
    assert result.history[-1].final and result.iterations == final.iteration
    assert (result.alpha, result.alpha_rule, result.method_run) == (0.02, "fixed", "one-layer")
    assert result.stop_reason == expected.stop_reason and result.stop_rule == \
        expected.stop_rule
    assert result.psnr == pytest.approx(expected.psnr, abs=0)
    assert result.ssim == pytest.approx(expected.ssim, abs=0)
    assert result.decoder_psnr == pytest.approx(expected.decoder_psnr, abs=0)
    assert result.psnr is not None and result.psnr > result.decoder_psnr - 3  # a real image
    # the arguments override the request's settings: the same as a request that says them
    other = lbi.solve(request, alpha=0.05, stop=StopRule(max_iter=40, tol=0.0))
    _, final_other, _ = api.run_to_end(dataclasses.replace(request, alpha=0.05, max_iter=40,
                                                           tol=0.0))
    assert torch.equal(other.x, final_other.x)
    assert other.alpha == 0.05 and other.iterations == 40 and other.stop_reason == "max_iterations"


def test_solve_of_a_problem_runs_the_method_on_it() -> None:
    from lbi_engine import solve
    from lbi_engine.solvers import solve as solve_records

    problem = api.prepare(_request(alpha=0.02)).problem
    stop = StopRule(max_iter=150)
    result = solve(problem, method="pdhg", stop=stop)
    direct = list(solve_records(problem, "pdhg", stop=stop, report_every=10))[-1]
    assert torch.equal(result.x, direct.x) and result.iterations == direct.iteration
    assert result.alpha == 0.02 and result.alpha_rule == "fixed"
    assert result.psnr == pytest.approx(float(direct.psnr[0]), abs=0)
    # an alpha of the call replaces the problem's, which stays as it was
    stronger = solve(problem, 0.2, method="pdhg", stop=stop)
    direct = list(solve_records(dataclasses.replace(problem, alpha=0.2), "pdhg", stop=stop,
                                report_every=10))[-1]
    assert torch.equal(stronger.x, direct.x) and stronger.alpha == 0.2
    assert problem.alpha == 0.02


def test_auto_alpha_of_a_problem_is_the_requests_with_the_same_noise_level() -> None:
    from lbi_engine import solve

    request = _request(alpha="auto", max_iter=2000)
    by_request = solve(request)
    by_problem = solve(api.prepare(request).problem, "auto", noise_level=0.05)
    assert by_request.alpha_rule == by_problem.alpha_rule == "discrepancy"
    assert by_problem.alpha == by_request.alpha and torch.equal(by_problem.x, by_request.x)
    # without a noise level the rule that needs none
    assert solve(api.prepare(request).problem, "auto", stop=StopRule(max_iter=200)) \
        .alpha_rule == "quasi-optimality"


def test_solve_names_what_it_cannot_run() -> None:
    from lbi_engine import solve

    with pytest.raises(InputError, match="got a str; give an InversionRequest"):
        solve("mnist-cnn-ae")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="alpha='often'"):
        solve(api.prepare(_request(alpha=0.02)).problem, "often")
