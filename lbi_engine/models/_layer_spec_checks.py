"""The checks of a card's layer specs before a layer is built: every size, stride, padding
and other hyper-parameter a whole or real number in range, and no layer bigger than
``MAX_LAYER_VALUES`` (a card is data from someone else; see :mod:`lbi_engine.models.cards`)."""

from __future__ import annotations

from typing import Any

from lbi_engine.errors import ModelFileError

#: Most values one layer of a card may hold (2^28 = 268 M, 1 GiB of float32): a card is
#: metadata, and a typo or a hostile card must not make lbi allocate terabytes.
MAX_LAYER_VALUES = 2**28


#: Hyper-parameters that must be integers >= 1 (or >= 0 for the padding family).
_POSITIVE = ("in_features", "out_features", "in_channels", "out_channels", "kernel_size",
             "stride", "dilation", "groups", "num_features")
_NONNEGATIVE = ("padding", "output_padding")


def _check_layer_params(kwargs: dict[str, Any], what: str) -> None:
    """Sizes, strides and paddings are whole numbers in range (a stride of 0 would divide by
    zero deep inside torch; a size of -1 or 1e12 is a damaged card)."""
    for name, low in [*((n, 1) for n in _POSITIVE), *((n, 0) for n in _NONNEGATIVE)]:
        if name not in kwargs:
            continue
        value = kwargs[name]
        if name == "padding" and isinstance(value, str):
            if value not in ("same", "valid"):
                raise ModelFileError(f"{what}: padding={value!r} must be a number, 'same' or "
                                     "'valid'; fix the card.")
            continue
        items = value if isinstance(value, tuple) else (value,)
        if not items or not all(isinstance(v, int) and not isinstance(v, bool)
                                and low <= v <= 2**31 for v in items):
            raise ModelFileError(f"{what}: {name}={_show(value)} must be "
                                 f"{'an integer' if low == 0 else 'a positive integer'} (or a "
                                 f"list of them) between {low} and 2^31; fix the card.")


    _check_other_params(kwargs, what)


#: Whole-number parameters other than sizes: (lowest, highest) allowed; None where torch
#: takes None ("no override", "keep this size").
_WHOLE = {"start_dim": (-64, 63), "end_dim": (-64, 63), "dim": (-64, 63),
          "divisor_override": (1, 2**31), "num_parameters": (1, 2**31),
          "output_size": (1, 2**31), "unflattened_size": (1, 2**31)}
_NONE_OK = ("divisor_override", "output_size", "momentum", "dim")
#: Real-number parameters: (lowest, highest), both included.
_REAL = {"eps": (1e-300, 1.0), "momentum": (0.0, 1.0), "p": (0.0, 1.0),
         "negative_slope": (-1e6, 1e6), "alpha": (-1e6, 1e6), "beta": (1e-6, 1e6),
         "threshold": (-1e6, 1e6), "lambd": (0.0, 1e6), "min_val": (-1e30, 1e30),
         "max_val": (-1e30, 1e30)}
_FLAGS = ("bias", "affine", "track_running_stats", "ceil_mode", "count_include_pad",
          "inplace")


def _check_other_params(kwargs: dict[str, Any], what: str) -> None:
    """Types and ranges of every other parameter, so that a damaged card ends here with the
    field named, not in torch (a string start_dim, a zero divisor or a reversed Hardtanh
    failed only when the network first ran, with a traceback)."""
    import math

    def bad(name: str, value: Any, want: str) -> ModelFileError:
        return ModelFileError(f"{what}: {name}={_show(value)} must be {want}; fix the card.")

    for name, value in kwargs.items():
        if value is None and name in _NONE_OK:
            continue
        if name in _WHOLE:
            low, high = _WHOLE[name]
            items = value if isinstance(value, tuple) else (value,)
            if not items or not all(
                    (v is None and name == "output_size")
                    or (isinstance(v, int) and not isinstance(v, bool) and low <= v <= high)
                    for v in items):
                raise bad(name, value, f"a whole number (or a list of them) between {low} "
                                       f"and {high}")
        elif name in _REAL:
            lo, hi = _REAL[name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or not lo <= value <= hi:
                raise bad(name, value, f"a number between {lo:g} and {hi:g}")
        elif name in _FLAGS and not isinstance(value, bool):
            raise bad(name, value, "true or false")
    if "min_val" in kwargs or "max_val" in kwargs:
        low, high = kwargs.get("min_val", -1.0), kwargs.get("max_val", 1.0)
        if not low < high:
            raise ModelFileError(f"{what}: min_val={low!r} must be below max_val={high!r}; "
                                 "fix the card.")


def _show(value: Any) -> str:
    return str(list(value)) if isinstance(value, tuple) else repr(value)


def _check_layer_size(cls: type, kwargs: dict[str, Any], what: str) -> None:
    """Build the layer on the meta device (no memory, no RNG use) and count its tensors."""
    import torch

    with torch.device("meta"):
        probe = cls(**kwargs)
    n = sum(t.numel() for t in (*probe.parameters(), *probe.buffers()))
    if n > MAX_LAYER_VALUES:
        raise ModelFileError(f"{what} would hold {n:,} weights; lbi loads layers of at most "
                             f"{MAX_LAYER_VALUES:,}. The card's sizes are wrong: fix them.")
