"""``lbi convert``: turn a model file into the zoo's safe pair NAME.safetensors + NAME.json."""

from __future__ import annotations

import argparse
from typing import Any

from lbi_engine.cli import _common as c


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    p = subparsers.add_parser(
        "convert", help="convert ONNX / .pt2 / a state dict + card (or, with "
                        "consent, a pickled module) into NAME.safetensors + NAME.json",
        description="Read a network once with lbi's importers and write it as the zoo stores "
                    "its networks: raw tensors (safetensors, no code) plus a model card listing "
                    "its layers, input shape and provenance (source file name and sha256, lbi "
                    "version). The written pair is read back and its forward compared with the "
                    "source before the command succeeds. Load the result with --network "
                    "DIR/NAME.json.",
        formatter_class=c.HelpFormatter,
        epilog="examples:\n"
               "  lbi convert encoder.onnx --out mymodels\n"
               "  lbi convert encoder.pt2 --out mymodels --name enc\n"
               "  lbi convert weights.pt --card weights.json --out mymodels\n"
               "  lbi convert whole_model.pt --allow-code --input-shape 1,28,28 --out mymodels")
    p.add_argument("model", metavar="MODEL", help="the model file (.onnx, .pt2, .safetensors/.pt + "
                   "card JSON, a card JSON, or a pickled module)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created if "
                   "missing)")
    p.add_argument("--name", metavar="NAME", help="file name of the pair (default: the model "
                   "file's name without its extension)")
    p.add_argument("--input-shape", type=c.shape, metavar="C,H,W",
                   help="the input shape without batch, only when the file does not record it")
    p.add_argument("--card", metavar="JSON", help="the card describing a weights-only file "
                   "(default: MODEL's name with .json)")
    p.add_argument("--allow-code", "--allow-pickle", dest="allow_code", action="store_true",
                   help="allow a file whose loading runs code stored in it (a whole pickled "
                        "nn.Module, TorchScript); only for files you trust. Converting once "
                        "means you never need this flag for that network again")
    # max-pooling is always written as its exact ReLU layers now; the flag stays accepted so
    # that scripts written when it was an option keep working
    p.add_argument("--maxpool-relu", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--force", action="store_true", help="replace existing output files")
    p.set_defaults(handler=run_convert)
    return p


def run_convert(args: argparse.Namespace) -> int:
    from lbi_engine.models.convert import convert_model
    from lbi_engine.results.folder_lock import output_folder_lock, prepare_output_folder

    if args.allow_code:
        c.warn("--allow-code: the model file may be loaded by running code stored in it")
    # one writer per folder: two conversions into the same --out would race on its files
    out = prepare_output_folder(args.out)
    with output_folder_lock(out):
        result = convert_model(args.model, str(out), args.name, input_shape=args.input_shape,
                               allow_pickle=args.allow_code, card_path=args.card,
                               force=args.force, maxpool_relu=args.maxpool_relu)
    card = result.card
    print(f"{c.shown(args.model)} -> {c.shown(result.weights)} + {c.shown(result.card_path)}")
    print(f"  layers: {len(card['architecture']['layers'])} "
          f"(encoder {card['architecture']['encoder_layers']}), input shape "
          f"{tuple(card['input_shape'])}, {card['weights']['parameters']:,} values")
    print(f"  read back and compared with the source: max relative error "
          f"{result.max_rel_error:.1e}")
    print(f"  use it with --network {c.shown(result.card_path)}")
    return c.EXIT_OK
