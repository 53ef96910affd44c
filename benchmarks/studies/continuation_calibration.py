"""Where should the continuation path (MATH.md §5.8) stop, and how long should each point
run? Answered on the held-out evaluation's CALIBRATION half only (benchmarks/heldout).

For each calibration case (random weights, 64 x 64 unless ``--all``) it prints one JSON line:
L-BFGS through the torch module at its best grid alpha (as ``benchmarks.heldout`` measures
it), and lbi's continuation at the defaults in-process, with every path point's alpha,
residual and PSNR, the rule that ended the walk, the PSNR after the lifted solve and the
seconds of each stage. Constants can be overridden (``--set POINT_ITERATIONS=40``) to compare
variants on the same cases. One thread (``torch.set_num_threads(1)``), as the benchmark runs.

    PYTHONPATH=. python -m benchmarks.studies.continuation_calibration [--arch A,B] [--set K=V]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.heldout import design, measure, nets


def _reference(case: design.Case, module: torch.nn.Module, y: torch.Tensor,
               x_true: torch.Tensor, std: float, rms: float, cache: Path | None) -> dict:
    """L-BFGS at its best grid alpha, from ``cache`` (a JSON file of earlier runs of this
    study, keyed by case) where it holds the case: the variants of one study share it."""
    stored = json.loads(cache.read_text()) if cache is not None and cache.exists() else {}
    if case.key not in stored:
        stored[case.key] = measure.lbfgs_best(module, y, x_true,
                                              measure.grid(y, x_true, std, rms))
        if cache is not None:
            cache.write_text(json.dumps(stored))
    return stored[case.key]


def _case_run(case: design.Case, folder: Path, cache: Path | None = None) -> dict:
    from lbi_engine import api
    from lbi_engine.request import InversionRequest

    module = measure.module_for(case)
    network = measure.export(module, folder / f"{case.arch}.{nets.arch(case.arch).fmt}",
                             case.side)
    image = design.write_png(case.photo, case.side, folder)
    truth = torch.from_numpy(design.photograph(case.photo, case.side).transpose(2, 0, 1).copy())
    with torch.no_grad():
        rms = float(module(truth[None].float() / 255).pow(2).mean().sqrt())
    std = case.noise * rms
    prepared = api.prepare(InversionRequest(network=str(network), image=str(image),
                                            noise_std=std, seed=case.seed))
    y, x_true = prepared.problem.y_delta, prepared.problem.x_true
    assert x_true is not None
    reference = _reference(case, module, y, x_true, std, rms, cache)
    points, started, last = [], time.perf_counter(), None
    for record in api.iterate(prepared):
        if record.position is not None and record.position.stage == "alpha search":
            points.append({"alpha": record.position.alpha,
                           "residual": float(record.discrepancy[0]),
                           "psnr": float(record.psnr[0]) if record.psnr is not None else None})
        last = record
    assert last is not None and last.choice is not None
    choice, split = last.choice, last.choice.time_split or []
    return {"case": case.key, "lbfgs_psnr": reference["lbfgs_psnr"],
            "lbfgs_s": reference["lbfgs_time_s"], "rule": choice.rule,
            "alpha": choice.alpha, "path": points,
            "psnr": float(last.psnr[0]) if last.psnr is not None else None,
            "stop": last.stop_reason, "seconds": time.perf_counter() - started,
            "forward": choice.path_forward,
            "evaluations": sum(s.iterations for s in split if s.stage == "alpha search"),
            "time_split": [s.to_dict() for s in split]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.studies.continuation_calibration",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="", help="comma-separated architectures (default all)")
    parser.add_argument("--all", action="store_true", help="trained weights and sizes too")
    parser.add_argument("--set", action="append", default=[],
                        help="override a constant of lbi_engine.solvers.alpha.continuation "
                        "(or of another module of that package: exact_forward.AGREE=-1)")
    parser.add_argument("--limit", type=int, default=None,
                        help="only the first N cases (every architecture's first comes first)")
    parser.add_argument("--skip", type=int, default=0, help="leave out the first N cases")
    parser.add_argument("--reference-cache", type=Path, default=None,
                        help="a JSON file keeping L-BFGS's results per case between runs")
    args = parser.parse_args(argv)
    import importlib

    for item in args.set:
        key, value = item.split("=", 1)
        where, _, key = key.rpartition(".")
        owner = importlib.import_module(f"lbi_engine.solvers.alpha.{where or 'continuation'}")
        kind = type(getattr(owner, key))
        if value == "None":  # TAU=None: the lifted search's tau(rho)
            setattr(owner, key, None)
        else:
            setattr(owner, key, int(float(value)) if kind is int else float(value))
    torch.set_num_threads(1)
    archs = [a for a in args.arch.split(",") if a] or None
    chosen = [c for c in design.cases("calibrate", archs)
              if args.all or (c.side == design.SIDE and c.weights == "random")]
    for case in chosen[args.skip:args.limit]:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                row = _case_run(case, Path(tmp), args.reference_cache)
            except Exception as exc:  # a refused or failing case is a result too
                row = {"case": case.key, "error": f"{type(exc).__name__}: {exc}"[:300]}
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
