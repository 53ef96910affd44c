"""A result written in place (the working directory inside ``--out``) removes only the
staging folders lbi itself left, never a user's folder that happens to share the prefix."""

from __future__ import annotations

import os
from pathlib import Path

from lbi_engine.results import folder_swap
from lbi_engine.results.folder_swap import STAGE_PREFIX, staged_files, staged_folder


def _plant(out: Path) -> dict[str, Path]:
    out.mkdir()
    mine = {}
    for name in ("notes", "0123abcd"):  # one with lbi's own name pattern
        folder = out / f"{STAGE_PREFIX}{name}"
        folder.mkdir()
        (folder / "precious.txt").write_text("the user's")
        mine[name] = folder
    stale = folder_swap._new_stage(out)  # what an interrupted lbi write left
    (stale / "result.json").write_text("{}")
    mine["stale"] = stale
    elsewhere = out.parent / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    os.symlink(elsewhere, out / f"{STAGE_PREFIX}fedcba98")
    return mine


def test_in_place_write_keeps_user_folders_named_like_stages(tmp_path: Path,
                                                             monkeypatch) -> None:
    out = tmp_path / "out"
    planted = _plant(out)
    monkeypatch.chdir(out)  # the folder cannot be renamed away: staged inside it
    with staged_folder(out, last="result.json") as new:
        (new / "result.json").write_text('{"ok": 1}')
    assert (out / "result.json").read_text() == '{"ok": 1}'
    for name in ("notes", "0123abcd"):
        assert (planted[name] / "precious.txt").read_text() == "the user's"
    assert not planted["stale"].exists()
    assert (tmp_path / "elsewhere" / "keep.txt").read_text() == "keep"
    assert not any(p.name == folder_swap._STAGE_MARK for p in out.iterdir())
    leftover = [p for p in out.iterdir() if p.name.startswith(STAGE_PREFIX)]
    assert sorted(p.name for p in leftover) == sorted(
        [f"{STAGE_PREFIX}notes", f"{STAGE_PREFIX}0123abcd", f"{STAGE_PREFIX}fedcba98"])


def test_staged_files_keeps_user_folders_named_like_stages(tmp_path: Path) -> None:
    out = tmp_path / "out"
    planted = _plant(out)
    with staged_files([out / "a.png"]) as where:
        where[out / "a.png"].write_bytes(b"png")
    assert (out / "a.png").read_bytes() == b"png"
    assert (planted["notes"] / "precious.txt").exists()
    assert (planted["0123abcd"] / "precious.txt").exists()
    assert not planted["stale"].exists()
