"""The benchmark package imports and its measuring functions run on a trivial size.

No timing is asserted (that is what ``python -m benchmarks`` reports); this only keeps the
benchmark code from rotting while the engine changes under it.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def _tiny_case(batch: int = 2):
    from benchmarks.problems import Case, floor_of
    from lbi_engine.models.network import LiftedNetwork
    from lbi_engine.problem import InversionProblem
    from lbi_engine.regularisers import make_regulariser

    torch.manual_seed(0)
    module = nn.Sequential(nn.Flatten(), nn.Linear(36, 20), nn.ReLU())
    network = LiftedNetwork.from_module(module, (1, 6, 6))
    x_true = torch.rand(batch, 1, 6, 6)
    problem = InversionProblem(network, network.forward(x_true), make_regulariser("tv"), 0.05,
                               x_true=x_true)
    return Case("tiny", problem, "pdhg", floor_of(network, batch))


def test_registry_names_importable_modules() -> None:
    import importlib

    import benchmarks

    for module, _title in benchmarks.BENCHMARKS.values():
        assert callable(importlib.import_module(f"benchmarks.suite.{module}").run)


def test_per_iteration_measures_solver_floor_and_port() -> None:
    from benchmarks.suite.bench_iteration import per_iteration

    m = per_iteration(_tiny_case(), rounds=2, chunk=3, baseline=True)
    for key in ("solver", "floor", "ratio", "port", "port_ratio"):
        assert math.isfinite(m[key]) and m[key] > 0


def test_iterations_to_gap_finds_the_gap_of_a_known_optimum() -> None:
    from benchmarks.problems import as_float64
    from benchmarks.suite.bench_convergence import iterations_to_gap
    from lbi_engine.solvers import StopRule, final, solve

    case = _tiny_case(batch=1)
    reference = final(solve(as_float64(case.problem), "pdhg", stop=StopRule(max_iter=4000,
                                                                            tol=1e-12)))
    e_star = float(reference.objective[0])
    out = iterations_to_gap(case.problem, e_star, {"steps": "balanced"}, cap=3000, gap=1e-3)
    assert out["iterations"] is not None and 0 < out["iterations"] <= 3000
    assert out["final_gap"] <= 1e-3


def test_report_renders_every_section() -> None:
    from benchmarks._common import Figure, Section
    from benchmarks.report import render

    section = Section("x", "X")
    section.add(Figure("a", 1.0, "ms", 0.5, "floor", target="<= 1.3", passed=False))
    text = render([section], {"cpu": "test"}, quick=True, loads=(1.0, None), seconds=1.0,
                  command="python -m benchmarks --quick")
    assert "| a | 1 ms | 0.5 floor | 2 | <= 1.3 | **no** |" in text
    assert "quick mode" in text and "indicative only" in text


def test_curves_average_each_runs_last_point_and_write_figures(tmp_path) -> None:
    import numpy as np

    from benchmarks.studies import _curves

    a = [(0.1, 10.0), (0.3, 20.0)]
    b = [(0.2, 14.0), (0.4, 18.0)]
    assert _curves.psnr_at(a, 0.05) is None
    assert _curves.psnr_at(a, 0.3) == 20.0  # a point at t counts at t
    assert _curves.psnr_at(a, 9.0) == 20.0  # a finished run keeps its final PSNR
    # before b's first point: no mean; then (10 + 14) / 2, (20 + 14) / 2, (20 + 18) / 2
    means = _curves.mean_curve([a, b], np.array([0.15, 0.25, 0.35, 1.0]))
    assert means == [None, 12.0, 17.0, 19.0]
    written = _curves.write(tmp_path, {0.05: {"A": [a], "B": [b]}}, "demo")
    assert [p.name for p in written] == ["demo_sigma0.05.png", "demo.csv"]
    assert written[0].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    rows = written[1].read_text().splitlines()
    assert rows[0] == "sigma,method,run,seconds,psnr_db"
    assert rows[1:] == ["0.05,A,0,0.100000,10.0000", "0.05,A,0,0.300000,20.0000",
                        "0.05,B,0,0.200000,14.0000", "0.05,B,0,0.400000,18.0000"]


def test_bench_sizes_measures_a_tiny_geometry_and_renders_its_row() -> None:
    from benchmarks.studies import bench_sizes

    geometry = bench_sizes.QUICK["lenet64"]
    module = bench_sizes.module_of(geometry)
    truth = bench_sizes.truth_of(geometry.input_shape)
    assert truth.shape == geometry.input_shape and 0 <= truth.min() and truth.max() <= 1
    m = bench_sizes.per_iteration(module, truth, steps=2, rounds=1)
    assert all(math.isfinite(m[k]) and m[k] > 0 for k in ("step", "floor", "ratio"))
    best = bench_sizes.lbfgs_best(module, truth, iters=2)
    assert best["alpha"] in bench_sizes.LBFGS_GRID and math.isfinite(best["psnr"])
    row = {"name": "lenet64", "shape": [1, 24, 24], **m, "iterations": 7, "path_solves": 1,
           "stop": "max_iterations", "wall": 1.5, "psnr": 9.87, "peak_rss_mb": 321.0,
           "lbfgs": best}
    line = bench_sizes.table([row])[-1]
    assert line.startswith("| lenet64 (1x24x24) |") and "| 7 (1 + 1) | max_iterations |" in line


def test_bench_sizes_runs_the_cli_at_its_defaults_in_a_child() -> None:
    from benchmarks.studies import bench_sizes

    geometry = bench_sizes.QUICK["chain64x3"]
    out = bench_sizes.at_defaults(bench_sizes.module_of(geometry),
                                  bench_sizes.truth_of(geometry.input_shape), budget=None,
                                  max_iter=3)
    assert out["stop"] == "max_iterations" and out["iterations"] >= 3
    assert out["path_solves"] >= 1 and out["peak_rss_mb"] > 50 and out["wall"] > 0
    assert math.isfinite(out["psnr"])


def test_bench_device_times_the_cpu_and_skips_cuda_without_one(monkeypatch) -> None:
    from benchmarks.suite import bench_device

    m = bench_device.joint_rate("chain64x3", "cpu", batch=2, steps=2, quick=True)
    assert m["step"] > 0 and m["throughput"] == 2 / m["step"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert bench_device.devices() == ["cpu"]
