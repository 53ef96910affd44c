"""The Dask worker plugin that stages one sweep's payload on every worker.

A plugin rather than scattered data or a task result: the scheduler keeps the plugin (as the
bytes this client pickled; it never unpickles them) and installs it on every worker, also
on workers that join or restart later, so each worker unpacks the network and data exactly
once, whatever Dask's memory manager does with replicas, and nothing is lost when workers
die. Imported only by :func:`lbi_engine.experiments.sweep_dask.run_cells`.
"""

from __future__ import annotations

from typing import Any

from distributed import WorkerPlugin


class PayloadPlugin(WorkerPlugin):
    """Unpacks the payload bytes into the worker's cache on setup; drops them on teardown."""

    idempotent = False

    def __init__(self, token: str, blob: bytes) -> None:
        self.token = token
        self.blob = blob

    def setup(self, worker: Any) -> None:
        from lbi_engine.experiments._dask_staging import stage

        stage(self.token, self.blob)
        self.blob = b""  # the worker keeps the unpacked payload, not a second copy

    def teardown(self, worker: Any) -> None:
        from lbi_engine.experiments._dask_staging import unstage

        unstage(self.token)
