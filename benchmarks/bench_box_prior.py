"""TV against TV + box [0, 1] at the defaults (alpha auto, method auto = joint) on the CNN
autoencoder: ``PYTHONPATH=. python -m benchmarks.bench_box_prior [--split val] [--count 5]``.

Per noise std (0.01, 0.05, 0.1) and prior, the mean PSNR and mean solver time (result.json
``seconds``: the alpha path and the final solve) of ``lbi invert --network mnist-cnn-ae
--sample I --seed I --noise-std S --regulariser R`` over digits spread evenly over the split
(those of ``lbi reproduce noise`` for the validation split). Prints one JSON line per cell.
"""

from __future__ import annotations

import argparse
import json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--split", default="val")
    ap.add_argument("--count", type=int, default=5)
    a = ap.parse_args()
    import torch

    from lbi_engine import api
    from lbi_engine.experiments.batch import spread_indices
    from lbi_engine.solvers import final

    torch.set_num_threads(1)
    digits = spread_indices("mnist", a.split, a.count)
    # one untimed run first: the compiled kernels load (or compile) on a process's first run,
    # which would otherwise fall on the first cell's TV time only
    warm = api.prepare(api.InversionRequest(network="mnist-cnn-ae", dataset="mnist",
                                            split=a.split, index=digits[0], noise_std=0.05,
                                            regulariser="tv+box", max_iter=50))
    final(api.iterate(warm))
    for std in (0.01, 0.05, 0.1):
        for reg in ("tv", "tv+box"):
            runs = []
            for index in digits:
                request = api.InversionRequest(network="mnist-cnn-ae", dataset="mnist",
                                               split=a.split, index=index, seed=index,
                                               noise_std=std, regulariser=reg)
                prepared = api.prepare(request)
                runs.append(api.final_metrics(prepared, final(api.iterate(prepared))))
            print(json.dumps({
                "std": std, "regulariser": reg, "digits": digits,
                "psnr": sum(m["psnr"] for m in runs) / len(runs),
                "seconds": sum(m["seconds"] for m in runs) / len(runs),
                "alpha": [m["alpha"] for m in runs],
                "iterations": [m["iterations"] for m in runs]}), flush=True)


if __name__ == "__main__":
    main()
