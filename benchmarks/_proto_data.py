"""Prototype data (issue #7): the four convergence problems in float64 with cvxpy optima.

Writes /tmp/lbi_proto/<name>.npz with W, b, y, alpha, image shape and E* (Clarabel), so
the prototype scripts (benchmarks/_proto_*.py) iterate on plain arrays.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch

from benchmarks._reference import optimum
from benchmarks.problems import as_float64, circle, mnist_perceptron
from lbi_engine.solvers._inplace import dense_matrix

OUT = Path("/tmp/lbi_proto")


def cases() -> dict:
    return {
        "circle": circle(1),
        "val0": mnist_perceptron(1, split="val"),
        "val1": mnist_perceptron(1, split="val", start=1),
        "train0": mnist_perceptron(1, split="train"),
    }


def main() -> None:
    OUT.mkdir(exist_ok=True)
    torch.set_num_threads(1)
    for name, case in cases().items():
        if len(sys.argv) > 1 and name not in sys.argv[1:]:
            continue
        p64 = as_float64(case.problem)
        w, b = dense_matrix(p64.network.layers[0].affine)
        e_star = optimum(case.name + str(case.problem.alpha), p64)
        np.savez(OUT / f"{name}.npz", W=w.numpy(), b=b.numpy(),
                 y=p64.y_delta.reshape(-1).numpy(), alpha=float(p64.alpha),
                 shape=np.array(p64.image_shape[-2:]), e_star=e_star,
                 act=p64.network.layers[0].activation.name)
        print(name, w.shape, float(p64.alpha), e_star, flush=True)


if __name__ == "__main__":
    main()
