"""Pieces every subcommand shares: argument types, the one-line error policy, progress bars.

Error policy (why): a command-line user or a script needs to know *that* the input was bad
and *what* to change, not a traceback. Bad input (any :class:`lbi_engine.errors.LbiError`,
an argparse error, a missing or unwritable file) ends with exit code 2 and one line on
stderr; anything else is a bug and keeps its traceback (exit code 1).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from lbi_engine.settings.solver import METHOD_NAMES, STEP_RULES, TOL_MODES  # noqa: F401

EXIT_OK = 0
EXIT_BUG = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130

# Method names, step rules and stop modes come from the torch-free solver_settings, so that
# building the parser (and `lbi --help`) does not import torch. The regularisers' names are a
# copy; tests/cli/test_help.py checks that it equals the engine's.
REGULARISER_NAMES = ("tv", "tv-aniso", "tikhonov", "gradient-tikhonov", "l1", "nonneg", "box",
                     "none", "gaussian", "auto")
#: Specs that add a term to a learned regulariser (a copy, checked as REGULARISER_NAMES is).
COMBINED_REGULARISER_NAMES = ("gaussian+tv",)
#: Most values a list argument may expand to (log:1e-4:1:10000000 is a typo, not a grid).
MAX_LIST = 10_000
# The problem's flags as `lbi invert` and `lbi sweep` both describe them (their defaults are
# the run record's, REQUEST_DEFAULTS, for both commands).
REGULARISER_HELP = (
    "prior R: " + ", ".join(REGULARISER_NAMES) + "; a constraint can be added, e.g. tv+nonneg "
    "(tv = isotropic TV); gaussian: the learned input prior (--input-prior, or the one a zoo "
    "network ships), gaussian+tv[=G]: plus G times TV (G default 1, same alpha); auto: "
    "gaussian+box where it was measured better (mnist-cnn-ae), else tv (result.json: "
    "regulariser_run, regulariser_rule)")
METHOD_HELP = (
    "auto: one-layer for one lifted layer, joint for several (result.json's method_run says "
    "which ran); one-layer (alias pdhg): one-layer networks (paper eq. 12) by accelerated "
    "proximal gradient for TV, else PDHG; joint: all layers by coordinate descent "
    "(eqs. 13-15); layerwise: layer by layer; landweber: baseline with the discrepancy "
    "principle; backprop: gradient descent through the network")
TOL_HELP = ("stop tolerance T; with --tol-mode objective (default): stop when the objective "
            "moved by less than T * |objective| over the second half of the run (an estimate "
            "of the remaining relative gap to the optimum); relative/absolute: when the change "
            "of x and of the dual in one iteration is below T (0: never stop on it)")


def request_default(name: str) -> str:
    """'(default: X)' for a flag whose default lives in the run record (torch-free)."""
    from lbi_engine.settings.defaults import REQUEST_DEFAULTS

    return f"(default: {REQUEST_DEFAULTS[name]})"


class UsageError(Exception):
    """Bad command-line usage; main() prints it on one line and exits with code 2."""

    def __init__(self, message: str, prog: str = "lbi") -> None:
        super().__init__(message)
        self.prog = prog


class Parser(argparse.ArgumentParser):
    """argparse without its multi-line "usage + error" exit: errors become UsageError."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see `{self.prog} --help`)", self.prog)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the hand-made line breaks of descriptions/epilogs, shows defaults, wider help."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32, width=100)

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if (
            "%(default)" not in text
            and action.default not in (None, False, argparse.SUPPRESS)
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


def one_line(message: str) -> str:
    """Collapses a (possibly multi-line) message to one line for stderr, with every control
    character escaped: messages quote names read from files (layers, nodes, tensors, paths),
    and an escape sequence in one must not reach the terminal (retitle it, clear the screen,
    hide text) nor a bidi override reorder the line. A message longer than 4,000 characters
    (a record's 10 MB "path") keeps its start and its end, where the fix is said."""
    text = " ".join(str(message).split())
    if len(text) > 4000:
        text = f"{text[:2500]} [... {len(text) - 3500:,} characters left out ...] {text[-1000:]}"
    if text.isprintable():  # the usual case, checked in C
        return text
    return "".join(_escape_char(ch) for ch in text)


def shown(name: object) -> str:
    """A name from a file or the command line (a model file, a node, --out), as printed on
    stdout: every control, bidi and other invisible character escaped as in
    :func:`one_line`, spaces and the text itself kept. The one printer of such names."""
    text = str(name)
    if text.isprintable():
        return text
    return "".join(_escape_char(ch) for ch in text)


def _escape_char(ch: str) -> str:
    import unicodedata

    if ch.isprintable() or ch == " ":
        return ch
    # not "Cs": a lone surrogate is a byte of a non-UTF-8 file name (surrogateescape), which
    # is written back as that byte, so the name still reads as the user's own
    if unicodedata.category(ch) in ("Cc", "Cf", "Co", "Cn", "Zl", "Zp"):
        code = ord(ch)
        return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
            else f"\\U{code:08x}"
    return ch


# ---------------------------------------------------------------------------------------------
# argument types (each raises ArgumentTypeError with a message naming the value)


def positive_float(text: str) -> float:
    value = _float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number > 0")
    return value


def nonnegative_float(text: str) -> float:
    value = _float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number >= 0")
    return value


def any_float(text: str) -> float:
    return _float(text)


def alpha_value(text: str) -> float | str:
    """"auto" or a number (the request checks its range)."""
    return "auto" if text.strip().lower() == "auto" else _float(text)


def _float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} must be a finite number")
    return value


def positive_int(text: str) -> int:
    value = nonnegative_int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 1")
    return value


def nonnegative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be an integer >= 0")
    return value


def shape(text: str) -> tuple[int, ...]:
    """"1,28,28" or "784" (also "1x28x28") -> a tuple of positive ints."""
    parts = text.replace("x", ",").replace(" ", "").split(",")
    if any(not p for p in parts):  # "1,,28,28" or "1,28," is a typo, not a shape
        raise argparse.ArgumentTypeError(
            f"{text!r} has an empty dimension; write the shape as C,H,W (e.g. 1,28,28)")
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a shape; write it as C,H,W (e.g. 1,28,28) or N (e.g. 784)"
        ) from None
    if not dims or any(d < 1 for d in dims):
        raise argparse.ArgumentTypeError(f"{text!r}: every dimension must be an integer >= 1")
    return dims


def memory_size(text: str) -> int:
    """"8G", "512M", "2000000000" -> bytes (see lbi_engine.limits.parse_size)."""
    from lbi_engine.limits import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_memory_limit(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--memory-limit", type=memory_size, metavar="SIZE",
                        help="refuse inputs whose estimated memory exceeds SIZE, e.g. 8G "
                             "(default: $LBI_MEMORY_LIMIT, else 80%% of the available memory)")


def float_list(text: str) -> list[float]:
    """"1e-3,1e-2" or a log grid "log:1e-4:1e-2:5" (5 values from 1e-4 to 1e-2)."""
    text = text.strip()
    if text.startswith(("log:", "lin:")):
        kind, *rest = text.split(":")
        if len(rest) != 3:
            raise argparse.ArgumentTypeError(
                f"{text!r}: a grid is {kind}:START:STOP:COUNT, e.g. log:1e-4:1e-2:5"
            )
        start, stop = _float(rest[0]), _float(rest[1])
        count = positive_int(rest[2])
        if count > MAX_LIST:
            raise argparse.ArgumentTypeError(f"{text!r}: at most {MAX_LIST:,} grid values")
        if kind == "log" and (start <= 0 or stop <= 0):
            raise argparse.ArgumentTypeError(f"{text!r}: a log grid needs START, STOP > 0")
        if count == 1:
            return [start]
        if kind == "log":
            ratio = math.log(stop / start) / (count - 1)
            return [float(f"{start * math.exp(ratio * k):.6g}") for k in range(count)]
        step = (stop - start) / (count - 1)
        return [float(f"{start + step * k:.6g}") for k in range(count)]
    values = [_float(p) for p in text.split(",") if p.strip()]
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one number")
    return values


def int_list(text: str) -> list[int]:
    """"0,1,2" or a range "0-4" (inclusive), or a mix "0-2,7"."""
    values: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if "-" in part[1:]:
            lo_text, hi_text = part.split("-", 1)
            lo, hi = nonnegative_int(lo_text), nonnegative_int(hi_text)
            if hi < lo:
                raise argparse.ArgumentTypeError(f"{part!r}: a range is LOW-HIGH with LOW <= HIGH")
            if hi - lo >= MAX_LIST or len(values) + hi - lo >= MAX_LIST:
                raise argparse.ArgumentTypeError(f"{part!r}: at most {MAX_LIST:,} indices")
            values.extend(range(lo, hi + 1))
        else:
            values.append(nonnegative_int(part))
    if not values:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one index, e.g. 0-4")
    return list(dict.fromkeys(values))


def key_value(text: str) -> tuple[str, Any]:
    """"n_inner=5" -> ("n_inner", 5); the value is parsed as JSON when it can be."""
    import json

    if "=" not in text:
        raise argparse.ArgumentTypeError(f"{text!r}: write solver options as KEY=VALUE")
    key, raw = text.split("=", 1)
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    return key.strip(), value


# ---------------------------------------------------------------------------------------------
# progress


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextmanager
def progress_bar(total: int | None, desc: str, unit: str = "it", enabled: bool | None = None
                 ) -> Iterator[Any]:
    """A tqdm bar on stderr when it is a terminal; a silent stand-in when piped/redirected."""
    from tqdm import tqdm

    show = stderr_is_terminal() if enabled is None else enabled
    bar = tqdm(total=total, desc=desc, unit=unit, disable=not show, file=sys.stderr,
               dynamic_ncols=True, leave=False)
    try:
        yield bar
    finally:
        bar.close()


def advance_to(bar: Any, position: int) -> None:
    """Moves a tqdm bar to an absolute position (solvers report absolute iteration counts)."""
    step = int(position) - int(bar.n)
    if step > 0:
        bar.update(step)


def warn(message: str) -> None:
    print(f"lbi: warning: {one_line(message)}", file=sys.stderr)


def fmt(value: Any, digits: int = 4) -> str:
    """A number for a summary line; '-' when undefined."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if not math.isfinite(value):
            return str(value)
        return f"{value:.{digits}g}"
    return str(value)
