"""The parameter panels' inputs: the log slider and scientific spin box of the number
fields, α from c·δ and per-layer α in the regularisation panel, the joint/layer-wise switch."""

from __future__ import annotations

import pytest

from lbi_gui.widgets.number_inputs import LogSlider, ScientificSpinBox
from lbi_gui.widgets.regularisation_panel import RegularisationPanel
from lbi_gui.widgets.solver_panel import SolverPanel


def test_log_slider_maps_decades_and_never_echoes(qtbot) -> None:
    w = LogSlider(1e-6, 10.0, 9e-3)
    qtbot.addWidget(w)
    seen: list[float] = []
    w.valueChanged.connect(seen.append)
    w.setValue(1e-3)  # programmatic: no signal
    assert seen == []
    # 1e-3 is 3 of 7 decades above 1e-6
    assert w.slider.value() == round(3 / 7 * LogSlider.STEPS)
    w.slider.setValue(LogSlider.STEPS)
    assert seen[-1] == pytest.approx(10.0)
    w.slider.setValue(0)
    assert seen[-1] == pytest.approx(1e-6)
    w.spin.setValue(0.02)
    assert seen[-1] == pytest.approx(0.02)
    assert w.spin.text() == "0.02"


def test_scientific_spin_box_shows_small_numbers_and_steps_by_factor(qtbot) -> None:
    box = ScientificSpinBox(1e-9, 1.0, 1e-5)
    qtbot.addWidget(box)
    assert box.text() == "1e-05"
    box.stepBy(10)  # ten steps of 10**0.1 = one decade
    assert box.value() == pytest.approx(1e-4, rel=1e-9)
    assert box.valueFromText("3.5e-7") == pytest.approx(3.5e-7)


def test_alpha_from_delta_uses_c_times_delta(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    assert not panel.from_delta.isEnabled()  # no δ known yet
    panel.set_delta(0.25)
    panel.c_factor.setValue(0.04)
    with qtbot.waitSignal(panel.changed) as sig:
        panel.from_delta.click()
    assert sig.args == ["alpha"]
    assert panel.values()["alpha"] == pytest.approx(0.01)


def test_per_layer_alphas_only_for_layerwise(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    panel.set_layer_count(3)
    panel.set_method("joint")
    assert not panel.per_layer.isEnabled()
    panel.set_method("layerwise")
    panel.per_layer.setChecked(True)
    panel.layer_table.item(1, 0).setText("0.5")
    assert panel.values()["layer_alphas"] == pytest.approx([9e-3, 0.5, 9e-3])
    panel.per_layer.setChecked(False)
    assert panel.values()["layer_alphas"] is None


def test_joint_layerwise_switch_is_one_click(qtbot) -> None:
    panel = SolverPanel()
    qtbot.addWidget(panel)
    panel.set_values({"method": "joint"})
    with qtbot.waitSignal(panel.changed):
        panel.switch.click()
    assert panel.values()["method"] == "layerwise"
    assert "Joint" in panel.switch.text()
    panel.switch.click()
    assert panel.values()["method"] == "joint"
