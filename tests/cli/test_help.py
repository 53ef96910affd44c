"""`lbi --help` and each subcommand's help; the parser's copies of engine registries."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lbi_engine.cli import _common, main
from lbi_engine.experiments import EXPERIMENTS


def _help(capsys: pytest.CaptureFixture[str], *command: str) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_lists_every_command_and_every_paper_figure(capsys) -> None:
    text = _help(capsys)
    for word in ("invert", "sweep", "reproduce", "train", "list", *EXPERIMENTS):
        assert word in text, word
    for figure in ("Fig. 1", "Fig. 2", "Fig. 3", "Fig. 4-5"):
        assert figure in text


@pytest.mark.parametrize(
    ("command", "words"),
    [
        (("invert",), ["--record", "--data", "--truth", "--allow-pickle", "result.json",
                       "curves.csv", "reconstruction.npy", "decoder.npy", "exit status"]),
        (("sweep",), ["--alphas", "--noise-stds", "results.csv", "Resumable", "log:"]),
        (("reproduce",), [*EXPERIMENTS, "--quick", "report.md"]),
        (("train",), ["--epochs", "--seed"]),
        (("list",), ["networks"]),
    ],
)
def test_subcommand_help_explains_itself(capsys, command, words) -> None:
    text = _help(capsys, *command)
    for word in words:
        assert word in text, word


def test_no_arguments_prints_help(cli) -> None:
    code, out, _ = cli()
    assert code == 0 and "reproduce" in out


def test_parser_copies_match_the_engine() -> None:
    from lbi_engine.regularisers import (
        COMBINED_REGULARISER_NAMES,
        LEARNED_REGULARISER_NAMES,
        REGULARISER_NAMES,
    )
    from lbi_engine.settings.solver import STEP_RULES
    from lbi_engine.solvers import METHODS

    assert _common.METHOD_NAMES == tuple(METHODS)
    assert _common.REGULARISER_NAMES == REGULARISER_NAMES + LEARNED_REGULARISER_NAMES + ("auto",)
    assert _common.STEP_RULES == tuple(STEP_RULES)
    assert _common.COMBINED_REGULARISER_NAMES == COMBINED_REGULARISER_NAMES


def test_help_does_not_import_torch_and_module_entry_point_works() -> None:
    code = ("import sys; from lbi_engine.cli import build_parser; build_parser(); "
            "print('torch' in sys.modules)")
    probe = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=120)
    assert probe.stdout.strip() == "False", probe.stderr
    version = subprocess.run([sys.executable, "-m", "lbi_engine.cli", "--version"],
                             capture_output=True, text=True, timeout=120)
    assert version.returncode == 0 and version.stdout.startswith("lbi ")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("1e-3,1e-2", [1e-3, 1e-2]), ("log:1e-4:1e-2:3", [1e-4, 1e-3, 1e-2]),
     ("lin:0:1:3", [0.0, 0.5, 1.0])],
)
def test_float_lists(text: str, expected: list[float]) -> None:
    assert _common.float_list(text) == pytest.approx(expected, rel=1e-12)


def test_int_lists_and_shapes() -> None:
    assert _common.int_list("0-3,7,2") == [0, 1, 2, 3, 7]
    assert _common.shape("1,28,28") == (1, 28, 28) and _common.shape("784") == (784,)
