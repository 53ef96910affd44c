"""Regularisation panel: R, Auto α, α (log slider), the a-priori rule α = C·δ, per-layer α.

"Auto α" (on by default) sends ``alpha="auto"``: the engine chooses α by a few warm-started
solves (lbi_engine/solvers/alpha/) and the slider then shows the chosen value. Moving the slider
(or "α = C·δ") switches Auto off, so the next run, or the warm restart of a running one,
uses the user's α.
"""

from __future__ import annotations

from typing import Any

from PySide6 import QtCore, QtWidgets

from lbi_gui.params import REGULARISERS
from lbi_gui.widgets.number_inputs import LogSlider, ScientificSpinBox
from lbi_gui.widgets.panel import ParamPanel, form, set_combo_data


class RegularisationPanel(ParamPanel):
    """Edits ``regulariser``, ``alpha`` and ``layer_alphas``."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.regulariser = QtWidgets.QComboBox()
        for name, label in REGULARISERS:
            self.regulariser.addItem(label, name)
        self.auto_alpha = QtWidgets.QCheckBox("Auto α")
        self.auto_alpha.setChecked(True)
        self.auto_alpha.setToolTip("Choose α from the data by a few warm-started solves: "
                                   "discrepancy principle when the noise level is known, "
                                   "else quasi-optimality. Moving the slider switches this "
                                   "off.")
        # The slider spans the useful decades; any α the engine accepts may be typed,
        # 0 included (no regularisation: Landweber only; other methods refuse it at Run).
        self.alpha = LogSlider(1e-8, 1e3, 9e-3, spin_lo=0.0, spin_hi=1e6)
        self.alpha.setToolTip("Regularisation weight α: larger = smoother, less data fit "
                              "(moving it switches Auto α off). Slider 1e-8 … 1e3; type any "
                              "value in 0 … 1e6")
        self.c_factor = ScientificSpinBox(1e-4, 1e4, 0.1)
        self.c_factor.setToolTip("C of the a-priori parameter choice α = C·δ (paper §8: the "
                                 "rate O(δ) holds for α proportional to δ; tune C once)")
        self.from_delta = QtWidgets.QPushButton("α = C·δ")
        self.from_delta.setToolTip("Set α from the current noise level δ")
        self.from_delta.setEnabled(False)
        self.per_layer = QtWidgets.QCheckBox("Per-layer α (layer-wise method)")
        self.per_layer.setToolTip("Weights of the priors on the auxiliary variables x₁ … "
                                  "x_{L−1} in the layer-wise inversion; unchecked: the "
                                  "method's default")
        self.layer_table = QtWidgets.QTableWidget(0, 1)
        self.layer_table.setHorizontalHeaderLabels(["α"])
        self.layer_table.horizontalHeader().setStretchLastSection(True)
        self.layer_table.verticalHeader().setDefaultSectionSize(22)
        self.layer_table.setMaximumHeight(100)
        self.layer_table.setEnabled(False)
        self._delta: float | None = None

        row = QtWidgets.QHBoxLayout()
        row.addWidget(QtWidgets.QLabel("C"))
        row.addWidget(self.c_factor, 1)
        row.addWidget(self.from_delta)
        lay = form()
        lay.addRow("Regulariser", self.regulariser)
        lay.addRow(self.auto_alpha)
        lay.addRow("α", self.alpha)
        lay.addRow("α from δ", row)
        lay.addRow(self.per_layer)
        lay.addRow(self.layer_table)
        self.set_form(lay)

        self.regulariser.activated.connect(lambda _i: self._emit("regulariser"))
        self.alpha.valueChanged.connect(lambda _v: self._user_alpha())
        self.auto_alpha.toggled.connect(lambda _on: self._emit("alpha"))
        self.from_delta.clicked.connect(self.apply_alpha_from_delta)
        self.per_layer.toggled.connect(self._per_layer_toggled)
        self.layer_table.itemChanged.connect(lambda _it: self._emit("layer_alphas"))

    # ---- request fields ------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        alpha = "auto" if self.auto_alpha.isChecked() else self.alpha.value()
        return {"regulariser": self.regulariser.currentData(), "alpha": alpha,
                "layer_alphas": self._layer_alphas()}

    def _user_alpha(self) -> None:
        """The user moved the slider: their α from now on (a single "alpha" change, so a
        running solve restarts warm at it)."""
        with QtCore.QSignalBlocker(self.auto_alpha):
            self.auto_alpha.setChecked(False)
        self._emit("alpha")

    def show_chosen_alpha(self, alpha: float) -> None:
        """Shows the α an Auto run chose, without switching Auto off."""
        with self.quiet(), QtCore.QSignalBlocker(self.alpha):
            self.alpha.setValue(float(alpha))

    def set_values(self, values: dict[str, Any]) -> None:
        with self.quiet():
            if "regulariser" in values and not set_combo_data(self.regulariser,
                                                              values["regulariser"]):
                # a name the list lacks (a spec the engine accepts, e.g. 'tv_iso'): shown
                # as it is rather than replaced by another regulariser
                self.regulariser.addItem(str(values["regulariser"]), values["regulariser"])
                set_combo_data(self.regulariser, values["regulariser"])
            if "alpha" in values:
                auto = values["alpha"] == "auto"
                with QtCore.QSignalBlocker(self.auto_alpha):
                    self.auto_alpha.setChecked(auto)
                if not auto:
                    with QtCore.QSignalBlocker(self.alpha):
                        self.alpha.setValue(float(values["alpha"]))
            if "layer_alphas" in values:
                la = values["layer_alphas"]
                if la:
                    self.set_layer_count(len(la))
                    for r, a in enumerate(la):
                        self._layer_cell(r).setText(f"{float(a):.4g}")
                self.per_layer.setChecked(bool(la))

    def gui_state(self) -> dict[str, Any]:
        """Settings that are not request fields (saved in sessions)."""
        return {"alpha_c": self.c_factor.value()}

    def set_gui_state(self, state: dict[str, Any]) -> None:
        if "alpha_c" in state:
            self.c_factor.setValue(float(state["alpha_c"]))

    # ---- α from δ ------------------------------------------------------------------------
    def set_delta(self, delta: float | None) -> None:
        self._delta = delta
        self.from_delta.setEnabled(delta is not None and delta > 0)
        self.from_delta.setToolTip("Set α from the current noise level δ" if delta else
                                   "Needs a known noise level δ > 0 (add noise first)")

    def apply_alpha_from_delta(self) -> None:
        """α := C·δ (clamped to the slider range); emits ``changed("alpha")``."""
        if not self._delta:
            return
        with QtCore.QSignalBlocker(self.alpha):
            self.alpha.setValue(float(f"{self.c_factor.value() * self._delta:.4g}"))
        self._user_alpha()

    # ---- per-layer α ---------------------------------------------------------------------
    def set_layer_count(self, n: int, fresh: bool = False) -> None:
        """One row per auxiliary variable x_1 … x_n (n = layers − 1), pre-filled with α;
        ``fresh`` (another network): every row starts from α again, none keeps a value
        typed for the network before."""
        if n == self.layer_table.rowCount() and not fresh:
            return
        with QtCore.QSignalBlocker(self.layer_table):
            if fresh:
                self.layer_table.setRowCount(0)
            self.layer_table.setRowCount(n)
            self.layer_table.setVerticalHeaderLabels([f"x_{i + 1}" for i in range(n)])
            self.layer_table.setFixedHeight(min(100, 26 + 22 * n))
            for r in range(n):
                if self.layer_table.item(r, 0) is None:
                    self.layer_table.setItem(r, 0,
                                             QtWidgets.QTableWidgetItem(f"{self.alpha.value():.4g}"))

    def set_method(self, method: str) -> None:
        """Per-layer α only applies to the layer-wise method."""
        self.per_layer.setEnabled(method == "layerwise")
        self.layer_table.setEnabled(method == "layerwise" and self.per_layer.isChecked())

    def _layer_cell(self, row: int) -> QtWidgets.QTableWidgetItem:
        """The α cell of ``row`` (made when missing: :meth:`set_layer_count` fills every row,
        but a table resized elsewhere may have empty ones)."""
        item = self.layer_table.item(row, 0)
        if item is None:
            item = QtWidgets.QTableWidgetItem("")
            self.layer_table.setItem(row, 0, item)
        return item

    def _per_layer_toggled(self, on: bool) -> None:
        self.layer_table.setEnabled(on and self.per_layer.isEnabled())
        if on:
            with QtCore.QSignalBlocker(self.layer_table):
                for r in range(self.layer_table.rowCount()):
                    cell = self._layer_cell(r)
                    if not cell.text():
                        cell.setText(f"{self.alpha.value():.4g}")
        self._emit("layer_alphas")

    def _layer_alphas(self) -> list[float] | None:
        if not (self.per_layer.isChecked() and self.per_layer.isEnabled()) \
                or self.layer_table.rowCount() == 0:
            return None  # only the layer-wise method takes per-layer weights
        out = []
        for r in range(self.layer_table.rowCount()):
            item = self.layer_table.item(r, 0)
            try:
                out.append(float(item.text()) if item else self.alpha.value())
            except ValueError:
                out.append(self.alpha.value())
        return out
