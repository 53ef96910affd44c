"""Condat–Vũ runs whose per-step changes are left to the records (``step_noting_changes``,
``RunMonitor.note_change_later``) against the same runs computing them every step (``step``,
the path before): every record equal bit for bit (iterate, dual, residuals, objective, active
flags, stop reasons), with the objective rule stopping samples one by one, and with samples
that diverge; and the monitor's side of the contract."""

from __future__ import annotations

from unittest import mock

import pytest
import torch
from torch import nn

from lbi_engine.models.network import LiftedNetwork
from lbi_engine.operators.backend import FUSED_TV_ENV
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import StopRule, solve
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.base import StopReason
from lbi_engine.solvers.one_layer.primal_dual import PrimalDualBlock

pytest.importorskip("lbi_engine.solvers.kernels.tv_primal_dual")


def _problem(reg: str, dtype: torch.dtype, seed: int = 0) -> InversionProblem:
    """A ReLU perceptron on 12x12 discs, three samples of different contrast (they settle at
    different iterations), seeded noise."""
    torch.manual_seed(seed)
    side = 12
    module = nn.Sequential(nn.Flatten(), nn.Linear(side * side, 90), nn.ReLU())
    net = LiftedNetwork.from_module(module, (1, side, side)).to(dtype=dtype)
    yy, xx = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    disc = ((yy - 6) ** 2 + (xx - 5) ** 2 < 16).to(dtype)
    x_true = disc * torch.tensor([1.0, 0.5, 0.2], dtype=dtype)[:, None, None, None]
    y = net.forward(x_true)
    noise = torch.randn(y.shape, generator=torch.Generator().manual_seed(seed + 1)).to(dtype)
    return InversionProblem(net, (y + 0.01 * noise).clamp_min(0), make_regulariser(reg), 0.02,
                            x_true=x_true)


def _records(problem: InversionProblem, stop: StopRule, options: dict,
             eager: bool) -> list:
    run = solve(problem, "pdhg", stop=stop, options={"steps": "balanced", **options},
                report_every=7)
    if not eager:
        return list(run)
    with mock.patch.object(PrimalDualBlock, "step_noting_changes", PrimalDualBlock.step):
        first = next(run)  # the method is built: it keeps the patched step
    return [first, *run]


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and torch.equal(a, b)
    return a == b


CASES = [("tv", torch.float32, StopRule(max_iter=400, tol=1e-3), {}),
         ("tv", torch.float64, StopRule(max_iter=400, tol=3e-4), {}),
         ("tv+box", torch.float32, StopRule(max_iter=400, tol=1e-3), {}),
         ("tv", torch.float32, StopRule(max_iter=300, tol=0.0), {}),
         ("tv", torch.float32, StopRule(max_iter=300, tol=1e-4, tol_mode="relative"), {}),
         # steps far beyond the stable ones: the samples diverge, caught by the records'
         # blow-up rule, or (float32 overflowing between two records) by the step itself
         ("tv", torch.float64, StopRule(max_iter=200, tol=1e-4), {"step_scale": 40.0}),
         ("tv", torch.float32, StopRule(max_iter=200, tol=1e-4), {"step_scale": 1e9})]


@pytest.mark.parametrize(("reg", "dtype", "stop", "options"), CASES)
def test_records_equal_bit_for_bit_to_changes_every_step(
        reg: str, dtype: torch.dtype, stop: StopRule, options: dict,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FUSED_TV_ENV, "1")
    problem = _problem(reg, dtype)
    deferred = mock.patch.object(RunMonitor, "note_change_later", autospec=True,
                                 side_effect=RunMonitor.note_change_later)
    with deferred as noted:
        later = _records(problem, stop, options, eager=False)
    now = _records(problem, stop, options, eager=True)
    assert len(later) == len(now) >= 2
    fields = ("iteration", "x", "aux", "objective", "bregman_terms", "reg_term", "discrepancy",
              "primal_residual", "dual_residual", "active", "psnr", "ssim", "final",
              "stop_reasons")
    for a, b in zip(later, now, strict=True):
        for field in fields:
            u, v = getattr(a, field), getattr(b, field)
            if isinstance(u, list) and u and isinstance(u[0], torch.Tensor):
                assert all(_same(p, q) for p, q in zip(u, v, strict=True)), field
            else:
                assert _same(u, v), (field, a.iteration)
        assert _same(a.warm.dual, b.warm.dual)
    reasons = later[-1].stop_reasons
    if stop.tol_mode == "objective":  # the changes were left to the records
        assert noted.call_count > 0
    if "step_scale" in options:
        assert reasons == ["diverged"] * 3
    elif stop.tol_mode == "objective" and stop.tol > 0:
        # samples stopped one by one (from then on every step computes its changes)
        assert any(bool(r.active.any()) and not bool(r.active.all()) for r in later)
        assert "tolerance" in reasons


def test_the_monitor_computes_a_noted_change_only_for_a_record() -> None:
    problem = _problem("tv", torch.float64)
    monitor = RunMonitor(problem, "pdhg", StopRule(max_iter=10), None, 5)
    calls: list[int] = []
    dx = torch.tensor([0.1, 0.2, 0.3], dtype=torch.float64)
    dz = torch.tensor([0.4, 0.5, 0.6], dtype=torch.float64)

    def changes() -> tuple[torch.Tensor, torch.Tensor | None]:
        calls.append(1)
        return dx, dz

    assert monitor.changes_read_at_records()
    monitor.note_change_later(changes)
    monitor.note_change(dx * 2, dz * 2)  # a change noted since: the pending one is dropped
    monitor.note_change_later(changes)
    monitor.note_change_later(changes)
    assert calls == []
    x = problem.zeros_input()
    record = monitor.record(x, [])
    assert calls == [1]
    assert torch.equal(record.primal_residual, dx) and torch.equal(record.dual_residual, dz)
    monitor.record(x, [], final=True)  # nothing pending: not called again
    assert calls == [1]
    monitor.note_change_later(changes)
    part = monitor.subset(problem, torch.tensor([0, 2]))  # a subset sees the change
    assert calls == [1, 1]
    assert torch.equal(part._last_dx, dx[[0, 2]])
    # a stopped sample, or a tolerance on the changes: they are needed every step
    running = RunMonitor(problem, "pdhg", StopRule(max_iter=10), None, 5)
    running.finish(torch.tensor([True, False, False]), StopReason.TOLERANCE)
    assert not running.changes_read_at_records()
    relative = RunMonitor(problem, "pdhg", StopRule(tol_mode="relative"), None, 5)
    assert not relative.changes_read_at_records()
