"""Hostile session files: never grant consent, never inflate a bomb, never half-apply.

``load_session`` is the whole gate (the window applies only what it returns), so these run
without a window; one test checks the window side of the consent rule.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lbi_engine.errors import LbiError
from lbi_engine.results.run_metrics import RunMetrics
from lbi_gui.model.session import load_session
from tests.reliability import hostile_files as hf

BAD_SESSIONS = [
    ("not-a-zip", lambda f: hf.write(f, "a.lbisession", b"just text"), ("zip",)),
    ("newer-version", lambda f: hf.session(f, "n.lbisession", {"format_version": 99}),
     ("newer", "update")),
    ("alpha-string", lambda f: hf.session(f, "a.lbisession", {"request": {"alpha": "big"}}),
     ("alpha",)),
    ("npz-bomb", lambda f: hf.session(f, "b.lbisession", raw_npz=hf.npz_bomb(300)),
     ("memory", "256.0 MiB")),
    ("levels-inverted", lambda f: hf.session(f, "l.lbisession", {"gui": {"levels": [1, 0]}}),
     ("levels",)),
    ("alpha-c-nan", lambda f: hf.session(f, "c.lbisession", {"gui": {"alpha_c": "nan"}}),
     ("alpha_c",)),
    ("gui-not-object", lambda f: hf.session(f, "g.lbisession", {"gui": [1, 2]}), ("gui",)),
    ("shown-text", lambda f: hf.session(
        f, "s.lbisession", {"current": {"has_curves": False, "has_shown": True}},
        {"current__shown": np.array(["a", "b"])}), ("shown",)),
    ("request-not-object", lambda f: hf.session(f, "r.lbisession", {"request": "all"}),
     ("request",)),
    ("deep-json", lambda f: _raw_session(f, "[" * 100000 + "]" * 100000), ("session.json",)),
]


def _raw_session(folder: Path, text: str) -> Path:
    import zipfile

    path = folder / "deep.lbisession"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("session.json", text)
        zf.writestr("arrays.npz", b"")
    return path


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("make", "words"), [(m, w) for _, m, w in BAD_SESSIONS],
                         ids=[i for i, _, _ in BAD_SESSIONS])
def test_bad_session_is_refused_whole(make, words, tmp_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "256M")
    path = make(tmp_path)
    with pytest.raises(LbiError) as info:
        load_session(path)
    message = str(info.value)
    assert "Traceback" not in message and str(path.name) in message
    for word in words:
        assert word.lower() in message.lower(), (word, message)


@pytest.mark.parametrize("field", ["allow_pickle", "allow_code"])
def test_session_cannot_grant_consent(field: str, tmp_path: Path) -> None:
    net = hf.evil_pickle(tmp_path, "evil.pt")
    path = hf.session(tmp_path, "c.lbisession", {"request": {
        "network": str(net), field: True}})
    state = load_session(path)
    assert state.request["allow_pickle"] is False and "allow_code" not in state.request
    assert len(state.warnings) == 1
    assert "cannot give that consent" in state.warnings[0] and "dialog" in state.warnings[0]
    assert (tmp_path / hf.SENTINEL).read_text() == hf.UNTOUCHED


def test_runs_in_a_session_cannot_carry_consent(tmp_path: Path) -> None:
    """A run's parameters can be loaded back into the panels: its consent is dropped too."""
    from lbi_gui.model.runs import CurveStore, RunResult
    from lbi_gui.model.session import SessionState, save_session
    from lbi_gui.params import DEFAULT_REQUEST

    req = {**DEFAULT_REQUEST, "allow_pickle": True}
    curves = CurveStore()
    curves.extend([{"iteration": 1, "objective": 1.0, "reg_term": 0.5, "discrepancy": 0.1,
                    "primal_residual": 0.1, "dual_residual": 0.1, "psnr": 10.0, "ssim": 0.5,
                    "elapsed": 0.1, "bregman": [0.5]}])
    run = RunResult(run_id=1, request=req, stop_reason="max_iterations", iterations=1,
                    elapsed=0.1, metrics=RunMetrics(),
                    x_raw=np.zeros((1, 28, 28), np.float32),
                    x_display=np.zeros((28, 28), np.float32), curves=curves,
                    segments=[(0, dict(req))])
    path = save_session(tmp_path / "r.lbisession",
                        SessionState(request=dict(DEFAULT_REQUEST), runs=[run]))
    state = load_session(path)
    assert state.runs[0].request["allow_pickle"] is False
    assert state.runs[0].segments[0][1]["allow_pickle"] is False


def test_window_opens_a_consent_granting_session_without_loading_the_model(
        qtbot, window, dialogs, kit, tmp_path: Path) -> None:
    """The network is asked about (dialog, answered No), never loaded; the warning shows."""
    net = hf.evil_pickle(tmp_path, "evil.pt")
    path = hf.session(tmp_path, "c.lbisession", {"request": {
        **kit.base_request(), "network": str(net), "allow_pickle": True,
        "input_shape": [1, 28, 28]}})
    win = window(kit.base_request(max_iter=10))
    assert win.files.open_session(str(path))
    qtbot.waitUntil(lambda: any(d["kind"] == "question" for d in dialogs), timeout=60000)
    assert "run code" in next(d for d in dialogs if d["kind"] == "question")["text"].lower()
    assert (tmp_path / hf.SENTINEL).read_text() == hf.UNTOUCHED
    assert not win.params.current_request()["allow_pickle"]


# ---- memory bounded for real: a subprocess under RLIMIT_AS -------------------------------
_BOUNDED = r"""
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (5 * 2**30, 5 * 2**30))
from lbi_engine.cli import main
codes = [main(a.split("|")) for a in sys.argv[1:]]
print(codes)
"""


@pytest.mark.timeout(300)
def test_memory_hostile_inputs_are_refused_under_an_address_space_limit(kit,
                                                                       tmp_path: Path) -> None:
    """Under a 5 GiB RLIMIT_AS (the default limit follows it), inputs that would need tens
    of gigabytes end with exit 2 and one line, not a MemoryError or an abort."""
    f = tmp_path
    runs = [
        ["invert", "--network", str(hf.card(f, "pad", hf.conv(padding=30000))), "--sample", "0"],
        ["invert", "--network", str(hf.card(f, "stack", [
            {"type": "Linear", "in_features": 12000, "out_features": 12000},
            {"type": "ReLU"}] * 40, input_shape=(12000,))), "--sample", "0"],
        ["invert", "--network", str(kit.card), "--image", str(hf.png(f, "big.png",
                                                                      (8000, 8000)))],
        ["invert", "--network", str(hf.zip_bomb_state(f, 600)), "--sample", "0"],
    ]
    argv = ["|".join([*r, "--out", str(f / f"out{i}"), "--quiet"]) for i, r in enumerate(runs)]
    proc = subprocess.run([sys.executable, "-c", _BOUNDED, *argv], capture_output=True,
                          text=True, timeout=280, cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "[2, 2, 2, 2]", proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and "MemoryError" not in proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("lbi invert: error:")]
    assert len(lines) == 4, proc.stderr
