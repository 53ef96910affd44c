"""The ``lbi`` command: invert, sweep, reproduce, train, list, convert, feature-prior.

A thin layer: argument parsing, progress bars and calls into the engine (``lbi_engine.api``,
``lbi_engine.experiments``, ``lbi_engine.models.training``, ``lbi_engine.models.zoo``).
Subcommand modules are imported when the parser is built, but torch is only imported when a
command runs, so ``lbi --help`` is instant.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from lbi_engine.cli import _common as c
from lbi_engine.limits import limited_to

DESCRIPTION = """\
lbi: regularised inversion of pre-trained neural networks with the lifted Bregman formulation
(Wang & Benning, "A lifted Bregman formulation for the inversion of deep neural networks").

Given a network N and a measured output y^delta, lbi estimates an input x with
  min_x  sum_l B_Psi_l(x_l, W_l x_(l-1) + b_l) + alpha R(x),
where B_Psi is the lifted Bregman loss of each layer's activation and R a prior (TV, ...).
"""

EPILOG = """\
reproduce every figure of the paper (each writes PNG figures and a Markdown report with the
numbers it computed; add --quick for a seconds-long smoke run):
  lbi reproduce circle            Sec. 5.1, Fig. 1: disc, Landweber vs TV, l2/TV table
  lbi reproduce mnist-perceptron  Sec. 5.1, Fig. 2: perceptron autoencoder, 5+5 digits
  lbi reproduce mnist-cnn         Sec. 5.2, Fig. 3: CNN autoencoder, joint method
  lbi reproduce noise             Sec. 5.2, Fig. 4-5: decoder vs inversion against noise
  lbi reproduce convergence       Sec. 3.2 (error estimate): Bregman distance = O(delta)
  lbi reproduce all --out DIR     all of the above

single runs and parameter studies:
  lbi list                                   zoo networks and datasets
  lbi invert --network mnist-cnn-ae --sample 0 --out run1
  lbi sweep --network mnist-cnn-ae --alphas log:1e-4:1e-2:5 --noise-stds 0,0.1 --out sweep1
  lbi train mnist-cnn-ae --out mymodels      retrain a zoo network (how the zoo was made)
  lbi convert my_encoder.onnx --out mymodels  your own network (ONNX, .pt2, ...) -> zoo format
  lbi feature-prior NET --samples x.npy --out P  learned feature prior for layer-wise inversion
  lbi prior NET --samples x.npy --out P      learned input prior (--regulariser gaussian)

every subcommand has its own help: lbi invert --help, lbi sweep --help, ...
"""


def build_parser() -> c.Parser:
    from lbi_engine import __version__
    from lbi_engine.cli import convert, feature_prior, input_prior, invert, misc, reproduce, sweep

    parser = c.Parser(prog="lbi", description=DESCRIPTION, epilog=EPILOG,
                      formatter_class=c.HelpFormatter)
    parser.add_argument("--version", action="version", version=f"lbi {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands",
                                       parser_class=c.Parser)
    invert.add_parser(subparsers)
    sweep.add_parser(subparsers)
    reproduce.add_parser(subparsers)
    misc.add_train_parser(subparsers)
    misc.add_list_parser(subparsers)
    convert.add_parser(subparsers)
    feature_prior.add_parser(subparsers)
    input_prior.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``lbi`` console script; returns the exit status."""
    from lbi_engine.errors import LbiError

    argv = list(sys.argv[1:] if argv is None else argv)
    prog = "lbi"
    try:
        parser = build_parser()
        if not argv:
            parser.print_help()
            return c.EXIT_OK
        args = parser.parse_args(argv)
        prog = f"lbi {args.command}" if getattr(args, "command", None) else "lbi"
        if not hasattr(args, "handler"):
            parser.print_help()
            return c.EXIT_BAD_INPUT
        with limited_to(getattr(args, "memory_limit", None)):
            return int(args.handler(args) or 0)
    except c.UsageError as exc:
        print(f"{exc.prog}: error: {c.one_line(str(exc))}", file=sys.stderr)
        return c.EXIT_BAD_INPUT
    except LbiError as exc:
        print(f"{prog}: error: {c.one_line(str(exc))}", file=sys.stderr)
        return c.EXIT_BAD_INPUT
    except OSError as exc:  # missing/unwritable files the engine did not wrap
        where = f" ({exc.filename})" if getattr(exc, "filename", None) else ""
        print(f"{prog}: error: {c.one_line((exc.strerror or str(exc)) + where)}",
              file=sys.stderr)
        return c.EXIT_BAD_INPUT
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return c.EXIT_INTERRUPTED


__all__ = ["build_parser", "main"]
