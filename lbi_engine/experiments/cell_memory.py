"""How much memory one sweep cell needs, and the one-line refusal when it does not fit.

Used by the Dask sweep (:mod:`lbi_engine.experiments.sweep_dask`): the client checks every
worker's Dask memory limit before sending work; each worker checks it again, and lbi's own
memory limit there (:mod:`lbi_engine.limits`), before a cell. A rough upper estimate on
purpose: it is there to refuse absurd cells (huge networks x thousands of samples) with
numbers, not to pack memory tightly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def _tensor_bytes(obj: Any, seen: set[int], depth: int = 0) -> int:
    """Bytes of the tensors reachable from ``obj`` through attributes, lists and dicts."""
    import torch

    if id(obj) in seen or depth > 6:
        return 0
    seen.add(id(obj))
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, torch.nn.Module):
        return sum(t.numel() * t.element_size()
                   for t in [*obj.parameters(), *obj.buffers()] if id(t) not in seen)
    if isinstance(obj, (list, tuple)):
        return sum(_tensor_bytes(v, seen, depth + 1) for v in obj)
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v, seen, depth + 1) for v in obj.values())
    if hasattr(obj, "__dict__") and type(obj).__module__.startswith("lbi_engine"):
        return sum(_tensor_bytes(v, seen, depth + 1) for v in vars(obj).values())
    return 0


#: Copies of every layer's per-sample variables held at once (iterates, auxiliary layer
#: variables, duals, momentum, gradients, the records' copies, metrics, temporaries).
#: Measured on mnist-cnn-ae, joint, 400 samples, after a warm-up cell: the peak RSS grew by
#: 127 MiB; 32 copies estimate 171 MiB (12 copies gave 67 MiB, too few).
WORKING_COPIES = 32


def estimate_cell_bytes(bundle: Any, samples: int, dtype: str) -> int:
    """A rough upper estimate of one cell's memory: weights (and one converted copy) plus
    ``WORKING_COPIES`` copies of every layer's variables for each sample."""
    item = 8 if dtype == "float64" else 4
    encoder = bundle.encoder
    weights = _tensor_bytes(encoder.layers, set()) + _tensor_bytes(bundle.decoder, set())
    values = _prod(encoder.input_shape) + sum(_prod(lay.affine.out_shape)
                                             for lay in encoder.layers)
    return 2 * weights + WORKING_COPIES * samples * values * item


def _prod(shape: Sequence[int]) -> int:
    out = 1
    for s in shape:
        out *= int(s)
    return out


def memory_refusal(need: int, limit: int | None, budget: int | None, where: str
                   ) -> str | None:
    """A one-line refusal when a cell needing ``need`` bytes does not fit, else None.

    ``limit``: the Dask worker's memory limit; ``budget``: lbi's own memory limit on that
    machine (:func:`lbi_engine.limits.memory_limit`: ``LBI_MEMORY_LIMIT``, else 80 % of the
    memory available), the same rule every ``lbi`` command applies.
    """
    from lbi_engine.limits import format_bytes

    for bound, what, fix in (
            (limit, "a Dask memory limit", "dask worker --memory-limit"),
            (budget, "an lbi memory limit", "LBI_MEMORY_LIMIT on the worker, or --memory-limit")):
        if bound is not None and need > bound:
            return (f"one sweep cell needs about {format_bytes(need)} but worker {where} has "
                    f"{what} of {format_bytes(bound)}; use fewer --samples per sweep, a "
                    f"smaller network, or workers with more memory ({fix}).")
    return None
