"""Names that come from files or the command line reach the terminal escaped.

An ESC sequence that retitles the terminal, a BEL and a right-to-left override in a model
file's name and in ``--out`` are printed as ``\\x1b``, ``\\x07``, ``\\u202e`` by the one
printer of such names (``cli._common.shown``), on stdout as on stderr.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from lbi_engine.cli._common import shown
from tests.reliability.kit import Kit

HOSTILE = "m\x1b]0;owned\x07\u202eexe."


def _raw_controls(text: str) -> list[str]:
    return [ch for ch in text if ch in "\x1b\x07\u202e\u2066\x9b"]


def test_shown_escapes_controls_and_bidi_and_keeps_the_rest() -> None:
    assert shown("a b/ü.onnx") == "a b/ü.onnx"
    assert shown(HOSTILE) == "m\\x1b]0;owned\\x07\\u202eexe."
    assert shown(Path("/tmp") / "x\x9by") == "/tmp/x\\x9by"


@pytest.mark.parametrize("command", ["convert", "invert"])
def test_hostile_names_are_escaped_on_stdout(tmp_path: Path, cli, kit: Kit,
                                             command: str) -> None:
    model = tmp_path / f"{HOSTILE}onnx"
    shutil.copy(kit.onnx, model)
    out = tmp_path / f"out{HOSTILE}"
    argv = (["convert", model, "--out", out] if command == "convert" else
            ["invert", "--network", model, "--sample", "0", "--max-iter", "2", "--threads", "1",
             "--out", out])
    code, stdout, err = cli(*argv)
    assert code == 0, err
    assert "\\x1b]0;owned\\x07\\u202e" in stdout
    assert _raw_controls(stdout) == [] and _raw_controls(err) == []
