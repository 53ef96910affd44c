"""Does weighting the hidden layers' Bregman terms bring lbi closer to the inverse?

Weighting the hidden layers' Bregman terms, by an exact rescaling of the network.

For a positively homogeneous activation (ReLU), B_Psi(c x, c z) = c^2 B_Psi(x, z). Scaling every
hidden state of a ReLU network by c (the first layer's weights and bias times c, the last
layer's inputs divided by c) leaves the forward map unchanged and multiplies every hidden
layer's Bregman term by c^2 relative to the last one: the lifted objective moves towards the
forward constraint as c grows. This study builds that rescaled network from the resnet18 parts
of ``bench_graph_slices`` (BatchNorm folded into the convolutions, identity shortcuts), checks
the forward maps agree, exports it to .pt2 and inverts it as a user does

    lbi invert --network F.pt2 --image astronaut64.png --noise-std 0.05

for c in ``--scales``, beside hand-written L-BFGS on the original module. The runs pass
``--option hidden_weight=1``: lbi's own weight (MATH.md §5.7, raised to 100 on a graph whose
target is out of reach) is the same rescaling; this study measures it from outside.

    PYTHONPATH=. python -m benchmarks.studies.hidden_weight_study [--part resnet-blocks]
        [--scales 1,3,10,30] [--write]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks._common import load_average, write_section
from benchmarks.bench_graph_slices import ALPHAS, parts, picture, run_lbfgs, run_lbi, slices


def _fold(conv: nn.Conv2d, bn: nn.BatchNorm2d, scale: float) -> nn.Conv2d:
    """conv followed by eval-mode bn, as one convolution, times ``scale``."""
    s = bn.weight / torch.sqrt(bn.running_var + bn.eps)
    out = nn.Conv2d(conv.in_channels, conv.out_channels, conv.kernel_size, conv.stride,
                    conv.padding)
    out.weight.data = (conv.weight * s.reshape(-1, 1, 1, 1) * scale).detach()
    out.bias.data = ((bn.bias - bn.running_mean * s) * scale).detach()
    return out


class Rescaled(nn.Module):
    """stem (conv, bn, relu) + BasicBlocks with identity shortcuts, every hidden state times c."""

    def __init__(self, module: nn.Sequential, c: float) -> None:
        super().__init__()
        conv1, bn1, layer1 = module[0], module[1], module[-1]
        if not all(isinstance(m, (nn.Conv2d, nn.BatchNorm2d, nn.ReLU, nn.MaxPool2d,
                                  nn.Sequential)) for m in module):
            raise ValueError("the study takes conv, bn, relu, max-pool and a layer of "
                             "BasicBlocks")
        # max-pooling commutes with a positive scale, as ReLU does (and so do the ReLU
        # layers of its exact rewrite)
        pools = [m for m in module if isinstance(m, nn.MaxPool2d)]
        self.pool = pools[0] if pools else nn.Identity()
        self.c = c
        self.stem = _fold(conv1, bn1, c)
        blocks = list(layer1)
        convs = []
        for k, block in enumerate(blocks):
            if block.downsample is not None:
                raise ValueError("identity shortcuts only")
            last = k == len(blocks) - 1
            convs += [_fold(block.conv1, block.bn1, 1.0),
                      _fold(block.conv2, block.bn2, 1.0 / c if last else 1.0)]
        self.convs = nn.ModuleList(convs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.pool(F.relu(self.stem(x)))
        n = len(self.convs) // 2
        for k in range(n):
            t = F.relu(self.convs[2 * k](h))
            skip = h * (1.0 / self.c) if k == n - 1 else h
            h = F.relu(self.convs[2 * k + 1](t) + skip)
        return h


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="resnet-blocks",
                        help="resnet (the whole slice), resnet-blocks or resnet-stem")
    parser.add_argument("--scales", default="1,3,10,30")
    parser.add_argument("--noise-std", type=float, default=0.05)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args(argv)
    load = load_average()
    original = {**slices(), **parts()}[args.part].eval()
    # no times: a study of the model (PSNR), run on a shared machine
    rows = ["| c | hidden Bregman weight c² | lbi PSNR (dB) | α auto | iterations |",
            "|---:|---:|---:|---:|---:|"]
    ref = None
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        image = picture(folder)
        example = torch.rand(1, 3, 64, 64)
        for c in (float(v) for v in args.scales.split(",")):
            net = Rescaled(original, c).eval()
            with torch.no_grad():
                gap = float((net(example) - original(example)).abs().max())
            assert gap < 1e-4, f"the rescaled network differs from the original by {gap}"
            path = folder / f"scaled{c:g}.pt2"
            torch.export.save(torch.export.export(net, (example,)), str(path))
            out = folder / f"out{c:g}"
            lbi = run_lbi(path, image, out, args.noise_std, ("--option", "hidden_weight=1"))
            if ref is None:  # the same noisy y for every c: the forward maps agree
                ref = run_lbfgs(original, out, tuple(ALPHAS))
            rows.append(f"| {c:g} | {c * c:g} | {lbi['psnr']:.2f} | {lbi['alpha']:.3g} | "
                        f"{lbi['iterations']} |")
            print(rows[-1], flush=True)
    assert ref is not None
    start = f"<!-- hidden-weight {args.part}:start -->"
    end = f"<!-- hidden-weight {args.part}:end -->"
    text = "\n".join([
        start, f"## Weighting the hidden layers' Bregman terms ({args.part})", "",
        "`PYTHONPATH=. python -m benchmarks.studies.hidden_weight_study "
        f"--part {args.part} --scales {args.scales} --write`: the resnet18 part of "
        "bench_graph_slices with every hidden "
        "state scaled by c (same forward map, checked), which weights every hidden layer's "
        "Bregman term by c² against the last one; `lbi invert --network F.pt2 --image "
        f"astronaut64.png --noise-std {args.noise_std}` at its defaults. Hand-written L-BFGS "
        f"on the original module at its best α of {list(ALPHAS)}: {ref['psnr']:.2f} dB "
        f"(α {ref['alpha']:g}). Load average {load} at the start.", "", *rows, "",
        "A study from outside lbi (runs with `--option hidden_weight=1`); lbi's own "
        "`hidden_weight` (MATH.md §5.7: 1, raised to 100 on a graph whose discrepancy target "
        "is out of reach at 1) is the same "
        "rescaling, done at run time.", end])
    print(text)
    if args.write:
        write_section(text, start, end)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
