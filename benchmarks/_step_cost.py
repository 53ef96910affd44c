"""Section 4 of ``bench_multilayer``: the CPU cost of one accelerated joint step for one image
in its forms (default, CSR convolutions, torch operations, torch on the maps' own kernels),
one record's objective, and each layer's products (issue #23)."""

from __future__ import annotations

import math
import statistics
import time
from typing import Any

import torch


def step_cost(steps: int = 200, rounds: int = 5) -> list[str]:
    """CPU time per accelerated joint step (process time, so that other processes' load
    does not enter), interleaved over ``rounds``; digit 5, sigma 0.05, alpha 0.02: the step
    a default run takes (one sample: the gradient on buffers with the convolutions as
    gathered GEMMs, the rest compiled), the same with the convolutions as CSR matrices (the
    default until issue #23's third step), the step in torch operations (CSR), and in torch
    on the maps' own convolutions; and one record's objective (a record comes every 5 steps
    on the path of alpha "auto")."""
    from lbi_engine.api import InversionRequest, prepare
    from lbi_engine.models.zoo import load_zoo
    from lbi_engine.solvers import _joint_accel, _joint_start

    prepared = prepare(InversionRequest(network="mnist-cnn-ae", regulariser="tv",
                                        split="val", index=5,
                                        noise_std=0.05, method="joint", alpha=0.02),
                       load_zoo("mnist-cnn-ae"))
    problem = prepared.problem
    with torch.no_grad():
        x0 = _joint_start.backprojection_start(problem)
        start = [x0, *problem.forward_aux(x0)]
        default = _joint_accel.JointFista(problem, start, None, 1.0)
        csr = _as_csr(_joint_accel.JointFista(problem, start, None, 1.0))
        torch_ops = _as_csr(_joint_accel.JointFista(problem, start, None, 1.0))
        torch_ops._fused = None
        plain = _joint_accel.JointFista(problem, start, None, 1.0)
        plain._fused, plain._one = None, None
        plain.maps = [layer.affine for layer in problem.network.layers]
        jobs = {"the default step (one sample: gradient on buffers, convolutions as gathered "
                "GEMMs, the rest compiled)": default.step_one,
                "the same with the convolutions as CSR matrices": csr.step_one,
                "the same step in torch operations (CSR convolutions)": torch_ops.step_one,
                "torch operations on the maps' own conv2d / conv_transpose2d": plain.step_one,
                "one record's objective (default)": default.objective_parts}
        times: dict[str, list[float]] = {k: [] for k in jobs}
        for _ in range(rounds):
            for name, job in jobs.items():
                t0 = time.process_time()
                for _ in range(steps):
                    job()
                times[name].append((time.process_time() - t0) / steps * 1e3)
    lines = ["| step | CPU ms per call (median of rounds) |", "|---|---:|"]
    lines += [f"| {k} | {statistics.median(v):.3f} |" for k, v in times.items()]
    lines += ["", *_product_costs(default, csr, rounds)]
    print("\n".join(lines), flush=True)
    return lines


def _product_costs(default: Any, csr: Any, rounds: int, calls: int = 1000) -> list[str]:
    """CPU us per product of each layer (W x + b, and W^T r added into a buffer) in the
    default one-sample path and with CSR convolutions, interleaved over ``rounds``."""
    lines = ["| layer | map | W x + b, default (us) | W^T r, default (us) | W x + b, CSR (us) | "
             "W^T r, CSR (us) |", "|---:|---|---:|---:|---:|---:|"]
    for i, layer in enumerate(default.layers):
        n_in, n_out = int(layer.affine.in_numel), int(layer.affine.out_numel)
        x, out = torch.rand(n_in), torch.empty(n_out)
        r, back = torch.rand(n_out), torch.zeros(n_in)
        cells = []
        for products in (default._one._prods[i], csr._one._prods[i]):
            for method, args in ((products.apply_into, (x, out)),
                                 (products.adjoint_add, (r, back))):
                best = math.inf
                for _ in range(rounds):
                    t0 = time.process_time()
                    for _ in range(calls):
                        method(*args)
                    best = min(best, (time.process_time() - t0) / calls * 1e6)
                cells.append(f"{best:.1f}")
        lines.append(f"| {i + 1} | {layer.affine.describe()} | {' | '.join(cells)} |")
    return lines


def _as_csr(state: Any) -> Any:
    """``state`` (a JointFista) with its one-sample convolution products replaced by the CSR
    matrices the batched path uses."""
    from lbi_engine.solvers._joint_one import MatrixProducts

    for i, used in enumerate(state.maps):
        if type(state._one._prods[i]).__name__ == "ConvProducts":
            bias = None if used.bias is None else used.bias.reshape(-1).contiguous()
            state._one._prods[i] = MatrixProducts(used._w, used._wt, bias)
    return state
