"""``lbi train`` and ``lbi list``: the zoo's networks and the bundled datasets."""

from __future__ import annotations

import argparse
from typing import Any

from lbi_engine.cli import _common as c


def add_train_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "train", help="retrain a zoo network from its recipe (how resources/models was made)",
        description="Train a zoo network with the recipe in its model card (architecture, "
                    "optimiser, epochs, seed) on the bundled data, and write the weights and "
                    "card into --out. Load the result with --network OUT/NAME.json.",
        formatter_class=c.HelpFormatter,
        epilog="example: lbi train mnist-cnn-ae --out mymodels --epochs 5 --seed 1")
    p.add_argument("name", metavar="NAME", help="zoo network name (see `lbi list`)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder for the weights "
                   "and card")
    p.add_argument("--epochs", type=c.positive_int, metavar="N",
                   help="number of epochs (default: the card's recipe)")
    p.add_argument("--seed", type=c.nonnegative_int, metavar="K",
                   help="random seed (default: the card's recipe)")
    p.add_argument("--threads", type=c.positive_int, default=2, metavar="N",
                   help="torch CPU threads (1 leaves the other core to other work; the "
                        "card records the count)")
    p.set_defaults(handler=run_train)
    return p


def run_train(args: argparse.Namespace) -> int:
    from lbi_engine.models import training
    from lbi_engine.results.folder_lock import output_folder_lock, prepare_output_folder

    out = prepare_output_folder(args.out)
    with output_folder_lock(out), \
            c.progress_bar(args.epochs, f"train {args.name}", unit="epoch") as bar:
        def progress(epoch: int, epochs: int, loss: float) -> None:
            bar.total = epochs
            c.advance_to(bar, epoch)
            bar.set_postfix(loss=f"{loss:.5g}", refresh=False)

        card = training.train(args.name, args.out, epochs=args.epochs, seed=args.seed,
                              progress=progress, threads=args.threads)
    report = card.get("training") or card.get("generation") or {}
    print(f"{args.name} -> {c.shown(args.out)}/{args.name}.json "
          f"(use it with --network {c.shown(args.out)}/{args.name}.json)")
    for key in ("epochs", "seed", "train_mse", "val_mse", "training_time_s", "seconds"):
        if key in report:
            print(f"  {key}: {c.fmt(report[key])}")
    return c.EXIT_OK


def add_list_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser("list", help="the zoo's networks and the bundled datasets",
                              description="List the pre-trained networks of the zoo (name, "
                                          "input and output shape, one-line description) and "
                                          "the bundled datasets with their splits.",
                              formatter_class=c.HelpFormatter)
    p.set_defaults(handler=run_list)
    return p


def run_list(args: argparse.Namespace) -> int:
    from lbi_engine import data
    from lbi_engine.models import zoo

    print("networks (use with --network NAME):")
    for name, text in zoo_descriptions(zoo):
        print(f"  {name:24s} {text}")
    print("datasets (use with --dataset NAME --split SPLIT --sample INDEX):")
    for name in data.list_datasets():
        splits = []
        for split in data.list_splits(name):
            size = data.dataset_size(name, split)
            splits.append(f"{split} ({size})" if size is not None else split)
        print(f"  {name:24s} splits: {', '.join(splits)}")
    return c.EXIT_OK


def zoo_descriptions(zoo: Any) -> list[tuple[str, str]]:
    """(name, one-line description) of every zoo network, from the cards."""
    out = []
    for name in zoo.list_zoo():
        card = zoo.zoo_card(name)
        text = card.get("description") or card.get("summary") or ""
        out.append((name, " ".join(str(text).split())))
    return out
