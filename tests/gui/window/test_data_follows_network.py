"""Opening a network never strands the data, and opening data never fails against the
network on screen: every combination of {zoo network, own file} × {dataset sample, own
image, measured code} is reached from every other by one user action (plus, where data
cannot follow, the answer to one dialog). Real engine, real files written here."""

from __future__ import annotations

import json
from collections import deque
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from PySide6 import QtWidgets
from torch import nn

from lbi_gui.dialogs import messages
from tests.gui.conftest import wait_ready

ZOO = "mnist-perceptron-ae"  # 1×28×28 digits


def _own_network(folder: Path, side: int, name: str) -> str:
    """A colour ReLU perceptron taking 3×side×side as weights + card (runs no code)."""
    torch.manual_seed(0)
    n = 3 * side * side
    net = nn.Sequential(nn.Flatten(), nn.Linear(n, 16), nn.ReLU())
    path = folder / f"{name}.pt"
    torch.save(net.state_dict(), path)
    layers = [{"type": "Flatten"}, {"type": "Linear", "in_features": n, "out_features": 16},
              {"type": "ReLU"}]
    (folder / f"{name}.json").write_text(json.dumps(
        {"name": name, "format_version": 1, "input_shape": [3, side, side],
         "architecture": {"layers": layers, "encoder_layers": 3}}), encoding="utf-8")
    return str(path)


def _photo(folder: Path, side: int = 64) -> str:
    rgb = np.random.default_rng(1).integers(0, 255, (side, side, 3), dtype=np.uint8)
    path = folder / f"photo{side}.png"
    Image.fromarray(rgb, "RGB").save(path)
    return str(path)


def _choose_zoo(win, name: str) -> None:
    combo = win.network_panel.combo
    combo.setCurrentIndex(combo.findData(name))
    combo.activated.emit(combo.currentIndex())
    win.params.flush_changes()


class Answers:
    """Stands in for the choice dialog: records what was asked, answers like a user who
    wants to go on with the new network (a dataset sample if offered, else an image)."""

    def __init__(self, photo: str) -> None:
        self.asked: list[tuple[str, list[str]]] = []
        self.photo = photo

    def __call__(self, _parent, _title, text, choices):
        keys = [k for k, _ in choices]
        self.asked.append((text, keys))
        return "dataset" if "dataset" in keys else "image"


@pytest.fixture
def answers(monkeypatch, tmp_path) -> Answers:
    photo = _photo(tmp_path)
    ans = Answers(photo)
    monkeypatch.setattr(messages, "ask_choice", ans)
    monkeypatch.setattr(QtWidgets.QFileDialog, "getOpenFileName",
                        staticmethod(lambda *a, **k: (photo, "")))
    return ans


def _state(win) -> tuple[str, str]:
    req = win.view.info.request
    net = "zoo" if req["network"] == ZOO else "own"
    data = "code" if req.get("data") else "image" if req.get("image") else "dataset"
    return net, data


def _settled(win, want: tuple[str, str]) -> bool:
    return (win.view.info is not None and win.controller.state == "idle"
            and not messages.OPEN_ERRORS and _state(win) == want
            and win.params.current_request()["network"] == win.view.info.request["network"])


def test_every_network_and_data_combination_is_one_step_from_every_other(
        qtbot, make_window, tmp_path, answers) -> None:
    own = _own_network(tmp_path, 32, "mine")  # natural's 3×32×32 fits it
    win = make_window({"network": ZOO, "dataset": "mnist", "split": "val", "index": 2,
                       "max_iter": 3})

    def code_file() -> str:
        """A measured code for the network on screen (non-negative: ReLU's range)."""
        shape = tuple(win.view.info.output_shape)
        path = tmp_path / f"code_{len(shape)}_{'x'.join(map(str, shape))}.npy"
        np.save(path, np.abs(np.random.default_rng(2).normal(size=shape)).astype(np.float32))
        return str(path)

    actions = {
        ("zoo", None): lambda: _choose_zoo(win, ZOO),
        ("own", None): lambda: win.files.open_network(own),
        (None, "dataset"): lambda: win.data_panel.use_dataset.click(),
        (None, "image"): lambda: win.files.open_data_file("image", answers.photo),
        (None, "code"): lambda: win.files.open_data_file("data", code_file()),
    }

    def target(state: tuple[str, str], action: tuple) -> tuple[str, str]:
        net, data = action
        if net not in (None, state[0]) and state[1] == "code":
            return net, "dataset"  # a code of one network cannot follow another: asked
        return net or state[0], data or state[1]

    states = [(n, d) for n in ("zoo", "own") for d in ("dataset", "image", "code")]
    untested = {(s, a) for s in states for a in actions if target(s, a) != s}
    assert len(untested) == 6 * 3  # from each state: the other network, the other data
    win.params.flush_changes()
    wait_ready(qtbot, win)
    notes: list[str] = []
    win.statusBar().messageChanged.connect(notes.append)
    steps = 0
    while untested:
        here = _state(win)
        edge = next(((s, a) for s, a in sorted(untested, key=str) if s == here), None)
        if edge is None:  # walk to the nearest state with an untested change
            edge = _first_step_towards(here, {s for s, _ in untested}, actions, target)
        asked = len(answers.asked)
        action = edge[1]
        actions[action]()
        want = target(here, action)
        qtbot.waitUntil(lambda w=want: _settled(win, w), timeout=60000)
        steps += 1
        untested.discard(edge)
        req, info = win.params.current_request(), win.view.info
        # what is shown is what was prepared, and the network's input took the data
        assert req["dataset"] == info.request["dataset"] and req["resize"] == info.request[
            "resize"], (here, action)
        if want[1] != "code":
            assert tuple(np.asarray(info.truth).shape[-2:]) == (
                (28, 28) if want[0] == "zoo" else (32, 32)), (here, action)
        if want[1] == "image":
            assert req["resize"] is True  # a 64×64 photo for 28×28 / 32×32 networks
        if here[1] == "code" and action[0] not in (None, here[0]):
            text, keys = answers.asked[-1]
            assert len(answers.asked) == asked + 1 and "shape" in text
            assert keys == ["image", "dataset", "keep"]
    assert steps < 40
    assert any("switched the data to natural" in n for n in notes), notes
    assert any("resized to 28×28" in n for n in notes), notes


def _first_step_towards(here, goals, actions, target):
    """The first (state, action) of a shortest walk from ``here`` to one of ``goals``."""
    queue, seen = deque([(here, None)]), {here}
    while queue:
        state, first = queue.popleft()
        if state in goals and first is not None:
            return first
        for action in actions:
            nxt = target(state, action)
            if nxt not in seen:
                seen.add(nxt)
                queue.append((nxt, first or (state, action)))
    raise AssertionError(f"no way from {here} to {goals}")


def test_an_own_colour_network_no_dataset_fits_asks_for_an_image(
        qtbot, make_window, tmp_path, answers) -> None:
    """natural-cnn-ae (3×32×32) on screen; a 64×64 colour network opened: no bundled set
    fits it, so the window asks, and the photo chosen is inverted by the new network."""
    own = _own_network(tmp_path, 64, "big")
    win = make_window({"network": "natural-cnn-ae", "dataset": "natural", "split": "val",
                       "max_iter": 3})
    win.files.open_network(own)
    qtbot.waitUntil(lambda: _settled(win, ("own", "image")), timeout=60000)
    text, keys = answers.asked[-1]
    assert "no bundled dataset has the 3×64×64 inputs big.pt takes" in text
    assert keys == ["image", "keep"]
    assert win.view.info.request["network"] == own and win.view.info.truth.shape[-2:] == (64, 64)
    assert win.data_panel.values()["image"] == answers.photo


def test_an_image_opened_before_its_network_is_kept_for_it(qtbot, make_window, tmp_path,
                                                          answers) -> None:
    """A 64×64 photo opened while a 32×32 network is on screen is resized (said once), and
    the 64×64 network opened next inverts it at its own size; Use dataset sample on a zoo
    network then brings a dataset that fits that network."""
    own = _own_network(tmp_path, 64, "big")
    win = make_window({"network": "natural-cnn-ae", "dataset": "natural", "max_iter": 3})
    notes: list[str] = []
    win.statusBar().messageChanged.connect(notes.append)
    win.files.open_data_file("image", answers.photo)
    qtbot.waitUntil(lambda: _settled(win, ("own", "image")), timeout=60000)
    assert win.view.info.truth.shape[-2:] == (32, 32)
    assert any("photo64.png is 64×64: resized to 32×32" in n for n in notes), notes
    win.files.open_network(own)
    qtbot.waitUntil(lambda: _settled(win, ("own", "image")), timeout=60000)
    assert win.view.info.truth.shape[-2:] == (64, 64) and not answers.asked
    _choose_zoo(win, ZOO)
    qtbot.waitUntil(lambda: _settled(win, ("zoo", "image")), timeout=60000)
    win.data_panel.use_dataset.click()
    qtbot.waitUntil(lambda: _settled(win, ("zoo", "dataset")), timeout=60000)
    assert win.view.info.request["dataset"] == "mnist" and win.data_panel.dataset.isEnabled()


def test_a_one_pixel_image_is_refused_and_dialogs_start_in_the_last_folder(
        qtbot, make_window, tmp_path) -> None:
    from lbi_gui.settings import last_dir

    win = make_window({"network": ZOO, "dataset": "mnist", "max_iter": 3})
    dot = tmp_path / "dot.png"
    Image.fromarray(np.zeros((1, 1, 3), dtype=np.uint8), "RGB").save(dot)
    errors = len(messages.OPEN_ERRORS)
    win.files.open_data_file("image", str(dot))
    assert len(messages.OPEN_ERRORS) == errors + 1
    box = messages.OPEN_ERRORS[-1]
    assert "dot.png is 1×1 pixels: no picture to invert" in box.informativeText()
    box.close()
    assert win.params.current_request()["image"] is None  # the dataset sample stays
    own = _own_network(tmp_path, 32, "mine")
    win.files.open_network(own)
    assert last_dir("data") == str(tmp_path)  # an image dialog opens beside the network
