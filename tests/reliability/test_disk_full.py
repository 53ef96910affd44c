"""A full disk mid-write: one line naming the file and saying the previous result is intact,
which it is (simulated: every fsync of the second run fails with ENOSPC)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from lbi_engine.io import DiskFullError, atomic_write_text
from tests.reliability.kit import Kit


def _full(*_args: object) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_names_the_file_and_keeps_the_old_one(tmp_path: Path,
                                                          monkeypatch) -> None:
    target = tmp_path / "a.txt"
    target.write_text("old")
    monkeypatch.setattr(os, "fsync", _full)
    with pytest.raises(DiskFullError, match=r"cannot write .*a.txt: the disk is full .*"
                                            r"keeps its previous content"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temporary file left


def test_invert_on_a_full_disk_is_one_line_and_the_previous_result_is_intact(
        tmp_path: Path, cli, kit: Kit, monkeypatch) -> None:
    out = tmp_path / "out"
    argv = ["invert", "--network", kit.card, "--sample", "0", "--max-iter", "2",
            "--threads", "1", "--out", out, "--overwrite"]
    code, _, err = cli(*argv)
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(os, "fsync", _full)
    code, _, err = cli(*argv[:-1], "--overwrite", "--seed", "3")
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert "disk filled" in err and "previous result" in err and "intact" in err
    assert ".npy" in err or ".png" in err or ".json" in err or ".csv" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] in (
        [], [".out.lbi-lock"])
