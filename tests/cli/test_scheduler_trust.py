"""`lbi sweep --scheduler`: only what the user names, never a hang, always one line.

A scheduler is trusted code (Dask unpickles what it sends), so lbi connects only to an
address typed on the command line or read from a scheduler file the user owns, says so when
it connects, and bounds the connection and Dask's handshake: a server that accepts and never
answers used to hang the sweep forever, nothing listening took 35-64 s and a traceback.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lbi_engine.errors import InputError
from lbi_engine.experiments import sweep_dask

pytest.importorskip("distributed")

GRID = ["sweep", "--network", "mnist-perceptron-ae", "--noise-stds", "0.05", "--methods",
        "pdhg", "--samples", "0", "--max-iter", "2", "--threads", "1", "--alphas", "1e-2"]


@pytest.fixture
def silent_server() -> Iterator[str]:
    """tcp://127.0.0.1:PORT of a server that accepts every connection and never answers."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"tcp://127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    server.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens there once it is closed


def _refused(code: int, err: str, *words: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for word in words:
        assert word in err, err


def test_a_server_that_never_answers_is_refused_within_the_timeout(
        cli: Any, tmp_path: Path, silent_server: str) -> None:
    started = time.monotonic()
    code, _, err = cli(*GRID, "--scheduler", silent_server, "--connect-timeout", "1",
                       "--out", tmp_path / "out")
    _refused(code, err, "does not answer as a Dask scheduler", "--connect-timeout")
    assert time.monotonic() - started < 20  # network loading included; the wait is 1 s
    assert "trusted code" not in err  # nothing of it was trusted


def test_the_probe_alone_is_bounded_by_the_timeout(silent_server: str) -> None:
    started = time.monotonic()
    with pytest.raises(InputError, match="no Dask handshake within 0.5 s"):
        sweep_dask.probe_scheduler(silent_server, 0.5)
    assert time.monotonic() - started < 4


def test_nothing_listening_is_refused_at_once(cli: Any, tmp_path: Path) -> None:
    address = f"tcp://127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    with pytest.raises(InputError, match="cannot connect"):
        sweep_dask.probe_scheduler(address, 30.0)  # refused: no waiting for the 30 s
    assert time.monotonic() - started < 3
    code, _, err = cli(*GRID, "--scheduler", address, "--out", tmp_path / "out")
    _refused(code, err, "cannot connect", "dask scheduler")


def test_an_empty_scheduler_file_is_refused_before_any_work(cli: Any, tmp_path: Path) -> None:
    sched = tmp_path / "sched.json"
    sched.write_text("")
    started = time.monotonic()
    code, _, err = cli(*GRID, "--scheduler", sched, "--out", tmp_path / "out")
    _refused(code, err, "is empty", "--scheduler-file")
    assert time.monotonic() - started < 5
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("content", ["{", "[]", '{"address": 5}', '{"address": "here"}',
                                     '{"address": "http://evil:80"}', "\xff\xfe"])
def test_a_malformed_scheduler_file_is_one_line(cli: Any, tmp_path: Path,
                                                content: str) -> None:
    sched = tmp_path / "sched.json"
    sched.write_bytes(content.encode("latin-1"))
    code, _, err = cli(*GRID, "--scheduler", sched, "--out", tmp_path / "out")
    _refused(code, err, "--scheduler")


def test_a_fifo_or_device_as_scheduler_file_is_refused_without_blocking(
        cli: Any, tmp_path: Path) -> None:
    fifo = tmp_path / "sched.json"
    os.mkfifo(fifo)
    code, _, err = cli(*GRID, "--scheduler", fifo, "--out", tmp_path / "out")
    _refused(code, err, "pipe (FIFO)")
    code, _, err = cli(*GRID, "--scheduler", "/dev/zero", "--out", tmp_path / "out")
    _refused(code, err, "device")


def test_a_scheduler_file_others_can_write_or_own_is_refused(
        cli: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sched = tmp_path / "sched.json"
    sched.write_text(json.dumps({"address": "tcp://127.0.0.1:8786"}))
    sched.chmod(0o666)
    code, _, err = cli(*GRID, "--scheduler", sched, "--out", tmp_path / "out")
    _refused(code, err, "every user", "chmod o-w")
    sched.chmod(0o644)
    monkeypatch.setattr(os, "geteuid", lambda: os.stat(sched).st_uid + 1)
    code, _, err = cli(*GRID, "--scheduler", sched, "--out", tmp_path / "out")
    _refused(code, err, "another user")


def test_a_scheduler_file_names_the_address_that_is_used(tmp_path: Path) -> None:
    sched = tmp_path / "sched.json"
    sched.write_text(json.dumps({"address": "tls://10.0.0.5:8786", "type": "Scheduler"}))
    assert sweep_dask.scheduler_address(str(sched)) == "tls://10.0.0.5:8786"
    assert sweep_dask.scheduler_address("tcp://h:1") == "tcp://h:1"
    with pytest.raises(InputError, match="not a Dask address"):
        sweep_dask.scheduler_address("http://h:1")
    with pytest.raises(InputError, match="does not exist"):
        sweep_dask.scheduler_address(str(tmp_path / "missing.json"))
