"""The "Auto α" checkbox of the regularisation panel."""

from __future__ import annotations

import pytest

from lbi_gui.params import DEFAULT_REQUEST, request_problems
from lbi_gui.widgets.regularisation_panel import RegularisationPanel


def test_auto_alpha_is_the_default_and_the_slider_switches_it_off(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    panel.set_values(DEFAULT_REQUEST)
    assert DEFAULT_REQUEST["alpha"] == "auto"
    assert panel.auto_alpha.isChecked() and panel.values()["alpha"] == "auto"
    panel.show_chosen_alpha(0.0316)  # a finished auto run shows its choice ...
    assert panel.alpha.value() == pytest.approx(0.0316)
    assert panel.values()["alpha"] == "auto"  # ... and stays auto
    with qtbot.waitSignal(panel.changed) as sig:  # the user moves the slider
        panel.alpha.slider.setValue(panel.alpha.slider.value() + 50)
    assert sig.args == ["alpha"]
    assert not panel.auto_alpha.isChecked()
    assert isinstance(panel.values()["alpha"], float)  # the next (warm) run uses it
    with qtbot.waitSignal(panel.changed) as sig:
        panel.auto_alpha.setChecked(True)
    assert sig.args == ["alpha"] and panel.values()["alpha"] == "auto"


def test_a_number_in_a_request_unchecks_auto_and_bad_strings_are_refused(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    panel.set_values({"alpha": 0.02})
    assert not panel.auto_alpha.isChecked() and panel.values()["alpha"] == pytest.approx(0.02)
    assert request_problems({**DEFAULT_REQUEST, "alpha": "auto"}) == []
    assert request_problems({**DEFAULT_REQUEST, "alpha": "fast"})
