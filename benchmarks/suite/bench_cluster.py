"""Sweep throughput on Dask: cells per second with 1 and 2 local worker processes.

``python -m benchmarks.suite.bench_cluster`` runs this section alone and writes it into
``benchmarks/RESULTS.md`` (replacing an earlier copy of the section, keeping the others);
``python -m benchmarks`` runs it with all the others.

What is timed: ``run_sweep`` of the same grid into a fresh folder on an already started and
warmed-up cluster (each worker has imported torch and compiled the kernels on a warm-up
cell); the rate is taken between the first and the last cell that came back, so it is the
steady-state rate a long sweep sees. The warm-up is reported separately: it is paid once per
sweep command.
"""

from __future__ import annotations

import re
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import Figure, Section

TITLE = "Sweeps on Dask: cells per second, 1 against 2 local workers"


def _grid(quick: bool) -> Any:
    from lbi_engine.experiments.sweep import SweepSpec

    return SweepSpec(network="mnist-perceptron-ae",
                     alphas=(1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)[: 3 if quick else 6],
                     noise_stds=(0.05, 0.1), methods=("pdhg",), indices=(0, 200, 400, 600),
                     max_iter=200 if quick else 2000, tol=0.0, threads=1,
                     regulariser="tv", steps="safe")  # the setting measured (not the defaults)


def _timed_sweep(spec: Any, cluster: Any) -> tuple[float, float, float]:
    """(steady-state cells per second, wall seconds of the whole ``run_sweep``, mean
    ``cell_seconds`` of the cells: their own time where they ran).

    The rate is taken between the first and the last cell that came back, so loading the
    network, connecting, the first cell's warm-up and writing the plots are left out.
    """
    from lbi_engine.experiments.sweep import run_sweep

    arrivals: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        result = run_sweep(spec, folder, lambda done, total, text: arrivals.append(
            time.perf_counter()) if done else None, cluster=cluster)
        seconds = time.perf_counter() - start
    assert result.ran == len(spec.cells()) == len(arrivals)
    cell = [float(r["cell_seconds"]) for r in result.rows if r["index"] == str(spec.indices[0])]
    return (len(arrivals) - 1) / (arrivals[-1] - arrivals[0]), seconds, sum(cell) / len(cell)


def _warm(client: Any, spec: Any, workers: int) -> None:
    """One short cell on every worker: imports and kernel compilation are not timed."""
    import dataclasses

    from lbi_engine.experiments.batch import dataset_truths
    from lbi_engine.experiments.sweep_dask import make_payload, solve_on_worker
    from lbi_engine.models.zoo import load_network

    client.wait_for_workers(workers)
    warm = dataclasses.replace(spec, max_iter=5)
    payload = make_payload(warm, load_network(spec.network),
                           dataset_truths(spec.dataset, spec.split, list(spec.indices)))
    client.run(solve_on_worker, payload, warm.cells()[0])


def run(quick: bool = False) -> Section:
    from lbi_engine.experiments.sweep_dask import ClusterOptions, connect, usable_cores

    section = Section("cluster", TITLE)
    spec = _grid(quick)
    cells = len(spec.cells())
    rounds = 1 if quick else 2
    rates: dict[str, list[float]] = {"local": [], "one": [], "two": []}
    walls: dict[str, list[float]] = {"local": [], "one": [], "two": []}
    cell_times: dict[str, list[float]] = {"local": [], "one": [], "two": []}
    _timed_sweep(spec, None)  # warm-up of this process (imports, kernels)
    starts = {}
    with connect(ClusterOptions(workers=1, oversubscribe=True)) as one, \
            connect(ClusterOptions(workers=2, oversubscribe=True)) as two:
        for name, client, n in (("one", one, 1), ("two", two, 2)):
            started = time.perf_counter()
            _warm(client, spec, n)
            starts[name] = time.perf_counter() - started
        where = {"local": None, "one": ClusterOptions(scheduler=one.scheduler.address),
                 "two": ClusterOptions(scheduler=two.scheduler.address)}
        for _ in range(rounds):  # interleaved, so a change in the machine's load hits all
            for name, options in where.items():
                rate, wall, cell = _timed_sweep(spec, options)
                rates[name].append(rate)
                walls[name].append(wall)
                cell_times[name].append(cell)
    local, one_rate, two_rate = (max(rates[k]) for k in ("local", "one", "two"))
    section.add(
        Figure("in-process sweep (no Dask)", local, "cells/s"),
        Figure("1 Dask worker", one_rate, "cells/s", local, "in-process",
               note="Dask's cost per cell"),
        Figure("2 Dask workers", two_rate, "cells/s", one_rate, "1 worker",
               note=f"{usable_cores()} usable cores; ideal 2"),
    )
    section.note(
        f"Grid: {cells} cells of {len(spec.indices)} MNIST samples each "
        f"(`{spec.network}`, pdhg, {spec.max_iter} iterations, tol 0, 1 torch thread per "
        "cell). Cells per second between the first and the last cell that came back, the "
        f"best of {rounds} interleaved round(s) (in-process, 1 worker, 2 workers, again). "
        "Whole `run_sweep` (network, data, connecting, plots): "
        + ", ".join(f"{k} {min(v):.1f} s" for k, v in walls.items())
        + "; a first cell on each worker (imports, kernel compilation) took "
        + ", ".join(f"{k} {v:.1f} s" for k, v in starts.items())
        + " once per command, besides starting the processes. Mean time of one cell where it "
        "ran (`cell_seconds`, best round): "
        + ", ".join(f"{k} {min(v):.3f} s" for k, v in cell_times.items())
        + " — a cell that takes longer when two workers run at once is slowed by the shared "
        "cores, not by Dask. A shared machine: compare the ratios, not the rates, and mind "
        "the load average in the heading.")
    section.data = {"rates": rates, "walls": walls, "cell_seconds": cell_times}
    return section


def main() -> None:
    from benchmarks import RESULTS_FILE
    from benchmarks._common import load_average
    from benchmarks.report import _row
    from lbi_engine.experiments.sweep_dask import usable_cores

    load = load_average()
    started = time.perf_counter()
    section = run()
    section.seconds = time.perf_counter() - started
    end = load_average()
    lines = [f"## {section.title}", "",
             f"Written by `python -m benchmarks.suite.bench_cluster` on "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average (1 min) at "
             f"start / end {load if load is None else round(load, 2)} / "
             f"{end if end is None else round(end, 2)} on {usable_cores()} cores.", "",
             "| figure | value | reference | ratio | target | met | note |",
             "|---|---|---|---|---|---|---|", *[_row(f) for f in section.figures], ""]
    lines += [*[n + "\n" for n in section.notes], f"_Section time: {section.seconds:.0f} s._",
              ""]
    text = "\n".join(lines)
    print(text)
    path = Path(RESULTS_FILE)
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    pattern = re.compile(rf"^## {re.escape(TITLE)}\n.*?(?=^## |\Z)", re.S | re.M)
    new = pattern.sub(lambda _m: text, old) if pattern.search(old) else \
        old.rstrip() + "\n\n" + text
    path.write_text(new, encoding="utf-8")


if __name__ == "__main__":
    main()
