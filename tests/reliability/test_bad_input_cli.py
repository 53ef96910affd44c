"""The bad-input corpus through `lbi invert`: exit code 2, one line on stderr, no traceback."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.reliability import corpus
from tests.reliability.kit import Kit

CLI_CASES = [c for c in corpus.CASES if c.cli]


@pytest.mark.parametrize("case", CLI_CASES, ids=[c.id for c in CLI_CASES])
def test_cli_exits_2_with_one_clear_line(case: corpus.Case, kit: Kit, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch, cli) -> None:
    request = corpus.build(case, tmp_path / "in", kit, monkeypatch)
    out = tmp_path / "out"
    code, stdout, stderr = cli(*corpus.to_argv(request, out))
    assert "Traceback" not in stderr and "Traceback" not in stdout
    assert not (tmp_path / "in" / corpus.MARKER).exists(), "a pickle ran code without opt-in"
    if case.error is None:
        assert code == 0, stderr
        assert (out / "result.json").is_file() and (out / "reconstruction.npy").is_file()
        for word in case.warns:
            assert word.lower() in stderr.lower() and "warning" in stderr, stderr
        return
    assert code == 2, (code, stderr)
    # the consent warning of --allow-code (cases that carry the person's consent) is expected
    lines = [ln for ln in stderr.strip().splitlines()
             if not ln.startswith("lbi: warning: --allow-code")]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("lbi invert: error: "), lines[0]
    assert not corpus.message_ok(lines[0], case.words), (lines[0], case.words)
    assert not out.exists() or not any(out.iterdir()), "a failed run left files behind"


def test_cli_still_works_after_the_corpus(kit: Kit, tmp_path: Path, cli) -> None:
    """Runs after the parametrised corpus in the same process: a good run succeeds."""
    code, stdout, stderr = cli(*corpus.to_argv(kit.base_request(), tmp_path / "good"))
    assert code == 0, stderr
    assert (tmp_path / "good" / "result.json").is_file()


def test_cli_reads_and_writes_non_utf8_paths(kit: Kit, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A network and an output folder whose names are not UTF-8 (bytes on Linux)."""
    from lbi_engine.cli import main

    folder = os.fsencode(str(tmp_path))
    net = os.fsdecode(folder + b"/r\xe9seau.onnx")
    Path(net).write_bytes(kit.onnx.read_bytes())
    out = os.fsdecode(folder + b"/sortie_\xff")
    request = kit.base_request(network=net, input_shape=(1, 28, 28), max_iter=3)
    argv = corpus.to_argv(request, Path(out))
    argv.remove("--quiet")
    # what CPython gives a real process on Linux (pytest's capture is stricter): bytes that
    # are not UTF-8 go back out as the same bytes
    stdout = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="surrogateescape")
    stderr = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    monkeypatch.setattr(sys, "stdout", stdout)
    monkeypatch.setattr(sys, "stderr", stderr)
    code = main(argv)
    stdout.flush()
    stderr.flush()
    printed, errors = stdout.buffer.getvalue(), stderr.buffer.getvalue()
    monkeypatch.undo()
    assert code == 0, errors
    assert (Path(out) / "result.json").is_file()
    assert b"r\xe9seau.onnx" in printed and b"iterations" in printed
    assert b"warning" not in errors, errors  # e.g. no torch deprecation notice for users


def _lbi(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "lbi_engine.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_real_process_refuses_a_pickle_that_runs_code(kit: Kit, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside pytest's capture: a fresh `lbi` process, exit 2, one line, no side effect."""
    request = corpus.build(corpus.BY_ID["pickle-runs-code-zip"], tmp_path, kit, monkeypatch)
    proc = _lbi(*corpus.to_argv(request, tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "--allow-code" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / corpus.MARKER).exists()


def test_allow_pickle_loads_a_trusted_whole_module_with_a_warning(kit: Kit, tmp_path: Path,
                                                                  monkeypatch, cli) -> None:
    request = corpus.build(corpus.BY_ID["pickled-whole-module"], tmp_path, kit, monkeypatch)
    argv = [*corpus.to_argv(request, tmp_path / "out"), "--allow-pickle", "--input-shape",
            "1,28,28"]
    code, _, err = cli(*argv)
    assert code == 0, err
    assert "--allow-code" in err and "running code" in err  # the one warning, on stderr
    assert (tmp_path / "out" / "result.json").is_file()
