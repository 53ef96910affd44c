"""Nothing planted beside an output folder can redirect a run.

The lock file ``.NAME.lbi-lock`` and the swap's backup folders ``.NAME.lbi-old-…`` sit beside
``--out``, often in a folder others can write to. A symlink planted under the lock's name
used to make lbi truncate and overwrite the file it pointed to (a dangling one created its
target); one planted under a backup's name was renamed into ``--out`` by the recovery, so
the results (and an ``--overwrite``) went into someone else's folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from lbi_engine.results import folder_swap
from lbi_engine.results.folder_lock import OutputFolderError, lock_path, output_folder_lock
from tests.reliability.kit import Kit

PRECIOUS = b"the user's own file: lbi must never write here\n"


def _commands(kit: Kit, out: Path) -> dict[str, list[str]]:
    return {
        "invert": ["invert", "--network", str(kit.card), "--sample", "0", "--max-iter", "2",
                   "--threads", "1", "--out", str(out)],
        "sweep": ["sweep", "--network", str(kit.card), "--noise-stds", "0.05", "--methods",
                  "pdhg", "--samples", "0", "--max-iter", "2", "--threads", "1", "--alphas",
                  "1e-2", "--out", str(out)],
        "convert": ["convert", str(kit.onnx), "--out", str(out)],
    }


def _one_line_refusal(code: int, err: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("command", ["invert", "sweep", "convert"])
def test_a_symlink_planted_as_the_lock_file_is_refused_and_its_target_untouched(
        tmp_path: Path, cli, kit: Kit, command: str) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(PRECIOUS)
    out = tmp_path / "out"
    os.symlink(victim, lock_path(out))
    code, _, err = cli(*_commands(kit, out)[command])
    _one_line_refusal(code, err)
    assert "symbolic link" in err and ".out.lbi-lock" in err
    assert victim.read_bytes() == PRECIOUS
    assert os.path.islink(lock_path(out))  # lbi deletes nothing it did not make
    assert not out.exists()  # refused before anything was computed or written


@pytest.mark.parametrize("command", ["invert", "convert"])
def test_a_dangling_symlink_planted_as_the_lock_file_does_not_create_its_target(
        tmp_path: Path, cli, kit: Kit, command: str) -> None:
    target = tmp_path / "created-by-lbi"
    out = tmp_path / "out"
    os.symlink(target, lock_path(out))
    code, _, err = cli(*_commands(kit, out)[command])
    _one_line_refusal(code, err)
    assert not os.path.lexists(target)


def test_a_hard_link_planted_as_the_lock_file_is_refused(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_bytes(PRECIOUS)
    out = tmp_path / "out"
    os.link(victim, lock_path(out))
    with pytest.raises(OutputFolderError, match="other hard links"):
        with output_folder_lock(out):
            pass
    assert victim.read_bytes() == PRECIOUS


def test_a_fifo_planted_as_the_lock_file_is_refused_at_once(tmp_path: Path) -> None:
    out = tmp_path / "out"
    os.mkfifo(lock_path(out))
    with pytest.raises(OutputFolderError, match="not a regular file"):
        with output_folder_lock(out):
            pass


def test_a_symlink_to_a_folder_planted_as_the_lock_file_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    os.symlink(elsewhere, lock_path(out))
    with pytest.raises(OutputFolderError, match="symbolic link"):
        with output_folder_lock(out):
            pass
    assert list(elsewhere.iterdir()) == []


def test_the_lock_file_lbi_made_still_works_and_is_removed(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with output_folder_lock(out):
        st = os.lstat(lock_path(out))
        assert st.st_nlink == 1 and st.st_size > 0
    assert not os.path.lexists(lock_path(out))


def _planted_backup(tmp_path: Path) -> tuple[Path, Path, dict[str, bytes]]:
    """Someone else's folder with results of its own, and a symlink to it planted under the
    name of a backup of ``tmp_path/run`` (which does not exist)."""
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    files = {"result.json": b'{"theirs": true}', "reconstruction.npy": b"their array"}
    for name, data in files.items():
        (theirs / name).write_bytes(data)
    out = tmp_path / "run"
    os.symlink(theirs, tmp_path / ".run.lbi-old-0123abcd")
    return out, theirs, files


def test_recovery_never_renames_a_planted_symlink_into_the_target(tmp_path: Path) -> None:
    out, theirs, files = _planted_backup(tmp_path)
    folder_swap.recover_folder(out)
    assert not os.path.lexists(out)
    assert {p.name: p.read_bytes() for p in theirs.iterdir()} == files
    assert folder_swap.leftovers(out) == []  # not lbi's: neither restored nor deleted
    assert os.path.islink(tmp_path / ".run.lbi-old-0123abcd")


def test_recovery_leaves_another_users_backup_alone(tmp_path: Path, monkeypatch) -> None:
    backup = tmp_path / ".run.lbi-old-0123abcd"
    backup.mkdir()
    monkeypatch.setattr(os, "geteuid", lambda: os.lstat(backup).st_uid + 1)
    folder_swap.recover_folder(tmp_path / "run")
    assert backup.is_dir() and not (tmp_path / "run").exists()


def test_recovery_still_restores_a_real_backup(tmp_path: Path) -> None:
    backup = tmp_path / ".run.lbi-old-0123abcd"
    backup.mkdir()
    (backup / "result.json").write_text("{}")
    folder_swap.recover_folder(tmp_path / "run")
    assert (tmp_path / "run" / "result.json").read_text() == "{}"
    assert not backup.exists()


def test_an_invert_with_overwrite_beside_a_planted_backup_writes_only_into_out(
        tmp_path: Path, cli, kit: Kit) -> None:
    out, theirs, files = _planted_backup(tmp_path)
    code, _, err = cli(*_commands(kit, out)["invert"], "--overwrite")
    assert code == 0, err
    assert not out.is_symlink() and (out / "result.json").is_file()
    assert {p.name: p.read_bytes() for p in theirs.iterdir()} == files
