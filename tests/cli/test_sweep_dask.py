"""`lbi sweep` on Dask distributed: equal to the local sweep, resumable, robust to a lost
worker, payload once per worker, and the refusals (cores, memory, consent, no Dask).

One LocalCluster of 2 worker processes serves the module (starting one costs seconds on
2 cores); the test that kills a worker runs last so the others see the original workers.
"""

from __future__ import annotations

import csv
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lbi_engine.errors import InputError
from lbi_engine.experiments import sweep_dask
from lbi_engine.experiments.sweep import COLUMNS, KEY_COLUMNS, SweepSpec, run_sweep
from lbi_engine.experiments.sweep_dask import ClusterOptions

NET = "mnist-perceptron-ae"
SPEC = SweepSpec(network=NET, alphas=(1e-3, 1e-2, 1e-1), noise_stds=(0.05, 0.1),
                 methods=("pdhg",), indices=(0, 1), max_iter=10, threads=1)
GRID = ["sweep", "--network", NET, "--noise-stds", "0.05", "--methods", "pdhg",
        "--samples", "0-1", "--max-iter", "5", "--threads", "1"]


@pytest.fixture(scope="module")
def cluster() -> Iterator[tuple[str, Any]]:
    """(scheduler address, a client for looking inside) of 2 worker processes, started as
    `--workers 2` starts them (oversubscribing allowed, for machines with one core)."""
    pytest.importorskip("distributed")
    with sweep_dask.connect(ClusterOptions(workers=2, oversubscribe=True)) as client:
        client.wait_for_workers(2)
        yield client.scheduler.address, client


def _rows(folder: Path) -> list[dict[str, str]]:
    with open(folder / "results.csv", newline="") as fh:
        reader = csv.DictReader(fh)
        assert tuple(reader.fieldnames or ()) == COLUMNS
        return list(reader)


def _key(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(row[c] for c in KEY_COLUMNS)


def _cells(rows: list[dict[str, str]]) -> list[tuple[str, str, str]]:
    return sorted((r["noise_std"], r["method"], r["alpha"]) for r in rows if r["index"] == "0")


def test_cluster_rows_equal_local_rows_and_data_travels_once_per_worker(
        cluster: tuple[str, Any], tmp_path: Path) -> None:
    address, client = cluster
    local = run_sweep(SPEC, tmp_path / "local")
    remote = run_sweep(SPEC, tmp_path / "dask", cluster=ClusterOptions(scheduler=address))
    assert (remote.ran, remote.skipped) == (6, 0)
    a = {_key(r): r for r in _rows(tmp_path / "local")}
    b = {_key(r): r for r in _rows(tmp_path / "dask")}
    assert len(a) == len(local.rows) == 12 and a.keys() == b.keys()  # the same cells, once each
    for key, row in a.items():  # same seeds, one torch thread per cell: the same numbers
        assert abs(float(row["psnr"]) - float(b[key]["psnr"])) < 1e-3, key
        assert float(b[key]["objective"]) == pytest.approx(float(row["objective"]), rel=1e-5)
        assert b[key]["iterations"] == row["iterations"] == "10"
    workers = set(client.scheduler_info()["workers"])
    used = {r["worker"] for r in b.values()}
    assert used <= workers and len(used) == 2  # both workers took cells
    assert {r["worker"] for r in a.values()} == {"local"}
    assert all(float(r["cell_seconds"]) > 0 for r in [*a.values(), *b.values()])
    # the network and data were unpickled once on every worker, not once per cell
    loads = client.run(getattr, sweep_dask, "LOADS")
    assert set(loads) == workers
    assert all(len(counts) == 1 and set(counts.values()) == {1} for counts in loads.values())
    assert not sweep_dask.LOADS  # nor in this process, which also runs the scheduler
    staged = client.run(getattr, sweep_dask, "_PAYLOADS")
    assert staged == {w: {} for w in workers}  # and freed when the sweep ended


def test_cli_sends_cells_to_a_scheduler(cluster: tuple[str, Any], tmp_path: Path, cli: Any
                                        ) -> None:
    address, client = cluster
    code, stdout, err = cli(*GRID, "--alphas", "1e-3,1e-2", "--scheduler", address, "--out",
                            tmp_path)
    assert code == 0, err
    assert "ran 2, skipped 0" in stdout
    assert f"connecting to the Dask scheduler at {address}; a scheduler is trusted code" in err
    rows = _rows(tmp_path)
    assert len(rows) == 4 and {r["worker"] for r in rows} <= set(client.scheduler_info()["workers"])
    import dask

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):  # Dask's default: 30 s
        code, _, err = cli(*GRID, "--alphas", "1e-3", "--scheduler", "tcp://127.0.0.1:9",
                           "--out", tmp_path / "other")
    assert code == 2 and err.count("\n") == 1 and "dask scheduler" in err


@pytest.mark.slow
def test_cli_workers_starts_and_closes_a_local_cluster(tmp_path: Path, cli: Any) -> None:
    pytest.importorskip("distributed")
    code, stdout, err = cli(*GRID, "--alphas", "1e-3,1e-2,1e-1", "--workers", "2",
                            "--oversubscribe", "--out", tmp_path)
    assert code == 0, err
    rows = _rows(tmp_path)
    assert len(rows) == 6 and all(r["worker"].startswith("tcp://127.0.0.1:") for r in rows)


@pytest.mark.slow
def test_local_workers_apply_the_command_memory_limit(tmp_path: Path, cli: Any) -> None:
    """--memory-limit reaches the workers of --workers (the same rule as every lbi command):
    3 MiB loads the network here, but a cell of 200 samples needs more on the worker."""
    pytest.importorskip("distributed")
    code, _, err = cli(*GRID[:7], "--samples", "0-199", "--alphas", "1e-2", "--workers", "1",
                       "--memory-limit", "3M", "--out", tmp_path)
    assert code == 2 and err.count("\n") == 1
    assert "an lbi memory limit of 3.0 MiB" in err and "tcp://127.0.0.1:" in err


def test_interrupted_cluster_sweep_resumes_and_recomputes_nothing(
        cluster: tuple[str, Any], tmp_path: Path) -> None:
    address, client = cluster
    options = ClusterOptions(scheduler=address)

    def stop_after_first_cell(done: int, total: int, text: str) -> None:
        if done == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(SPEC, tmp_path, stop_after_first_cell, cluster=options)
    first = _rows(tmp_path)
    assert len(first) == 2  # the one cell that came back, both samples
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files
    for _ in range(100):  # the pending tasks were cancelled (the scheduler forgets them)
        left = client.run_on_scheduler(
            lambda dask_scheduler: [k for k in dask_scheduler.tasks if "lbi-cell" in str(k)])
        if not left:
            break
        time.sleep(0.1)
    assert not left
    result = run_sweep(SPEC, tmp_path, cluster=options)
    assert (result.ran, result.skipped) == (5, 1)
    rows = _rows(tmp_path)
    assert rows[:2] == first and len({_key(r) for r in rows}) == len(rows) == 12
    # nothing left to do: no cluster is contacted at all (this address has no scheduler)
    again = run_sweep(SPEC, tmp_path, cluster=ClusterOptions(scheduler="tcp://127.0.0.1:9"))
    assert (again.ran, again.skipped) == (0, 6) and _rows(tmp_path) == rows


def test_cluster_refuses_a_cell_larger_than_a_worker_memory(
        cluster: tuple[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    address, _ = cluster
    monkeypatch.setattr(sweep_dask, "estimate_cell_bytes", lambda *args: 2**50)
    with pytest.raises(InputError, match="memory limit"):
        run_sweep(SPEC, tmp_path, cluster=ClusterOptions(scheduler=address))
    assert not (tmp_path / "results.csv").exists()


def test_cluster_refuses_more_threads_than_a_host_has_cores(
        cluster: tuple[str, Any], tmp_path: Path) -> None:
    address, _ = cluster
    cores = sweep_dask.usable_cores()  # the workers run on this host, with 1 thread each
    with pytest.raises(InputError, match=rf"= {2 * cores} threads on {cores} core"):
        run_sweep(SPEC, tmp_path, cluster=ClusterOptions(scheduler=address, threads=cores))
    assert not (tmp_path / "results.csv").exists()


def test_a_killed_worker_loses_no_cell_and_duplicates_none(
        cluster: tuple[str, Any], tmp_path: Path) -> None:
    """Kill the worker that just started a cell; every cell still arrives exactly once."""
    address, client = cluster
    spec = SweepSpec(network=NET, alphas=(1e-3, 1e-2, 1e-1, 1.0), noise_stds=(0.05,),
                     methods=("pdhg",), indices=(0, 1), max_iter=400, tol=0.0, threads=1)
    killed: dict[str, Any] = {}

    def kill_on_first_result(done: int, total: int, text: str) -> None:
        if done != 1:
            return
        victim = text.rsplit(" on ", 1)[1]  # this worker was just handed its next cell
        killed["keys"] = [str(k) for k in client.processing(workers=[victim])[victim]]
        pid = client.run(os.getpid, workers=[victim])[victim]
        os.kill(pid, signal.SIGKILL)
        killed["address"] = victim

    result = run_sweep(spec, tmp_path, kill_on_first_result,
                       cluster=ClusterOptions(scheduler=address))
    rows = _rows(tmp_path)
    assert result.ran == 4 and len(rows) == 8 and len({_key(r) for r in rows}) == 8
    assert _cells(rows) == sorted((repr(s), m, repr(a)) for s, m, a in spec.cells())
    assert killed["keys"], "the killed worker was running no cell"
    lost = [spec.cells()[int(k.rsplit("-", 1)[1])] for k in killed["keys"]]
    for std, method, alpha in lost:  # recomputed elsewhere, recorded once
        redone = [r for r in rows
                  if (r["noise_std"], r["method"], r["alpha"]) == (repr(std), method, repr(alpha))]
        assert len(redone) == 2 and all(r["worker"] != killed["address"] for r in redone)


@pytest.mark.slow
def test_losing_every_worker_at_once_still_finishes_the_sweep(
        cluster: tuple[str, Any], tmp_path: Path) -> None:
    """Every copy of the network and data dies with the workers; the plugin stages it again
    on the restarted ones (scattered data could not be recovered: the sweep was cancelled)."""
    address, client = cluster
    spec = SweepSpec(network=NET, alphas=(1e-3, 1e-2, 1e-1), noise_stds=(0.05,),
                     methods=("pdhg",), indices=(0,), max_iter=400, tol=0.0, threads=1)

    def kill_all_on_first_result(done: int, total: int, text: str) -> None:
        if done == 1:
            for pid in client.run(os.getpid).values():
                os.kill(pid, signal.SIGKILL)

    result = run_sweep(spec, tmp_path, kill_all_on_first_result,
                       cluster=ClusterOptions(scheduler=address))
    rows = _rows(tmp_path)
    assert result.ran == 3 and _cells(rows) == sorted(
        (repr(s), m, repr(a)) for s, m, a in spec.cells())


# ---------------------------------------------------------------------------------------------
# refusals and compatibility (no cluster needed)


def test_workers_times_threads_above_the_cores_is_refused(
        cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("distributed")
    monkeypatch.setattr(sweep_dask, "usable_cores", lambda: 2)
    monkeypatch.setattr(sweep_dask, "connect", _no_cluster)
    code, _, err = cli(*GRID[:-1], "2", "--alphas", "1e-3", "--workers", "2", "--out", tmp_path)
    assert code == 2 and err.count("\n") == 1
    assert "--workers 2 x --threads 2 = 4" in err and "--oversubscribe" in err
    check = ClusterOptions(workers=2, threads=2, oversubscribe=True)
    sweep_dask.check_local_cores(check, cores=2)  # asked for: allowed
    code, _, err = cli(*GRID, "--alphas", "1e-3", "--workers", "2", "--scheduler",
                       "tcp://127.0.0.1:9", "--out", tmp_path)
    assert code == 2 and "not allowed with" in err
    assert not (tmp_path / "results.csv").exists()


def test_missing_dask_names_the_install_command(
        cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "distributed", None)  # import distributed -> ImportError
    code, _, err = cli(*GRID, "--alphas", "1e-3", "--workers", "1", "--out", tmp_path)
    assert code == 2 and err.count("\n") == 1 and "pip install 'lbi[cluster]'" in err


def test_a_pickled_network_is_refused_before_any_worker_without_consent(
        cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    pytest.importorskip("distributed")
    marker = tmp_path / "RAN"
    torch.save({"weights": _WritesFile(str(marker))}, tmp_path / "net.pt")
    monkeypatch.setattr(sweep_dask, "connect", _no_cluster)
    code, _, err = cli(*GRID, "--alphas", "1e-3", "--workers", "1", "--network",
                       tmp_path / "net.pt", "--input-shape", "1,28,28", "--out", tmp_path / "s")
    assert code == 2 and err.count("\n") == 1 and "allow" in err
    assert not marker.exists()


def test_the_payload_leaves_the_file_program_behind_and_workers_refuse_big_cells() -> None:
    from lbi_engine.models.zoo import load_network

    bundle = load_network(NET)
    payload = sweep_dask.make_payload(SPEC, bundle, truths=None)
    assert bundle.module is not None and payload.bundle.module is None
    weights = sum(p.numel() * 4 for p in bundle.module.parameters())
    assert payload.cell_bytes > 2 * weights * 0.5  # the encoder's weights at least
    payload.cell_bytes = 2**60  # more than any machine has available
    outcome = sweep_dask.solve_on_worker(payload, SPEC.cells()[0])
    assert outcome.metrics == [] and "lbi memory limit" in (outcome.refusal or "")
    assert sweep_dask.memory_refusal(10, 11, None, "w") is None
    assert "Dask memory limit of" in (sweep_dask.memory_refusal(12, 11, None, "w") or "")
    assert "lbi memory limit of" in (sweep_dask.memory_refusal(12, None, 11, "w") or "")


def test_a_consented_pickled_network_sends_no_code_of_the_file_to_workers(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With --allow-pickle the client unpickles the user's module (consent given for this
    run); what travels to the workers is lbi's lifted network only, never the user's class."""
    import torch

    from lbi_engine.models.zoo import load_network

    (tmp_path / "usernet_mod.py").write_text(
        "import torch.nn as nn\n"
        "class UserNet(nn.Sequential):\n"
        "    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import usernet_mod

    torch.manual_seed(0)
    net = usernet_mod.UserNet(torch.nn.Flatten(), torch.nn.Linear(784, 20), torch.nn.ReLU())
    torch.save(net, tmp_path / "user.pt")
    bundle = load_network(tmp_path / "user.pt", input_shape=(1, 28, 28), allow_pickle=True)
    assert type(bundle.module).__module__ == "usernet_mod"
    spec = SweepSpec(network=str(tmp_path / "user.pt"), alphas=(1e-2,), noise_stds=(0.05,),
                     methods=("pdhg",), indices=(0,), max_iter=3, input_shape=(1, 28, 28),
                     allow_pickle=True)
    blob = sweep_dask.payload_bytes(sweep_dask.make_payload(spec, bundle, truths=None))
    assert b"usernet_mod" not in blob and b"UserNet" not in blob


def test_a_results_csv_from_before_the_worker_column_still_resumes(tmp_path: Path) -> None:
    spec = SweepSpec(network=NET, alphas=(1e-3,), noise_stds=(0.05,), methods=("pdhg",),
                     indices=(0,), max_iter=3)
    run_sweep(spec, tmp_path)
    old = [c for c in COLUMNS if c not in ("worker", "cell_seconds")]
    row = _rows(tmp_path)[0]
    (tmp_path / "results.csv").write_text(",".join(old) + "\n" + ",".join(row[c] for c in old)
                                          + "\n")
    wider = SweepSpec(**{**spec.__dict__, "alphas": (1e-3, 1e-2)})
    result = run_sweep(wider, tmp_path)
    assert (result.ran, result.skipped) == (1, 1)
    rows = _rows(tmp_path)  # rewritten with the new header
    assert [r["alpha"] for r in rows] == ["0.001", "0.01"]
    assert [r["worker"] for r in rows] == ["", "local"] and rows[0]["psnr"] == row["psnr"]


class _WritesFile:
    """Unpickling this writes a file: the sign that a pickle ran code."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, tuple[str, str]]:
        return (open, (self.path, "w"))


def _no_cluster(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a cluster was started although the input was refused")
