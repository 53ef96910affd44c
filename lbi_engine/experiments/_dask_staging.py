"""What a sweep's Dask plugin stages on a worker: the unpickled payload of one sweep, by token.

Its own room, below both :mod:`lbi_engine.experiments.sweep_dask` (which solves the cells) and
:mod:`lbi_engine.experiments._dask_plugin` (which stages and frees the payload), so neither
imports the other.
"""

from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass
from typing import Any

#: Per worker process: how often each payload (by token) was unpickled there — the tests
#: check that it is once per worker, not once per cell.
LOADS: dict[str, int] = {}
_PAYLOADS: dict[str, SweepPayload] = {}  # token -> the payload staged by the plugin
_PREPARED: dict[str, dict[float, Any]] = {}  # token -> the last noise draw
_LOCK = threading.Lock()  # a worker with several threads runs cells concurrently


@dataclass
class SweepPayload:
    """Everything a worker needs for any cell of one sweep (sent once per worker)."""

    spec: Any  # SweepSpec
    bundle: Any  # ModelBundle without its original module
    truths: Any  # (B, ...) ground truths
    token: str
    cell_bytes: int  # the estimate of one cell's memory (checked again on the worker)

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        with _LOCK:
            LOADS[self.token] = LOADS.get(self.token, 0) + 1


def stage(token: str, blob: bytes) -> None:
    """On a worker (plugin setup): unpacks the bytes this sweep's client pickled."""
    payload = pickle.loads(blob)  # made by this sweep's client, not a file
    with _LOCK:
        _PAYLOADS[token] = payload


def unstage(token: str) -> None:
    """On a worker (plugin teardown, at the end of the sweep): frees the payload."""
    with _LOCK:
        _PAYLOADS.pop(token, None)
        _PREPARED.pop(token, None)
