"""Did a change of the code change what the one-layer Condat–Vũ step costs against its floor?

Question it answered (benchmarks/RESULTS.md, "one-layer step cost"): whether the second pass
over the house added work to ``lbi invert --method pdhg --steps balanced`` (circle problem,
W 512x4096, float32, one image), and what the one-pass gradient then saved, with every
version measured on the same machine in the same run.

    python -m benchmarks.studies.step_cost_versions --threads 1 TREE [TREE ...]

Each TREE is a checkout of lbi (``git archive COMMIT | tar -x -C TREE``). For ``--processes``
rounds, one child process per tree in turn (so all of them meet the same load) imports that
tree's code and measures, as ``benchmarks.suite.bench_iteration`` does: the solver time
between two records (``IterateRecord.elapsed``: records excluded) per iteration over chunks
of ``--chunk`` iterations, and in the same rounds the floor, one ``W x`` plus one ``W^T r``
(``benchmarks.problems.circle(1).floor``); its ratio is the median over rounds of
(iteration / floor). A child uses only what every version since 2026-11-25 has:
``lbi_engine.solvers.solve``, ``StopRule``, ``benchmarks.problems.circle``. Several
processes per tree because where the iterate slots fall relative to W modulo 4 KiB (4K
aliasing in ``W^T r``) varied from process to process before the slots were placed.
Reported per tree: the median over its processes and their range, wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

_MEASURE = "--measure"


def _measure(chunk: int, rounds: int, threads: int) -> dict[str, float]:
    """Runs in a child whose sys.path starts at the tree to measure."""
    import torch

    from benchmarks.problems import circle
    from lbi_engine.problem import InversionProblem
    from lbi_engine.solvers import StopRule, solve

    torch.set_num_threads(threads)
    case = circle(1)
    p = case.problem  # without ground truth: records skip PSNR/SSIM
    problem = InversionProblem(p.network, p.y_delta, p.regulariser, p.alpha,
                               image_shape=p.image_shape)
    # tol > 0: the stop test runs every iteration as in real runs (it never fires here)
    records = solve(problem, "pdhg", stop=StopRule(max_iter=10**9, tol=1e-12),
                    options={"steps": "balanced"}, report_every=chunk)
    last = next(records).elapsed
    solver, floor = [], []
    with torch.no_grad():
        for k in range(rounds + 2):  # two warm-up rounds
            record = next(records)
            step = (record.elapsed - last) / chunk
            last = record.elapsed
            start = time.perf_counter()
            for _ in range(chunk):
                case.floor()
            if k >= 2:
                solver.append(step)
                floor.append((time.perf_counter() - start) / chunk)
    return {"ratio": statistics.median(s / f for s, f in zip(solver, floor, strict=True)),
            "step_ms": statistics.median(solver) * 1e3,
            "floor_ms": statistics.median(floor) * 1e3}


def main(argv: list[str] | None = None) -> list[str]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("trees", nargs="+", help="checkouts of lbi to compare")
    parser.add_argument("--threads", type=int, default=1, help="torch threads in each child")
    parser.add_argument("--processes", type=int, default=5, help="children per tree")
    parser.add_argument("--chunk", type=int, default=25, help="iterations per round")
    parser.add_argument("--rounds", type=int, default=30, help="rounds per child")
    args = parser.parse_args(argv)
    rows: dict[str, list[dict[str, float]]] = {tree: [] for tree in args.trees}
    for _ in range(args.processes):
        for tree in args.trees:
            env = {**os.environ, "PYTHONPATH": os.path.abspath(tree),
                   "OMP_NUM_THREADS": str(args.threads)}
            out = subprocess.run(
                [sys.executable, os.path.abspath(__file__), _MEASURE, str(args.chunk),
                 str(args.rounds), str(args.threads)],
                cwd=tree, env=env, check=True, capture_output=True, text=True).stdout
            rows[tree].append(json.loads(out.strip().splitlines()[-1]))
    lines = [f"threads {args.threads}, {args.processes} processes per tree x {args.rounds} "
             f"rounds of {args.chunk} iterations; load {os.getloadavg()[0]:.2f} at the end",
             "| tree | iteration / floor (median of processes) | range | step ms | floor ms |",
             "|---|---:|---|---:|---:|"]
    for tree, runs in rows.items():
        ratios = [r["ratio"] for r in runs]
        lines.append(f"| {tree} | {statistics.median(ratios):.3f} | "
                     f"{min(ratios):.3f}–{max(ratios):.3f} | "
                     f"{statistics.median(r['step_ms'] for r in runs):.3f} | "
                     f"{statistics.median(r['floor_ms'] for r in runs):.3f} |")
    print("\n".join(lines), flush=True)
    return lines


if __name__ == "__main__":
    if sys.argv[1:2] == [_MEASURE]:
        sys.path.insert(0, os.getcwd())  # the tree measured, before this file's folder
        chunk_, rounds_, threads_ = (int(v) for v in sys.argv[2:5])
        print(json.dumps(_measure(chunk_, rounds_, threads_)))
    else:
        main()
