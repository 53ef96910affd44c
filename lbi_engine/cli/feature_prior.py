"""``lbi feature-prior``: fit the learned Gaussian feature prior that layer-wise inversion needs."""

from __future__ import annotations

import argparse
from typing import Any

from lbi_engine.cli import _common as c


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "feature-prior", help="fit the feature prior of a network (needed by method layerwise)",
        description="Fit a Gaussian prior (mean and Ledoit-Wolf shrunk covariance, stored as "
                    "low rank + diagonal) on the intermediate features of a network (every "
                    "lifted state, of a chain or of a graph with residual additions or "
                    "concatenation), from clean "
                    "sample inputs, and write PRIOR.safetensors + PRIOR.json (a card with the "
                    "network's weight hash, the samples, the rank and the file's sha256). For a "
                    "zoo network without --samples the bundled training split is used. See "
                    "docs/LAYERWISE.md.",
        formatter_class=c.HelpFormatter,
        epilog="examples:\n  lbi feature-prior mnist-cnn-ae --out resources/models/"
               "mnist-cnn-ae.prior\n  lbi feature-prior my_net.safetensors --samples clean.npy "
               "--out my_net.prior\n  lbi invert --network my_net.safetensors --method layerwise "
               "--feature-prior my_net.prior ...")
    add_fit_arguments(p)
    p.set_defaults(handler=run)
    return p


def add_fit_arguments(p: argparse.ArgumentParser) -> None:
    """The arguments of a prior fit (this command and ``lbi prior``)."""
    p.add_argument("network", metavar="NETWORK", help="zoo name or model file")
    p.add_argument("--input-shape", type=c.shape, metavar="C,H,W",
                   help="the input shape without batch, only when the file does not record it "
                        "(TorchScript, ONNX)")
    p.add_argument("--allow-code", "--allow-pickle", dest="allow_code", action="store_true",
                   help="allow loading a model file by running code stored in it (TorchScript, "
                        "a pickled module); only for files you trust")
    p.add_argument("--samples", metavar="PATH", help=".npy array (N, *input_shape) or a folder "
                   "of images, clean inputs in [0, 1] (default for zoo networks: the bundled "
                   "training split)")
    p.add_argument("--out", required=True, metavar="BASE", help="writes BASE.safetensors and "
                   "BASE.json")
    p.add_argument("--rank", type=c.positive_int, default=None, metavar="K",
                   help="rank of the covariance's low-rank part (default 96)")
    p.add_argument("--overwrite", action="store_true", help="replace existing files")


def fit_inputs(args: argparse.Namespace) -> tuple[Any, Any, str, str]:
    """(bundle, clean inputs in display space, where they came from, the command with BASE)
    for a prior fit: --samples, else a zoo network's bundled training split."""
    from lbi_engine.feature_prior_fit import fit_command, prior_fit_inputs

    if args.allow_code:
        c.warn("--allow-code: the model file may be loaded by running code stored in it")
    bundle, inputs, source = prior_fit_inputs(args.network, args.samples,
                                              input_shape=args.input_shape,
                                              allow_code=bool(args.allow_code))
    return bundle, inputs, source, fit_command(args.network, args.samples, args.rank)


def run(args: argparse.Namespace) -> int:
    from lbi_engine.feature_prior_fit import fit_feature_prior_files

    if args.allow_code:
        c.warn("--allow-code: the model file may be loaded by running code stored in it")
    # BASE.safetensors and BASE.json are one result: a second writer of the same BASE is
    # refused before the fit, not after it (the lock file is .BASE.lbi-lock beside them)
    fitted = fit_feature_prior_files(args.network, args.out, samples=args.samples,
                                     input_shape=args.input_shape,
                                     allow_code=bool(args.allow_code), rank=args.rank,
                                     overwrite=args.overwrite)
    print(f"{c.shown(fitted.tensors)} + {c.shown(fitted.card)}: {len(fitted.sizes)} feature "
          f"variable(s), sizes {fitted.sizes}, rank {fitted.rank}, from {fitted.source}")
    return c.EXIT_OK
