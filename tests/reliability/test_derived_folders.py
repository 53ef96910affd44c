"""Folders a command derives under ``--out`` are never followed when someone planted a link.

``lbi reproduce all --out D`` makes ``D/circle``, ``D/noise``, …; a symbolic link planted at
any of those names (to a folder or dangling) must end in exit 2 and one line before any
work, with nothing written through the link.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lbi_engine.experiments import EXPERIMENTS
from lbi_engine.experiments.report import Report
from lbi_engine.results.folder_lock import OutputFolderError
from lbi_engine.results.owned_folders import derived_folder, owned_folder


def _one_line_refusal(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_reproduce_all_refuses_a_link_at_each_experiment_folder(
        tmp_path: Path, cli, name: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "D"
    out.mkdir()
    os.symlink(elsewhere, out / name)
    code, _, err = cli("reproduce", "all", "--quick", "--out", out)
    _one_line_refusal(code, err)
    assert "symbolic link" in err and name in err
    assert list(elsewhere.iterdir()) == []
    assert os.path.islink(out / name)  # lbi removes nothing it did not make
    # refused before any work: no file anywhere under D (only empty experiment folders)
    assert [p for p in out.rglob("*") if not p.is_dir()] == []


def test_reproduce_all_refuses_a_dangling_link_without_creating_its_target(
        tmp_path: Path, cli) -> None:
    out = tmp_path / "D"
    out.mkdir()
    target = tmp_path / "created-by-lbi"
    os.symlink(target, out / "convergence")
    code, _, err = cli("reproduce", "all", "--quick", "--out", out)
    _one_line_refusal(code, err)
    assert not target.exists()
    assert not (out / "index.md").exists()


def test_a_file_planted_at_an_experiment_folder_is_refused(tmp_path: Path, cli) -> None:
    out = tmp_path / "D"
    out.mkdir()
    (out / "noise").write_text("mine")
    code, _, err = cli("reproduce", "all", "--quick", "--out", out)
    _one_line_refusal(code, err)
    assert "not a folder" in err
    assert (out / "noise").read_text() == "mine"


def test_a_report_and_a_sweep_never_write_through_a_link_at_their_folder(
        tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = tmp_path / "link"
    os.symlink(elsewhere, link)
    with pytest.raises(OutputFolderError, match="symbolic link"):
        Report("t", link)
    from lbi_engine.experiments.sweep import SweepSpec, run_sweep

    spec = SweepSpec(network="mnist-perceptron", alphas=(1e-2,), noise_stds=(0.05,),
                     methods=("pdhg",), indices=(0,))
    with pytest.raises(OutputFolderError, match="symbolic link"):
        run_sweep(spec, link)
    assert list(elsewhere.iterdir()) == []


def test_owned_folder_makes_real_folders_and_rejects_other_users(
        tmp_path: Path, monkeypatch) -> None:
    made = derived_folder(tmp_path, "a")
    assert made.is_dir() and not made.is_symlink()
    assert owned_folder(made) == made  # an existing real folder of ours is fine
    for bad in ("", ".", "..", "a/b"):
        with pytest.raises(ValueError):
            derived_folder(tmp_path, bad)
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 1)
    with pytest.raises(OutputFolderError, match="another user"):
        owned_folder(made)
