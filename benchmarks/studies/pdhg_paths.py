"""Is the default TV path of a Condat–Vũ step faster than the torch path?

The default TV path of a Condat–Vũ step against the torch path, in one run.

``PYTHONPATH=$PWD OMP_NUM_THREADS=1 python -m benchmarks.studies.pdhg_paths``: circle problem
(W 512x4096, float32), steps="balanced", one torch thread; for 1 image and a batch of 64,
three repeats of bench_iteration.per_iteration (median over rounds of solver / floor), the
default path (``LBI_FUSED_TV`` unset) and ``LBI_FUSED_TV=0`` timed in the same rounds.
Behind the FUSED_TV_MIN_PIXELS threshold (solvers/one_layer/inplace.py) and benchmarks/RESULTS.md.
"""

from __future__ import annotations

import os

import torch

from benchmarks.problems import circle
from benchmarks.suite.bench_iteration import per_iteration


def main() -> None:
    torch.set_num_threads(1)
    os.environ.pop("LBI_FUSED_TV", None)
    balanced = {"steps": "balanced"}
    for batch, chunk, rounds in ((1, 25, 30), (64, 3, 12)):
        for rep in range(3):
            m = per_iteration(circle(batch), rounds, chunk, balanced, False, "0")
            print(f"batch {batch} rep {rep}: default {m['ratio']:.3f} "
                  f"(fastest rounds {m['ratio_best']:.3f}) | torch {m['other_ratio']:.3f} "
                  f"(fastest {m['other_ratio_best']:.3f}) | floor {m['floor'] * 1e3:.3f} ms, "
                  f"default {m['solver'] * 1e3:.3f} ms, torch {m['other'] * 1e3:.3f} ms",
                  flush=True)


if __name__ == "__main__":
    main()
