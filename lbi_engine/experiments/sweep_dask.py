"""Sweeps on Dask distributed: every cell is a task, this process stays the only writer.

``lbi sweep --workers N`` starts a LocalCluster of N worker processes here;
``--scheduler tcp://HOST:PORT`` (or a scheduler file) sends the cells to a running cluster
(``dask scheduler`` + ``dask worker``, dask-jobqueue on SLURM/PBS, dask-kubernetes, ...).
This module is imported only when one of them is asked for, so a plain install (without
``distributed``) runs local sweeps as before.

How the work is split (why):

* The client loads the network under the CLI's consent rules (``--allow-code``) and
  pickles one *payload* — the lifted network (lbi's own operator classes and tensors), the
  decoder of a card, the ground truths and the spec. A worker plugin
  (:mod:`lbi_engine.experiments._dask_plugin`) unpacks it once on every worker, including
  workers that join or restart later; cells are tiny tasks that name it by token. (Not
  ``scatter``: scattered data is lost for good when the workers holding it die, e.g. the
  only worker of ``--workers 1`` after running out of memory; and Dask's memory manager
  drops replicas of a task's result between cells, so it would travel again.) The scheduler
  only holds bytes. Workers never open model files, so no file can run code on them; the
  original module (a pickled or TorchScript program) is dropped before sending.
* A cell (noise std, method, alpha; all samples in one batch) is one task. A worker keeps
  the noisy data of its last noise std, as the local loop does; noise draws are seeded per
  sample, so a cell gives the same numbers on any worker and in any order.
* Results stream back with ``as_completed``; the client writes each cell's rows into
  results.csv atomically (``record`` in :func:`lbi_engine.experiments.sweep.run_sweep`), so
  an interrupted client resumes from the CSV. A lost worker's task is rescheduled by Dask
  (``distributed.scheduler.allowed-failures``); an exception inside a task is retried
  ``retries`` times. Bad input (``LbiError``) is returned as a refusal, not retried.

A scheduler lbi did not start is reached through :mod:`lbi_engine.experiments._dask_scheduler`
(its address, a bounded probe, the trust note).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import sys
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from lbi_engine.errors import InputError
from lbi_engine.experiments._dask_scheduler import (
    _START_HINT,
    DEFAULT_CONNECT_TIMEOUT,
    TRUST_NOTE,
    probe_scheduler,
    scheduler_address,
)
from lbi_engine.experiments._dask_staging import (  # noqa: F401  (LOADS: read by the tests)
    _LOCK,
    _PAYLOADS,
    _PREPARED,
    LOADS,
    SweepPayload,
    stage,
    unstage,
)
from lbi_engine.experiments.cell_memory import estimate_cell_bytes, memory_refusal

INSTALL_HINT = "pip install 'lbi[cluster]'"
Cell = tuple[float, str, Any]  # (noise std, method, alpha: a float, or a rule's name)


@dataclass(frozen=True)
class ClusterOptions:
    """Where the cells run: a running scheduler, or a LocalCluster of ``workers`` processes."""

    scheduler: str | None = None  # tcp://HOST:PORT, or the path of a scheduler file
    workers: int | None = None
    threads: int = 1  # torch threads per cell
    oversubscribe: bool = False  # allow workers x threads > cores
    retries: int = 2  # re-runs of a task that raised (a lost worker is rescheduled anyway)
    connect_timeout: float | None = None  # None: DEFAULT_CONNECT_TIMEOUT (10 s)
    # lbi's memory limit in bytes for the local workers (the command's --memory-limit; a
    # remote worker keeps its own LBI_MEMORY_LIMIT); None: the workers find their own
    memory_limit: int | None = None

    def __post_init__(self) -> None:
        if (self.scheduler is None) == (self.workers is None):
            raise InputError("give either a scheduler address or a number of local workers, "
                             "not both and not neither.")
        if self.workers is not None and self.workers < 1:
            raise InputError(f"--workers {self.workers}: give at least 1 worker.")
        if self.threads < 1:
            raise InputError(f"--threads {self.threads}: give at least 1 thread per cell.")
        if self.connect_timeout is not None and not 0 < self.connect_timeout <= 3600:
            raise InputError(f"--connect-timeout {self.connect_timeout}: give between 0 and "
                             "3600 seconds.")


def require_distributed() -> None:
    """Raises a one-line InputError naming the install command when Dask is missing."""
    try:
        import distributed  # noqa: F401
    except ImportError:
        raise InputError("--workers/--scheduler run the sweep on Dask distributed, which is "
                         f"not installed: {INSTALL_HINT}") from None


def usable_cores() -> int:
    """CPU cores this process may use (the affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def check_local_cores(options: ClusterOptions, cores: int | None = None) -> None:
    """Refuses --workers N x --threads T > cores (unless oversubscribing was asked for)."""
    cores = usable_cores() if cores is None else cores
    if options.workers is None or options.oversubscribe:
        return
    if options.workers * options.threads > cores:
        raise InputError(
            f"--workers {options.workers} x --threads {options.threads} = "
            f"{options.workers * options.threads} threads but this machine has {cores} "
            "core(s); lower them, or pass --oversubscribe to run them anyway (slower).")


# ---------------------------------------------------------------------------------------------
# what travels to the workers, and what runs there

@dataclass
class CellOutcome:
    cell: Cell
    metrics: list[dict[str, Any]]
    worker: str
    seconds: float
    refusal: str | None = None  # a one-line reason when the worker refused the cell


def solve_task(token: str, cell: Cell) -> CellOutcome:
    """The task of one cell: the staged payload, solved by :func:`solve_on_worker`."""
    payload = _PAYLOADS.get(token)
    if payload is None:  # raised, so Dask retries it (on this or another worker)
        raise RuntimeError(f"the sweep's data ({token}) is not staged on this worker yet")
    return solve_on_worker(payload, cell)


def solve_on_worker(payload: SweepPayload, cell: Cell) -> CellOutcome:
    """Solves one cell with a payload (the same code as the local loop), on a worker."""
    import torch

    from lbi_engine.errors import LbiError
    from lbi_engine.experiments.cells import solve_cell
    from lbi_engine.limits import memory_limit

    started = time.perf_counter()
    address, limit = _worker_identity()
    refusal = memory_refusal(payload.cell_bytes, limit, memory_limit(), address)
    if refusal is not None:
        return CellOutcome(cell, [], address, 0.0, refusal)
    torch.set_num_threads(int(payload.spec.threads or 1))  # also for the data preparation
    with _LOCK:
        cache = _PREPARED.setdefault(payload.token, {})
        if len(_PREPARED) > 1:  # a new sweep on a long-lived worker: forget the older ones
            for token in [t for t in _PREPARED if t != payload.token]:
                del _PREPARED[token]
        prepared = dict(cache)  # private copy: concurrent cells must not clear each other's
    try:
        metrics = solve_cell(payload.spec, payload.bundle, payload.truths, cell, prepared)
    except LbiError as exc:  # bad input is not retried: it would fail the same way
        return CellOutcome(cell, [], address, 0.0, f"{type(exc).__name__}: {exc}")
    with _LOCK:
        if payload.token in _PREPARED:
            _PREPARED[payload.token] = prepared
    return CellOutcome(cell, metrics, address, time.perf_counter() - started)


def _worker_identity() -> tuple[str, int | None]:
    """This worker's address and memory limit (None outside a worker or without a limit)."""
    try:
        from distributed import get_worker

        worker = get_worker()
    except (ImportError, ValueError):
        return f"pid {os.getpid()}", None
    limit = getattr(getattr(worker, "memory_manager", None), "memory_limit", None)
    return str(worker.address), (int(limit) if limit else None)


def worker_facts() -> dict[str, Any]:
    """Run on every worker before the sweep: what the client checks against."""
    import lbi_engine

    return {"cores": usable_cores(), "lbi": getattr(lbi_engine, "__version__", "?")}


# ---------------------------------------------------------------------------------------------
# the client


@contextmanager
def connect(options: ClusterOptions) -> Iterator[Any]:
    """A Dask client for the options (a LocalCluster is started here and closed after)."""
    import logging

    from distributed import Client, LocalCluster

    from lbi_engine.limits import ENV_VAR

    if options.workers is not None:
        check_local_cores(options)
        # Everything on the loopback interface: the scheduler's HTTP routes (no dashboard)
        # too, which would otherwise listen on all interfaces at port 8787.
        # A worker process reads lbi's limit from its environment: the command's is passed
        # there explicitly (distributed's Nanny sets ``env`` in the worker it starts).
        env = {} if options.memory_limit is None else {ENV_VAR: str(options.memory_limit)}
        with LocalCluster(n_workers=options.workers, threads_per_worker=1, processes=True,
                          host="127.0.0.1", dashboard_address=None, env=env,
                          scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                          silence_logs=logging.ERROR) as cluster, \
                Client(cluster, set_as_default=False) as client:
            yield client
        return
    address = scheduler_address(str(options.scheduler))
    timeout = DEFAULT_CONNECT_TIMEOUT if options.connect_timeout is None \
        else float(options.connect_timeout)
    probe_scheduler(address, timeout)  # nothing of the server is unpickled before this note
    print(f"lbi: connecting to the Dask scheduler at {address}; {TRUST_NOTE}",
          file=sys.stderr)
    try:
        client = Client(address, set_as_default=False, timeout=timeout)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(f"--scheduler {address}: cannot connect ({exc}); {_START_HINT}"
                         ) from None
    with client:
        yield client


def check_cluster(client: Any, options: ClusterOptions, cell_bytes: int) -> None:
    """Refuses before any task: too many threads per host, cells too big, a foreign lbi."""
    import lbi_engine

    if not client.scheduler_info()["workers"]:
        import sys

        print(f"lbi: waiting for a Dask worker to connect to {options.scheduler} "
              "(Ctrl+C to stop)", file=sys.stderr)
        client.wait_for_workers(1)
    workers = client.scheduler_info()["workers"]
    try:
        facts = client.run(worker_facts)
    except ImportError as exc:
        raise InputError(f"the Dask workers cannot import lbi ({exc}); install the same lbi "
                         f"on every worker: {INSTALL_HINT}") from None
    mine = getattr(lbi_engine, "__version__", "?")
    for address, fact in facts.items():
        if fact["lbi"] != mine:
            raise InputError(f"worker {address} runs lbi {fact['lbi']} but this client runs "
                             f"lbi {mine}; install the same version on every worker.")
    per_host: dict[str, list[str]] = {}
    for address, info in workers.items():
        per_host.setdefault(str(info.get("host", address)), []).append(address)
    for host, addresses in per_host.items():
        threads = sum(int(workers[a]["nthreads"]) for a in addresses) * options.threads
        cores = min(int(facts[a]["cores"]) for a in addresses if a in facts) \
            if any(a in facts for a in addresses) else threads
        if threads > cores and not options.oversubscribe:
            raise InputError(
                f"host {host} has {len(addresses)} worker(s) with "
                f"{threads // options.threads} Dask thread(s) x --threads {options.threads} = "
                f"{threads} threads on {cores} core(s); lower --threads, start the workers "
                "with fewer --nthreads, or pass --oversubscribe.")
    for address, info in workers.items():
        refusal = memory_refusal(cell_bytes, int(info.get("memory_limit") or 0) or None,
                                 None, address)
        if refusal is not None:
            raise InputError(refusal)


def payload_bytes(payload: SweepPayload) -> bytes:
    """The payload pickled here, so that the scheduler only ever holds bytes (it unpickles
    task arguments, and need not have torch or lbi installed); one line if it cannot be."""
    try:
        return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # any serialisation failure means the same
        raise InputError(f"network {payload.spec.network!r} cannot be sent to Dask workers "
                         f"({type(exc).__name__}: {exc}); convert it to safetensors + card or "
                         "ONNX, or run the sweep without --workers/--scheduler.") from None


def make_payload(spec: Any, bundle: Any, truths: Any) -> SweepPayload:
    """The payload for the workers: the original module (the file's own program) stays here."""
    shipped = replace(bundle, module=None)
    need = estimate_cell_bytes(shipped, len(spec.indices), spec.dtype)
    return SweepPayload(spec, shipped, truths, uuid.uuid4().hex, need)


def run_cells(
    options: ClusterOptions,
    spec: Any,
    bundle: Any,
    truths: Any,
    todo: Sequence[Cell],
    record: Callable[[Cell, list[dict[str, Any]], str, float], None],
    progress: Callable[[int, int, str], None] | None,
    skipped: int,
) -> None:
    """Sends ``todo`` to the cluster and ``record``s each cell as it comes back.

    Ctrl+C (KeyboardInterrupt) or any error cancels the tasks not yet back; the rows already
    recorded stay in the CSV, and leaving ``connect`` closes a LocalCluster.
    """
    require_distributed()
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    spec = replace(spec, threads=options.threads)
    payload = make_payload(spec, bundle, truths)
    total = skipped + len(todo)
    with connect(options) as client:
        check_cluster(client, options, payload.cell_bytes)
        blob = payload_bytes(payload)
        from lbi_engine.experiments._dask_plugin import PayloadPlugin

        plugin = f"lbi-sweep-{payload.token}"
        client.register_plugin(PayloadPlugin(payload.token, blob), name=plugin)
        futures = {client.submit(solve_task, payload.token, cell, retries=options.retries,
                                 key=f"lbi-cell-{payload.token[:12]}-{n}"): cell
                   for n, cell in enumerate(todo)}
        try:
            arrivals = as_completed(futures, loop=client.loop)
            for done, future in enumerate(arrivals, start=1):
                try:
                    outcome = future.result()
                except KilledWorker as exc:
                    std, method, alpha = futures[future]
                    raise InputError(
                        f"the cell std {std:g}, {method}, alpha {alpha} ended the worker "
                        f"running it too often ({exc}); a worker probably ran out of memory: "
                        "give workers more memory or sweep fewer --samples at once.") from None
                if outcome.refusal is not None:
                    raise InputError(outcome.refusal)
                record(outcome.cell, outcome.metrics, outcome.worker, outcome.seconds)
                if progress is not None:
                    std, method, alpha = outcome.cell
                    progress(skipped + done, total,
                             f"std {std:g}, {method}, alpha {alpha} on {outcome.worker}")
        finally:  # Ctrl+C, a refusal or a bug: nothing keeps running for nobody
            client.cancel([f for f in futures if not f.done()])
            with contextlib.suppress(Exception):  # a lost connection must not hide the cause
                client.unregister_worker_plugin(plugin)
