"""Noise panel: Gaussian noise on the network output, its seed, and the resulting δ."""

from __future__ import annotations

from typing import Any

from PySide6 import QtWidgets

from lbi_gui.widgets.number_inputs import LinearSlider
from lbi_gui.widgets.panel import ParamPanel, form, info_label


class NoisePanel(ParamPanel):
    """y^δ = P_dom(σ(f(x†)) + n), n ~ N(0, s²I); shows δ² = B_Ψ(y^δ, W x† + b)."""

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.std = LinearSlider(0.0, 0.5, 0.05, step=0.01, decimals=3)
        self.std.setToolTip("Standard deviation s of the Gaussian noise added to the "
                            "network output y")
        self.seed = QtWidgets.QSpinBox()
        self.seed.setRange(0, 2**31 - 1)
        self.seed.setKeyboardTracking(False)
        self.seed.setToolTip("Random seed of the noise; the same seed gives the same y^δ")
        self.resample = QtWidgets.QPushButton("Resample")
        self.resample.setToolTip("Draw new noise (next seed)")
        self.delta = info_label("δ = —")
        self.delta.setToolTip("δ² is the lifted Bregman distance between y^δ and the clean "
                              "pre-activation (the paper's noise level); δ is its root")
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.seed, 1)
        row.addWidget(self.resample)
        lay = form()
        lay.addRow("Noise std", self.std)
        lay.addRow("Seed", row)
        lay.addRow("Noise level", self.delta)
        self.set_form(lay)
        self.std.valueChanged.connect(lambda _v: self._emit("noise_std"))
        self.seed.valueChanged.connect(lambda _v: self._emit("seed"))
        self.resample.clicked.connect(lambda: self.seed.setValue(self.seed.value() + 1))

    def values(self) -> dict[str, Any]:
        return {"noise_std": round(self.std.value(), 6), "seed": int(self.seed.value())}

    def set_values(self, values: dict[str, Any]) -> None:
        with self.quiet():
            if "noise_std" in values:
                self.std.setValue(float(values["noise_std"]))
            if "seed" in values:
                self.seed.setValue(int(values["seed"]))

    def set_measured(self, measured: bool) -> None:
        """A measured y is used as it is: no noise is added, so the controls do nothing."""
        for w in (self.std, self.seed, self.resample):
            w.setEnabled(not measured)
        tip = "Measured y: used as it is, no noise is added" if measured else ""
        self.setToolTip(tip)

    def show_delta(self, delta: float | None, delta_sq: float | None,
                   noise_norm: float | None) -> None:
        if delta is None:
            self.delta.setText("δ = — (measured data: unknown)")
            return
        extra = f",  ‖n‖ = {noise_norm:.4g}" if noise_norm is not None else ""
        self.delta.setText(f"δ = {delta:.4g},  δ² = {delta_sq:.4g}{extra}")
