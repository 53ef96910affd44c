"""Shared fixtures: run the `lbi` command in-process (no 3 s torch import per call)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from lbi_engine.cli import main


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """cli("invert", "--network", ...) -> (exit code, stdout, stderr)."""

    def run(*args: object) -> tuple[int, str, str]:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run
