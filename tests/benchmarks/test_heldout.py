"""The held-out evaluation's design, split, measuring and table (benchmarks.heldout).

No timing is asserted: the quick run only checks that one tiny case goes through lbi's CLI
and L-BFGS and gives finite numbers.
"""

from __future__ import annotations

import math

import pytest


def test_halves_share_no_photograph_and_no_seed() -> None:
    from benchmarks.heldout import design

    calibrate, report = design.cases("calibrate"), design.cases("report")
    assert {c.photo for c in calibrate} == set(design.PHOTOS["calibrate"])
    assert {c.photo for c in report} == set(design.PHOTOS["report"])
    assert not {c.photo for c in calibrate} & {c.photo for c in report}
    assert not {c.seed for c in calibrate} & {c.seed for c in report}
    assert not {c.key for c in calibrate} & {c.key for c in report}


@pytest.mark.parametrize("half", ["calibrate", "report"])
def test_each_architecture_sees_every_noise_level_and_both_weight_kinds(half: str) -> None:
    from benchmarks.heldout import design

    cases = [c for c in design.cases(half) if c.side == design.SIDE]
    assert len({c.arch for c in cases}) >= 10
    for arch in design.ARCHS:
        mine = [c for c in cases if c.arch == arch]
        assert sorted(c.noise for c in mine) == sorted(design.NOISES)
        assert sorted(c.weights for c in mine) == ["random", "random", "trained", "trained"]
    sizes = sorted(c.side for c in design.cases(half) if c.side != design.SIDE)
    assert sizes == sorted(design.SIZES)


def test_photographs_are_distinct_crops_of_the_asked_side() -> None:
    import numpy as np

    from benchmarks.heldout import design

    crops = {n: design.photograph(n, 64) for p in design.PHOTOS.values() for n in p}
    assert all(c.shape == (64, 64, 3) and c.dtype == np.uint8 for c in crops.values())
    assert all(c.std() > 10 for c in crops.values())  # a photograph, not a flat area
    names = list(crops)
    assert all(not np.array_equal(crops[a], crops[b])
               for i, a in enumerate(names) for b in names[i + 1:])


def test_grid_centre_balances_tv_against_the_noise_and_time_within() -> None:
    import torch

    from benchmarks.heldout.measure import FLOOR, SPREAD, _time_within, grid

    truth = torch.zeros(1, 3, 4, 4)
    truth[..., 2:, :] = 1.0  # one horizontal edge: TV = 3 channels x 3 columns x 1
    y = torch.zeros(1, 50)
    alphas = grid(y, truth, std=0.1, rms=1.0)
    assert alphas == pytest.approx(tuple(50 * 0.01 / 9 * f for f in SPREAD))
    # no noise: the floor's level (FLOOR x RMS) takes its place
    assert grid(y, truth, 0.0, 1.0)[1] == pytest.approx(50 * FLOOR ** 2 / 9)
    curve = [(0.1, 10.0), (0.2, 19.7), (0.3, 19.9), (0.5, 20.0)]
    assert _time_within(curve) == 0.3


def test_a_run_whose_stage_reached_the_cap_is_marked_capped(tmp_path) -> None:
    from benchmarks.heldout import report
    from benchmarks.heldout.measure import reached_cap

    row = {"lbi_stop": "tolerance", "t_alpha_search": 50.0, "t_solver_total": 60.0}
    assert not reached_cap(row, 100.0)
    assert reached_cap({**row, "t_alpha_search": 99.0}, 100.0)
    assert reached_cap({**row, "lbi_stop": "time_budget"}, 100.0)
    path = tmp_path / "rows.csv"
    report.write_rows(path, [{"case": "c", "status": "ok", **row, "t_solver_total": 98.0}])
    assert report.read_rows(path)[0]["status"] == "ok"  # no cap known
    assert report.read_rows(path, cap=100.0)[0]["status"] == "capped"


def test_table_counts_refused_cases_against_the_bars() -> None:
    from benchmarks.heldout import report

    ok = {"arch": "a", "format": "onnx", "side": 64.0, "status": "ok", "diff_db": -0.2,
          "time_ratio": 1.5, "lbi_solve_s": 3.0, "lbfgs_time_s": 2.0,
          "t_alpha_search": 1.0, "t_solver_total": 2.0, "message": ""}
    bad = {**ok, "diff_db": -3.0, "time_ratio": 9.0}
    refused = {"arch": "b", "format": "pt2", "side": 64.0, "status": "refused",
               "message": "node 'cat' cannot be lifted"}
    lines = report.table([ok, bad, refused])
    assert lines[2] == ("| a | onnx | 2/2 | -1.60 | -3.00 | 1/2 | 5.2 | 1/2 | 3.0 | 2.00 | "
                        "1.0 / 2.0 |  |")
    assert lines[3].startswith("| b | pt2 | 0/1 | – | – | 0/1 |")
    assert "node 'cat' cannot be lifted" in lines[3]
    assert report.summary([ok, bad, refused]).startswith("All 64×64 cases: 1/3 within 0.5 dB")


def test_quick_run_measures_one_tiny_case_with_finite_numbers(tmp_path) -> None:
    from benchmarks.heldout import design, report
    from benchmarks.heldout.__main__ import main
    from benchmarks.heldout.measure import finite_numbers

    path = tmp_path / "rows.csv"
    assert main(["--half", "calibrate", "--quick", "--csv", str(path)]) == 0
    (row,) = report.read_rows(path)
    assert row["status"] == "ok" and row["photo"] in design.PHOTOS["calibrate"]
    assert finite_numbers(row), row
    assert row["lbi_psnr"] > 5 and row["lbfgs_psnr"] > 5
    assert row["noise_std"] == pytest.approx(0.01 * row["output_rms"])
    assert math.isclose(row["diff_db"], row["lbi_psnr"] - row["lbfgs_psnr"], abs_tol=1e-9)
