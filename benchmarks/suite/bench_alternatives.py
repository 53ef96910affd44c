"""Time to a 1e-4 objective gap on the circle problem against cvxpy and pyproximal.

* cvxpy: each installed conic solver that handles the problem (second-order cone), default
  settings; its time includes building the model (what a user pays). Its solution's gap is
  measured with the engine's float64 objective; the fastest solver reaching 1e-4 is the peer.
* pyproximal: ``PrimalDual`` (Chambolle–Pock form, x-step first) runs exactly our Condat–Vũ
  iteration with the same step sizes when its ``proxf`` is the explicit gradient step of the
  data term (a ProxOperator that remembers the previous iterate): same iterates, so the
  comparison is implementation speed. Its time to the gap = its iterations to the gap x its
  time per iteration (measured without the objective-evaluating callback).
* ours: solver time to the gap (``IterateRecord.elapsed``; objective evaluations of the
  benchmark excluded) plus the set-up a fresh network costs (operator norm). The default
  method (accelerated, numba-compiled prox) also has a one-time cost per process (importing
  numba and loading the cached kernels), measured in a fresh interpreter and shown apart, as
  importing cvxpy is not counted either.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from benchmarks._common import Figure, Section, check, threads
from benchmarks._reference import cvx_solve, optimum
from benchmarks.problems import as_float64, circle
from benchmarks.suite.bench_convergence import GAP, iterations_to_gap

SOLVERS = ("CLARABEL", "SCS", "ECOS")
TARGET_CVX = 20.0
TARGET_PYPROX = 2.0
TARGET_BATCH = 50.0


def _setup_seconds(case: Any) -> float:
    """What a fresh network costs before the first iteration: ||W|| (exact, eigvalsh)."""
    from lbi_engine.operators import LinearMap
    from lbi_engine.solvers.one_layer.inplace import dense_matrix

    w, b = dense_matrix(case.problem.network.layers[0].affine)
    fresh = LinearMap(w.clone(), None if b is None else b.clone())
    start = time.perf_counter()
    fresh.norm()
    return time.perf_counter() - start


def _kernel_load_seconds() -> float | None:
    """One-time cost of the compiled prox in a fresh process: import numba, load the cached
    kernels (compiling them if the cache is cold) for float32 images."""
    import subprocess
    import sys

    code = ("import time, torch, numpy as np\n"
            "t = time.perf_counter()\n"
            "from lbi_engine.regularisers import TVProx, TotalVariation\n"
            "ok = TVProx.compiles_on('cpu')\n"
            "if ok: TotalVariation().fgp(1, (2, 2), torch.zeros(1))\n"
            "print(time.perf_counter() - t if ok else -1)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=False)
    try:
        value = float(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None
    return value if value >= 0 else None


def _pyproximal(problem: Any, tau_x: float, tau_z: float, e_star: float, cap: int
                ) -> dict[str, Any]:
    import pylops
    import pyproximal
    from pyproximal.optimization.primaldual import PrimalDual

    from lbi_engine.solvers.one_layer.inplace import dense_matrix

    p64 = as_float64(problem)
    w_t, b_t = dense_matrix(problem.network.layers[0].affine)
    w = w_t.numpy().astype(np.float32)
    b = b_t.numpy().astype(np.float32)
    y = problem.y_delta.reshape(-1).numpy().astype(np.float32)
    h, wd = problem.image_shape[-2:]
    alpha = float(problem.alpha)
    grad_op = pylops.Gradient(dims=(h, wd), edge=False, kind="forward", dtype="float32")
    a_op = alpha * grad_op

    class GradientStep(pyproximal.ProxOperator):
        """'prox' of the data term = its explicit gradient step at the previous iterate,
        which turns PrimalDual into Condat–Vũ."""

        def __init__(self, x0: np.ndarray) -> None:
            super().__init__(None, False)
            self.x = x0

        def __call__(self, x: np.ndarray) -> float:
            z = w @ x + b
            return float(0.5 * y @ y + 0.5 * np.sum(np.maximum(z, 0) ** 2) - y @ z)

        def prox(self, v: np.ndarray, tau: float) -> np.ndarray:
            residual = np.maximum(w @ self.x + b, 0) - y
            self.x = v - tau * (w.T @ residual)
            return self.x

    def solve(niter: int, callback: Any = None) -> float:
        x0 = np.zeros(h * wd, dtype=np.float32)
        start = time.perf_counter()
        PrimalDual(GradientStep(x0), pyproximal.L21(ndim=2), a_op, x0, tau_x, tau_z,
                   theta=1.0, niter=niter, gfirst=False, callback=callback)
        return time.perf_counter() - start

    state = {"k": 0, "first": None}

    def watch(x: np.ndarray) -> None:
        state["k"] += 1
        if state["k"] % 10:
            return
        xt = torch.from_numpy(x.astype(np.float64)).reshape(1, 1, h, wd)
        with torch.no_grad():
            gap = (float(p64.objective_parts(xt)["total"][0]) - e_star) / abs(e_star)
        if gap > GAP:
            state["first"] = None
        elif state["first"] is None:
            state["first"] = state["k"]

    solve(cap, watch)
    per_iteration = solve(200) / 200
    its = state["first"]
    return {"iterations": its, "per_iteration": per_iteration,
            "seconds": None if its is None else its * per_iteration}


def run(quick: bool = False) -> Section:
    from lbi_engine.solvers import SolverOptions
    from lbi_engine.solvers.one_layer.primal_dual import PrimalDualBlock

    section = Section("alternatives", "4. Against cvxpy and pyproximal (circle, 1e-4 gap)")
    restore = threads(1)
    try:
        case = circle(1, quick=quick)
        p64 = as_float64(case.problem)
        key = case.name + str(case.problem.alpha)
        e_star = optimum(key, p64)
        setup = _setup_seconds(case)
        options = SolverOptions()
        ours = iterations_to_gap(case.problem, e_star, options.to_dict(), 20_000)
        ours_total = None if ours["seconds"] is None else ours["seconds"] + setup
        # cvxpy
        peers = {}
        import cvxpy

        for solver in SOLVERS:
            if solver not in cvxpy.installed_solvers():
                continue
            r = cvx_solve(key, p64, solver)
            gap = (r["value"] - e_star) / abs(e_star)
            peers[solver] = (r["seconds"], gap)
            section.add(Figure(f"cvxpy {solver}: time to its solution", r["seconds"], "s",
                               note=f"gap {gap:.1e}, status {r['status']}"))
        usable = {k: v for k, v in peers.items() if v[1] <= GAP}
        fastest = min(usable.items(), key=lambda kv: kv[1][0]) if usable else None
        if fastest is not None and ours_total:
            section.add(Figure(
                "ours (default method), 1 image: time to 1e-4 gap", ours_total, "s",
                fastest[1][0], f"s cvxpy {fastest[0]} (fastest)", fastest[1][0] / ours_total,
                f">= {TARGET_CVX:g}x faster", check(fastest[1][0] / ours_total, TARGET_CVX,
                                                   below=False),
                f"{ours['iterations']} iterations; set-up {setup:.2f} s included; "
                f"ratio = cvxpy time / ours" + _inner_note(ours)))
            load = _kernel_load_seconds()
            if load is not None:
                section.add(Figure(
                    "ours (default method), 1 image, first solve in a fresh process",
                    ours_total + load, "s", fastest[1][0], f"s cvxpy {fastest[0]} (fastest)",
                    fastest[1][0] / (ours_total + load), note=f"one-time numba import and "
                    f"kernel load {load:.2f} s added (cvxpy's import is not counted)"))
                section.data["kernel_load"] = load
        # pyproximal runs Condat–Vũ: compared on our Condat–Vũ rule "balanced" (the
        # default before the accelerated method), same step sizes, same iterates
        same_rule = {"steps": "balanced", "anderson": 0}
        block = PrimalDualBlock(case.problem.network.layers[0], case.problem,
                                SolverOptions(**same_rule), case.problem.zeros_input())
        ours_plain = iterations_to_gap(case.problem, e_star, same_rule, 20_000)
        pp = _pyproximal(case.problem, block.tau_x, block.tau_z, e_star,
                         cap=(ours_plain["iterations"] or 5000) * 2 + 100)
        if pp["seconds"] and ours_total:
            section.add(Figure(
                "ours (default method) against pyproximal PrimalDual (Condat–Vũ, balanced steps)",
                ours_total, "s", pp["seconds"], "s pyproximal", pp["seconds"] / ours_total,
                f">= {TARGET_PYPROX:g}x faster", check(pp["seconds"] / ours_total,
                                                      TARGET_PYPROX, below=False),
                f"pyproximal: {pp['iterations']} iterations x {pp['per_iteration']*1e3:.2f} ms"))
        if pp["per_iteration"] and ours_plain["seconds"]:
            per_it = ours_plain["seconds"] / ours_plain["iterations"]
            section.add(Figure(
                "same iteration (balanced Condat–Vũ): time per iteration, ours vs pyproximal",
                per_it * 1e3, "ms", pp["per_iteration"] * 1e3, "ms pyproximal",
                pp["per_iteration"] / per_it, note="ratio = pyproximal / ours; "
                f"iterations to the gap: ours {ours_plain['iterations']}, "
                f"pyproximal {pp['iterations']}"))
        section.data.update(e_star=e_star, ours=ours, ours_plain=ours_plain, peers=peers,
                            pyproximal=pp, setup=setup)
        if fastest is not None:
            _batch(section, quick, fastest, e_star)
    finally:
        restore()
    return section


def _inner_note(result: dict[str, Any]) -> str:
    inner = result.get("inner_steps")
    return f"; {inner} inner TV steps (numba)" if inner else ""


def _batch(section: Section, quick: bool, fastest: tuple, e_star0: float) -> None:
    """64 noise draws of the circle at once: per-sample time until every sample is within
    1e-4 of its own optimum, against the fastest cvxpy solver's time for one image."""
    from benchmarks.problems import objective64
    from lbi_engine.solvers import SolverOptions, StopRule, solve

    batch = 8 if quick else 64
    case = circle(batch, quick=quick)
    p64 = as_float64(case.problem)
    # per-sample optima: a long float64 run of the accelerated method (checked on sample 0
    # against cvxpy), far past the 1e-4 point of the float32 run below
    reference = None
    for rec in solve(p64, "pdhg", stop=StopRule(max_iter=3000 if quick else 6000, tol=0),
                     options={"steps": "balanced", "anderson": 5},
                     report_every=10**9):
        reference = rec
    e_star = objective64(p64, reference.x)
    check0 = (float(e_star[0]) - e_star0) / abs(e_star0)
    from benchmarks.suite.bench_iteration import _strip_truth

    first = None
    options = SolverOptions().to_dict()
    for rec in solve(_strip_truth(case.problem), "pdhg", stop=StopRule(max_iter=20_000, tol=0),
                     options=options, report_every=10):
        gaps = (objective64(p64, rec.x) - e_star) / e_star.abs()
        if bool((gaps > GAP).any()):
            first = None
        elif first is None:
            first = (rec.iteration, rec.elapsed)
        if first is not None and rec.iteration >= max(1.5 * first[0], first[0] + 200):
            break
    if first is None:
        section.note("Batch: the 1e-4 gap was not reached for every sample within the cap.")
        return
    per_sample = first[1] / batch
    ratio = fastest[1][0] / per_sample
    section.add(Figure(
        f"ours, batch of {batch}: time per sample to 1e-4 gap (all samples)", per_sample, "s",
        fastest[1][0], f"s cvxpy {fastest[0]} per image", ratio,
        f">= {TARGET_BATCH:g}x faster", check(ratio, TARGET_BATCH, below=False),
        f"{first[0]} iterations; reference optima from a float64 run (sample 0 within "
        f"{check0:.1e} of cvxpy)"))
