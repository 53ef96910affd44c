"""The per-layer α table starts from α for another network: no value typed for the
network before is kept (they are offered pre-filled, and run by the layer-wise method)."""

from __future__ import annotations

from PySide6 import QtWidgets

from lbi_gui.widgets.regularisation_panel import RegularisationPanel


def _cells(panel: RegularisationPanel) -> list[str]:
    table = panel.layer_table
    return [table.item(r, 0).text() for r in range(table.rowCount())]


def test_another_network_refills_the_per_layer_alphas(qtbot) -> None:
    panel = RegularisationPanel()
    qtbot.addWidget(panel)
    panel.set_layer_count(2)
    alpha = _cells(panel)[0]
    panel.layer_table.setItem(0, 0, QtWidgets.QTableWidgetItem("0.5"))  # typed by the user
    panel.set_layer_count(2)  # the same network prepared again: kept
    assert _cells(panel) == ["0.5", alpha]
    panel.set_layer_count(2, fresh=True)  # another network with as many layers
    assert _cells(panel) == [alpha, alpha]
