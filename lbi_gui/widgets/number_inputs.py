"""Number inputs for parameters that span decades (α, tolerance, noise).

Why custom: ``QDoubleSpinBox`` shows fixed decimals, so 1e-5 reads "0.00" and α = 9e-3 is
one click away from zero. These show 4 significant digits, step multiplicatively, and pair
with a logarithmic slider.
"""

from __future__ import annotations

import math

from PySide6 import QtCore, QtGui, QtWidgets

#: How a number field that refused what was typed looks until a valid value is entered.
INVALID_STYLE = "QAbstractSpinBox { border: 2px solid #d62728; background: #fff0f0; }"


class ScientificSpinBox(QtWidgets.QDoubleSpinBox):
    """A double spin box showing ``%.4g`` and stepping by a factor (10^(1/10) per step).

    A typed value it cannot take (out of range, not a number) is not reverted silently: the
    box turns red, its tooltip and ``rejected(message)`` say why (the window shows the
    message in the status bar), until a valid value is entered.
    """

    rejected = QtCore.Signal(str)

    def __init__(self, lo: float, hi: float, value: float, factor: float = 10 ** 0.1,
                 allow_zero: bool = False, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self._factor = factor
        self._allow_zero = allow_zero
        self.setDecimals(15)
        self.setRange(lo, hi)
        self.setKeyboardTracking(False)
        self.setValue(value)
        self.setAccelerated(True)
        self.invalid_message: str | None = None
        self._tip = ""
        self.valueChanged.connect(lambda _v: self.clear_invalid())
        self.lineEdit().textEdited.connect(self._edited)

    def setToolTip(self, text: str) -> None:  # Qt override: keep the tip to restore it
        self._tip = text
        super().setToolTip(text if self.invalid_message is None else
                           f"{self.invalid_message}\n\n{text}")

    def fixup(self, text: str) -> str:  # Qt override: called with text it cannot accept
        t = text.strip().replace(",", ".")
        try:
            v = float(t)
        except ValueError:
            why = "is not a number"
        else:
            why = (f"is outside the allowed range {self.minimum():g} … {self.maximum():g}"
                   if math.isfinite(v) else "is not a finite number")
        if t:
            self.mark_invalid(f"“{text.strip()}” {why}; the value stays "
                              f"{self.textFromValue(self.value())}.")
        return text

    def mark_invalid(self, message: str) -> None:
        self.invalid_message = message
        self.setStyleSheet(INVALID_STYLE)
        self.setToolTip(self._tip)
        self.rejected.emit(message)

    def clear_invalid(self) -> None:
        if self.invalid_message is not None:
            self.invalid_message = None
            self.setStyleSheet("")
            self.setToolTip(self._tip)

    def _edited(self, text: str) -> None:
        state = self.validate(text, len(text))[0]
        if state == QtGui.QValidator.State.Acceptable:
            self.clear_invalid()

    def textFromValue(self, value: float) -> str:  # Qt override
        return f"{value:.4g}"

    def valueFromText(self, text: str) -> float:
        try:
            return float(text.strip().replace(",", "."))
        except ValueError:
            return self.value()

    def validate(self, text: str, pos: int) -> tuple[QtGui.QValidator.State, str, int]:
        t = text.strip().replace(",", ".")
        try:
            v = float(t)
        except ValueError:
            ok = t == "" or all(c in "0123456789.eE+-" for c in t)
            state = QtGui.QValidator.State.Intermediate if ok else QtGui.QValidator.State.Invalid
            return state, text, pos
        if self.minimum() <= v <= self.maximum():
            return QtGui.QValidator.State.Acceptable, text, pos
        return QtGui.QValidator.State.Intermediate, text, pos

    def stepBy(self, steps: int) -> None:
        v = self.value()
        if v <= 0:
            v = max(self.minimum(), 1e-12) if steps > 0 else v
        else:
            v = v * self._factor ** steps
        if self._allow_zero and v < self.minimum() * 1.0001 and steps < 0:
            v = self.minimum()
        self.setValue(min(max(v, self.minimum()), self.maximum()))


class LogSlider(QtWidgets.QWidget):
    """A logarithmic slider and a scientific spin box that stay in sync.

    ``valueChanged`` fires once per user edit (slider release or drag, spin box commit);
    :meth:`setValue` never emits, so programmatic updates cannot loop.
    """

    valueChanged = QtCore.Signal(float)  # Qt naming

    STEPS = 1000

    def __init__(self, lo: float, hi: float, value: float,
                 parent: QtWidgets.QWidget | None = None, spin_lo: float | None = None,
                 spin_hi: float | None = None) -> None:
        """``lo``..``hi``: the slider's (logarithmic) range; ``spin_lo``..``spin_hi``: what may
        be typed (wider, 0 included; the slider then sits at its end)."""
        super().__init__(parent)
        self._lo, self._hi = math.log10(lo), math.log10(hi)
        self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.slider.setRange(0, self.STEPS)
        self.spin = ScientificSpinBox(lo if spin_lo is None else spin_lo,
                                      hi if spin_hi is None else spin_hi, value,
                                      allow_zero=spin_lo == 0)
        self.spin.setMinimumWidth(90)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.slider, 1)
        lay.addWidget(self.spin)
        self._sync_slider(value)
        self.slider.valueChanged.connect(self._from_slider)
        self.spin.valueChanged.connect(self._from_spin)

    def value(self) -> float:
        return float(self.spin.value())

    def setValue(self, value: float) -> None:
        with QtCore.QSignalBlocker(self.spin):
            self.spin.setValue(value)
        self._sync_slider(self.spin.value())

    def _sync_slider(self, value: float) -> None:
        pos = (math.log10(max(value, 1e-300)) - self._lo) / (self._hi - self._lo)
        with QtCore.QSignalBlocker(self.slider):
            self.slider.setValue(round(min(max(pos, 0.0), 1.0) * self.STEPS))

    def _from_slider(self, pos: int) -> None:
        value = 10 ** (self._lo + (self._hi - self._lo) * pos / self.STEPS)
        value = float(f"{value:.3g}")  # round to what the user can read
        with QtCore.QSignalBlocker(self.spin):
            self.spin.setValue(value)
        self.valueChanged.emit(self.value())

    def _from_spin(self, value: float) -> None:
        self._sync_slider(value)
        self.valueChanged.emit(float(value))


class LinearSlider(QtWidgets.QWidget):
    """A linear slider with a spin box (noise standard deviation)."""

    valueChanged = QtCore.Signal(float)

    def __init__(self, lo: float, hi: float, value: float, step: float = 0.01,
                 decimals: int = 3, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self._lo, self._hi = lo, hi
        self.slider = QtWidgets.QSlider(QtCore.Qt.Orientation.Horizontal)
        self.slider.setRange(0, 1000)
        self.spin = QtWidgets.QDoubleSpinBox()
        self.spin.setRange(lo, hi)
        self.spin.setDecimals(decimals)
        self.spin.setSingleStep(step)
        self.spin.setKeyboardTracking(False)
        self.spin.setValue(value)
        lay = QtWidgets.QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.slider, 1)
        lay.addWidget(self.spin)
        self._sync_slider(value)
        self.slider.valueChanged.connect(self._from_slider)
        self.spin.valueChanged.connect(self._from_spin)

    def value(self) -> float:
        return float(self.spin.value())

    def setValue(self, value: float) -> None:
        with QtCore.QSignalBlocker(self.spin):
            self.spin.setValue(value)
        self._sync_slider(self.spin.value())

    def _sync_slider(self, value: float) -> None:
        with QtCore.QSignalBlocker(self.slider):
            self.slider.setValue(round((value - self._lo) / (self._hi - self._lo) * 1000))

    def _from_slider(self, pos: int) -> None:
        with QtCore.QSignalBlocker(self.spin):
            self.spin.setValue(self._lo + (self._hi - self._lo) * pos / 1000)
        self.valueChanged.emit(self.value())

    def _from_spin(self, value: float) -> None:
        self._sync_slider(value)
        self.valueChanged.emit(float(value))
