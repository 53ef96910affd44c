"""``lbi prior``: fit the learned Gaussian input prior (``--regulariser gaussian``)."""

from __future__ import annotations

import argparse
from typing import Any

from lbi_engine.cli import _common as c
from lbi_engine.cli.feature_prior import add_fit_arguments, fit_inputs


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "prior", help="fit the Gaussian input prior of a network (--regulariser gaussian)",
        description="Fit a Gaussian prior on the network's input (mean and Ledoit-Wolf shrunk "
                    "covariance, stored as low rank + diagonal) from clean sample inputs, and "
                    "write PRIOR.safetensors + PRIOR.json (a card with the network's weight "
                    "hash, the samples' sha256, the command and the tensor file's sha256). "
                    "For a zoo network without --samples the bundled TRAINING split is used. "
                    "See docs/MATH.md §4.3.",
        formatter_class=c.HelpFormatter,
        epilog="examples:\n  lbi prior mnist-cnn-ae --out resources/models/"
               "mnist-cnn-ae.input.prior\n  lbi prior my_net.safetensors --samples clean.npy "
               "--out my_net.input.prior\n  lbi invert --network my_net.safetensors "
               "--regulariser gaussian+box --input-prior my_net.input.prior ...")
    add_fit_arguments(p)
    p.set_defaults(handler=run)
    return p


def run(args: argparse.Namespace) -> int:
    from lbi_engine.results.folder_lock import output_folder_lock

    with output_folder_lock(args.out):  # one writer of BASE.*, refused before the fit
        return _run_locked(args)


def _run_locked(args: argparse.Namespace) -> int:
    import torch

    from lbi_engine.priors import input as ip
    from lbi_engine.priors.feature import DEFAULT_RANK

    bundle, inputs, source, command = fit_inputs(args)
    net_inputs = torch.as_tensor(bundle.preprocessing.apply(inputs.double()))
    prior, info = ip.fit_input_prior(net_inputs, args.rank or DEFAULT_RANK)
    card = ip.make_card(bundle.name, bundle.sha256, tuple(bundle.input_shape), source,
                        ip.samples_sha256(inputs), "lbi prior " + command, info)
    tensors, card_path = ip.save_input_prior(prior, card, args.out, overwrite=args.overwrite)
    print(f"{c.shown(tensors)} + {c.shown(card_path)}: input prior of size {prior.size}, "
          f"rank {prior.rank}, shrinkage {info['shrinkage']:.4g}, from {c.shown(source)}")
    return c.EXIT_OK
