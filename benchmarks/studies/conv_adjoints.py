"""Which adjoint of a convolution or average pool is cheapest on the CPU, and which is taken?

    PYTHONPATH=. python -m benchmarks.studies.conv_adjoints [--rounds 30]

``Conv2dMap.adjoint`` (lbi_engine/operators/conv.py) has three forms of W^T r: torch's
``conv_transpose2d``; col2im per group (``_adjoint_by_fold``), taken for one input channel
per group and several outputs each (the first layer of the max-pool rewrite, MATH.md §5.6);
and the polyphase form (``_adjoint_by_phases``: s^2 stride-1 correlations interleaved by
pixel_shuffle), taken for a strided convolution with a kernel of 5 or more. For each case
below this times every form that applies on one image, one torch thread, in interleaved
rounds (benchmarks._common.interleaved), and prints the median ms per call, the ratio to
``conv_transpose2d`` measured in the same rounds, and the form the map chooses. The forms
agree to rounding (asserted here; tests/engine/operators test each against the forward).

``AvgPool2dMap.adjoint`` likewise: a copy of D r over each window (expand + reshape) where the
windows tile the input, else ``conv_transpose2d`` with a ones kernel; timed on the usual LeNet
pooling (2x2/2) of 16 channels of 64x64.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Callable

import torch

from benchmarks._common import interleaved, load_average, median
from lbi_engine.operators.conv import AvgPool2dMap, Conv2dMap

#: name -> (in channels, out channels, kernel, stride, padding, groups, input side)
CASES = {
    "max-pool rewrite, 64 groups x 14, 3x3/2, 64x64": (64, 64 * 14, 3, 2, 1, 64, 64),
    "resnet18 stem 3->64, 7x7/2, 128x128": (3, 64, 7, 2, 3, 1, 128),
    "alexnet stem 3->64, 11x11/4, 64x64": (3, 64, 11, 4, 2, 1, 64),
    "3x3/2, 64->128 channels, 32x32": (64, 128, 3, 2, 1, 1, 32),
}


def _forms(conv: Conv2dMap) -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """Every adjoint form that applies to ``conv``, each on its own copy of the map."""
    plain = copy.copy(conv)
    plain._fold_adjoint = plain._by_phases = False
    forms = {"conv_transpose2d": plain.adjoint}
    if conv.groups > 1 and conv.weight.shape[1] == 1:
        forms["col2im per group"] = conv._adjoint_by_fold
    if conv.groups == 1 and max(conv.stride) > 1:
        forms["polyphase"] = conv._adjoint_by_phases
    return forms


def _chosen(conv: Conv2dMap) -> str:
    if conv._fold_adjoint:
        return "col2im per group"
    return "polyphase" if conv._by_phases else "conv_transpose2d"


def _row(name: str, times: dict[str, list[float]], chosen: str) -> None:
    base = median(times["conv_transpose2d"])
    for form, samples in times.items():
        print(f"| {name} | {form} | {1e3 * median(samples):.3f} | "
              f"{median(samples) / base:.2f} | {chosen} |")


def _avg_pool(rounds: int) -> None:
    pool = AvgPool2dMap((16, 64, 64), 2)
    plain = copy.copy(pool)
    plain._tiles = False
    r = torch.randn(1, *pool.out_shape)
    torch.testing.assert_close(pool.adjoint(r), plain.adjoint(r))
    times = interleaved({"conv_transpose2d": lambda: plain.adjoint(r),
                         "copy per window": lambda: pool.adjoint(r)},
                        rounds=rounds, inner=5, warmup=2)
    _row("avg pool 2x2/2, 16 channels, 64x64", times,
         "copy per window" if pool._tiles else "conv_transpose2d")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.studies.conv_adjoints")
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    load = load_average()
    print(f"one torch thread, {args.rounds} interleaved rounds, load average "
          f"{'?' if load is None else f'{load:.2f}'}")
    print("| case | form | ms per adjoint | / conv_transpose2d | Conv2dMap takes |")
    print("| --- | --- | --- | --- | --- |")
    for name, (cin, cout, k, s, p, g, side) in CASES.items():
        weight = torch.randn(cout, cin // g, k, k)
        conv = Conv2dMap(weight, None, (cin, side, side), stride=s, pads=p, groups=g)
        r = torch.randn(1, *conv.out_shape)
        forms = _forms(conv)
        reference = forms["conv_transpose2d"](r)
        for form in forms.values():
            torch.testing.assert_close(form(r), reference, rtol=1e-4, atol=1e-4)
        times = interleaved({f: (lambda fn=fn, r=r: fn(r)) for f, fn in forms.items()},
                            rounds=args.rounds, inner=5, warmup=2)
        _row(name, times, _chosen(conv))
    _avg_pool(args.rounds)


if __name__ == "__main__":
    main()
