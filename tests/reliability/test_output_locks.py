"""Every command that writes results holds the output lock: a second writer is refused at once.

`lbi invert` and `lbi sweep` held it before; convert, train, reproduce and feature-prior wrote
their folders unguarded, so two of them into one --out could mix their files.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import pytest

from lbi_engine.results.folder_lock import lock_path


def _hold(target: Path) -> int:
    fd = os.open(lock_path(target), os.O_RDWR | os.O_CREAT, 0o644)
    os.write(fd, json.dumps({"pid": 4242, "host": "elsewhere", "started": 0,
                             "command": "lbi something"}).encode())
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    return fd


@pytest.mark.parametrize("command", [
    ("convert", "{src}", "--out", "{out}"),
    ("train", "circle-perceptron", "--out", "{out}", "--epochs", "1"),
    ("reproduce", "circle", "--quick", "--out", "{out}"),
    ("feature-prior", "mnist-cnn-ae", "--out", "{out}"),
])
def test_a_command_writing_into_a_locked_folder_exits_2_naming_the_holder(
        tmp_path: Path, cli, command: tuple[str, ...]) -> None:
    src = tmp_path / "model.onnx"
    src.write_bytes(b"not read: the lock is checked first")
    out = tmp_path / "out"
    fd = _hold(out)
    try:
        code, _, err = cli(*(a.format(src=src, out=out) for a in command))
    finally:
        os.close(fd)
    assert code == 2, err
    assert "Traceback" not in err
    assert "being written by lbi process 4242 on elsewhere" in err, err
    assert not out.exists() and not list(tmp_path.glob("out.*"))  # nothing was written


def test_the_lock_file_is_gone_after_a_command_finishes(tmp_path: Path, cli) -> None:
    out = tmp_path / "zoo"
    code, _, err = cli("train", "circle-perceptron", "--out", out, "--epochs", "1")
    assert code == 0, err
    assert (out / "circle-perceptron.json").is_file()
    assert not lock_path(out).exists()
