"""A feature prior chosen in the solver panel for layer-wise inversion of the user's own network:
the file dialog, the checks made from the files alone, the prior forgotten with its network,
Run all, sessions, and a real layer-wise run (and a prior that does not fit) in the window."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PySide6 import QtWidgets

from lbi_gui.dialogs import messages
from lbi_gui.params import FIT_PRIOR_HINT, METHOD_LABELS
from lbi_gui.widgets.solver_panel import PRIOR_NEEDED, SolverPanel
from tests.gui.conftest import wait_idle, wait_ready


def _prior_files(base: Path, *, tensors: bool = True, kind: str = "lbi-feature-prior") -> Path:
    """The two files of a prior as the GUI sees them (their contents are the engine's to
    check: the GUI reads only the card's kind)."""
    base.with_name(base.name + ".json").write_text(json.dumps({"kind": kind,
                                                               "format_version": 1}))
    if tensors:
        base.with_name(base.name + ".safetensors").write_bytes(b"\0" * 8)
    return base


def _pick(monkeypatch: pytest.MonkeyPatch, path: Path) -> list[str]:
    """The file dialog answers ``path``; returns the filters it was opened with."""
    filters: list[str] = []

    def answer(_parent, _title, _folder, filt, *a, **k):
        filters.append(filt)
        return str(path), filt

    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName", answer)
    return filters


def _errors_after(n_before: int) -> list[str]:
    return [box.informativeText() for box in messages.OPEN_ERRORS[n_before:]]


def _close_errors() -> None:
    for box in list(messages.OPEN_ERRORS):
        box.done(0)


def test_choosing_a_feature_prior_sets_the_request(qtbot, fake_engine, make_window,
                                                   monkeypatch, tmp_path) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "method": "layerwise"})
    panel = win.solver_panel
    assert win.params.current_request()["feature_prior"] is None
    assert panel.prior_label.text() == "none"
    assert panel.prior_hint.isVisibleTo(panel) and panel.prior_hint.text() == PRIOR_NEEDED
    base = _prior_files(tmp_path / "mine.prior")
    filters = _pick(monkeypatch, base.with_name("mine.prior.safetensors"))
    with qtbot.waitSignal(panel.changed) as sig:
        panel.prior_button.click()
    assert sig.args == ["feature_prior"]
    assert "*.json *.safetensors" in filters[0]
    assert win.params.current_request()["feature_prior"] == str(base)  # the BASE, no suffix
    assert panel.prior_label.text() == "mine.prior"
    assert not panel.prior_hint.isVisibleTo(panel)
    wait_ready(qtbot, win)  # the problem was prepared again with the prior (the engine checks)
    assert win.view.info.request["feature_prior"] == str(base)
    panel.prior_clear.click()  # clearing it: none chosen again, layer-wise says what it needs
    assert win.params.current_request()["feature_prior"] is None
    assert panel.prior_label.text() == "none" and panel.prior_hint.isVisibleTo(panel)


@pytest.mark.parametrize("broken", ["no tensors", "input prior"])
def test_a_prior_that_is_not_one_is_refused_and_the_field_kept(qtbot, fake_engine, make_window,
                                                               monkeypatch, tmp_path,
                                                               broken) -> None:
    fake_engine()
    win = make_window({"network": "fake-net"})
    good = _prior_files(tmp_path / "good.prior")
    assert win.files.choose_feature_prior(str(good) + ".json")
    bad = (_prior_files(tmp_path / "bad.prior", tensors=False) if broken == "no tensors"
           else _prior_files(tmp_path / "bad.prior", kind="lbi-input-prior"))
    _pick(monkeypatch, bad.with_name("bad.prior.json"))
    n = len(messages.OPEN_ERRORS)
    win.solver_panel.prior_button.click()
    texts = _errors_after(n)
    assert len(texts) == 1, texts
    if broken == "no tensors":
        assert "bad.prior.safetensors does not exist" in texts[0]
    else:
        assert "is not a feature prior card" in texts[0] and "lbi-input-prior" in texts[0]
    assert FIT_PRIOR_HINT in texts[0]
    assert win.params.current_request()["feature_prior"] == str(good)  # unchanged
    assert win.solver_panel.prior_label.text() == "good.prior"
    _close_errors()


def test_changing_the_network_clears_the_chosen_prior(qtbot, fake_engine, make_window,
                                                      tmp_path) -> None:
    fake_engine()
    win = make_window({"network": "fake-net"})
    base = _prior_files(tmp_path / "mine.prior")
    assert win.files.choose_feature_prior(str(base))
    wait_ready(qtbot, win)
    assert win.params.current_request()["feature_prior"] == str(base)
    other = tmp_path / "other.onnx"
    other.write_bytes(b"fake")
    win.files.open_network(str(other))  # as Open… does
    assert win.params.current_request()["feature_prior"] is None  # a prior is for one network
    assert win.solver_panel.prior_label.text() == "none"
    wait_ready(qtbot, win)
    assert win.view.info.request["network"] == str(other)
    assert win.view.info.request["feature_prior"] is None


def test_run_all_includes_layerwise_once_a_prior_is_chosen(qtbot, fake_engine, make_window,
                                                           monkeypatch, tmp_path) -> None:
    fake_engine()
    win = make_window({"network": "fake-net"})
    assert len(win.view.info.layers) == 2
    asked: list[list[str]] = []
    monkeypatch.setattr(win.controller, "run_all", lambda req, methods: asked.append(methods))
    win.runner.run_all_methods()
    assert "layerwise" not in asked[-1] and "joint" in asked[-1]
    assert win.files.choose_feature_prior(str(_prior_files(tmp_path / "mine.prior")))
    wait_ready(qtbot, win)
    win.runner.run_all_methods()
    assert "layerwise" in asked[-1] and "joint" in asked[-1]


def test_panel_says_shipped_and_needs_no_prior_for_one_layer(qtbot) -> None:
    panel = SolverPanel()
    qtbot.addWidget(panel)
    panel.set_values({"method": "layerwise"})
    panel.set_layer_count(3)
    panel.set_network("mnist-cnn-ae")  # the zoo ships its prior beside the weights
    assert panel.prior_label.text() == "shipped"
    assert not panel.prior_hint.isVisibleTo(panel)
    panel.set_network("/somewhere/mnist-cnn-ae")  # a file of the user's: nothing is shipped
    assert panel.prior_label.text() == "none" and panel.prior_hint.isVisibleTo(panel)
    panel.set_values({"method": "joint"})
    assert not panel.prior_hint.isVisibleTo(panel)  # joint needs no prior
    panel.set_layer_count(1)
    assert not panel.prior_button.isEnabled()


def test_a_session_keeps_the_chosen_prior(qtbot, fake_engine, make_window, tmp_path) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "method": "layerwise", "max_iter": 5})
    base = _prior_files(tmp_path / "mine.prior")
    assert win.files.choose_feature_prior(str(base))
    wait_ready(qtbot, win)
    win.runner.run()
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 1, timeout=20000)
    wait_idle(qtbot, win)
    assert win.run_table.runs[0].request["feature_prior"] == str(base)  # the run record's
    path = tmp_path / "s.lbisession"
    assert win.files.save_session_to(str(path))
    fresh = make_window({"network": "fake-net"})
    assert fresh.files.open_session(str(path))
    wait_ready(qtbot, fresh)
    assert fresh.params.current_request()["feature_prior"] == str(base)
    assert fresh.solver_panel.prior_label.text() == "mine.prior"
    assert fresh.run_table.runs[0].request["feature_prior"] == str(base)


# ---- the real engine ---------------------------------------------------------------------------
def _own_network(path: Path, width: int) -> Path:
    """A small residual network of the user's, exported to ONNX (28x28 inputs)."""
    import contextlib
    import io
    import warnings

    import torch
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.stem = nn.Conv2d(1, width, 3, padding=1)
            self.a = nn.Conv2d(width, width, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            x = torch.relu(self.stem(x))
            return torch.relu(self.a(x) + x)

    torch.manual_seed(0)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(Net().eval(), (torch.randn(1, 1, 28, 28),), str(path))
    return path


def _fit_prior(network: Path, base: Path) -> Path:
    """What ``lbi feature-prior NET --samples clean.npy --out BASE`` does, by its API."""
    import torch

    from lbi_engine.data import mnist_split
    from lbi_engine.models.network import LiftedNetwork
    from lbi_engine.priors import feature as fp

    images, _ = mnist_split("train")
    priors = fp.fit_feature_priors(LiftedNetwork.from_onnx(network),
                                   torch.from_numpy(images[:100]), rank=4)
    fp.save_feature_priors(priors, base)
    return base


def test_window_runs_layerwise_on_an_own_network_with_a_chosen_prior(qtbot, make_window,
                                                                     monkeypatch, tmp_path):
    """The real engine: a prior fitted for another network is refused by the engine with its
    own message (a dialog, the field put back), the right one runs layer-wise to the end; a
    prior that does not fit, reaching a run another way (a session), fails that run with the
    usual run-error dialog."""
    pytest.importorskip("onnx")
    import numpy as np

    net = _own_network(tmp_path / "mine.onnx", width=2)
    wrong = _fit_prior(_own_network(tmp_path / "other.onnx", width=3), tmp_path / "other.prior")
    right = _fit_prior(net, tmp_path / "mine.prior")
    win = make_window({"network": str(net), "dataset": "mnist", "max_iter": 5}, wait=False)
    wait_ready(qtbot, win, timeout=120_000)
    assert win.view.info.request["network"] == str(net)
    win.params.set_request({**win.params.current_request(), "method": "layerwise",
                            "noise_std": 0.05, "max_iter": 40})
    assert win.solver_panel.prior_hint.isVisibleTo(win.solver_panel)

    n = len(messages.OPEN_ERRORS)
    _pick(monkeypatch, wrong.with_name("other.prior.json"))
    win.solver_panel.prior_button.click()
    qtbot.waitUntil(lambda: len(messages.OPEN_ERRORS) > n, timeout=60_000)
    text = _errors_after(n)[0]
    assert "feature prior has variables of sizes" in text, text
    wait_ready(qtbot, win)
    assert win.params.current_request()["feature_prior"] is None  # refused: put back
    _close_errors()

    _pick(monkeypatch, right.with_name("mine.prior.safetensors"))
    win.solver_panel.prior_button.click()
    wait_ready(qtbot, win)
    assert win.view.info.request["feature_prior"] == str(right)
    assert not win.solver_panel.prior_hint.isVisibleTo(win.solver_panel)
    win.runner.run()
    qtbot.waitUntil(lambda: not win.controller.running and len(win.run_table.runs) == 1,
                    timeout=120_000)
    run = win.run_table.runs[-1]
    assert run.request["method"] == "layerwise"
    assert run.request["feature_prior"] == str(right)
    assert np.isfinite(run.metrics.psnr) and run.metrics.stages

    n = len(messages.OPEN_ERRORS)
    win.params.set_request({**win.params.current_request(), "feature_prior": str(wrong)})
    win.runner.run()
    qtbot.waitUntil(lambda: len(messages.OPEN_ERRORS) > n, timeout=60_000)
    wait_idle(qtbot, win)
    box = messages.OPEN_ERRORS[n]
    assert box.windowTitle() == "The run failed"
    assert "feature prior has variables of sizes" in box.informativeText()
    assert len(win.run_table.runs) == 1
    _close_errors()


def test_lbi_gui_option_feature_prior(qtbot, fake_engine, make_window, tmp_path,
                                      monkeypatch) -> None:
    """`lbi-gui --feature-prior P.json` starts the window with the prior chosen (its BASE,
    an absolute path), as `lbi invert --feature-prior` takes it."""
    from lbi_gui.app import build_parser, request_from_args

    fake_engine()
    base = _prior_files(tmp_path / "mine.prior")
    monkeypatch.chdir(tmp_path)
    request = request_from_args(build_parser().parse_args(
        ["--network", "fake-net", "--method", "layerwise", "--feature-prior", "mine.prior.json"]))
    assert request["feature_prior"] == str(base)
    win = make_window(request)
    assert win.params.current_request()["feature_prior"] == str(base)
    assert win.solver_panel.prior_label.text() == "mine.prior"
    assert not win.solver_panel.prior_hint.isVisibleTo(win.solver_panel)


def test_another_prior_makes_a_layerwise_result_stale(qtbot, fake_engine, make_window,
                                                      tmp_path) -> None:
    fake_engine()
    win = make_window({"network": "fake-net", "method": "joint", "max_iter": 5})
    win.runner.run()
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 1, timeout=20000)
    wait_idle(qtbot, win)
    assert win.files.choose_feature_prior(str(_prior_files(tmp_path / "a.prior")))
    wait_ready(qtbot, win)
    assert not win.status.reason.text().startswith("stale")  # joint reads no prior
    win.params.set_request({**win.params.current_request(), "method": "layerwise"})
    win.params.flush_changes()
    win.runner.run()
    qtbot.waitUntil(lambda: len(win.run_table.runs) == 2, timeout=20000)
    wait_idle(qtbot, win)
    assert not win.status.reason.text().startswith("stale")
    assert win.files.choose_feature_prior(str(_prior_files(tmp_path / "b.prior")) + ".json")
    wait_ready(qtbot, win)
    assert win.status.reason.text() == "stale: feature prior a.prior→b.prior"


def test_run_all_leaves_out_layerwise_without_a_feature_prior(qtbot, fake_engine, make_window,
                                                              monkeypatch) -> None:
    fake_engine()
    win = make_window({"network": "fake-net"})
    asked: list[list[str]] = []
    monkeypatch.setattr(win.controller, "run_all", lambda req, methods: asked.append(methods))
    win.runner.run_all_methods()
    assert asked and "joint" in asked[0]
    if win.view.info is not None and len(win.view.info.layers) > 1:  # fake-net has no prior file
        assert "layerwise" not in asked[0]
    assert "prior" in METHOD_LABELS["layerwise"]


def test_feature_prior_availability_is_read_from_files(tmp_path) -> None:
    from lbi_gui.params import feature_prior_available

    assert feature_prior_available("mnist-cnn-ae", None)  # shipped beside the weights
    assert not feature_prior_available("mnist-perceptron-ae", None)
    base = tmp_path / "mine.prior"
    assert not feature_prior_available("x", str(base))
    (tmp_path / "mine.prior.json").write_text("{}")
    assert not feature_prior_available("x", str(base) + ".json")  # tensors missing
    (tmp_path / "mine.prior.safetensors").write_bytes(b"")
    assert feature_prior_available("x", str(base))
