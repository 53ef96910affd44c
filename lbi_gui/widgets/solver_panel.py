"""Solver panel: method, the joint ↔ layer-wise switch, stopping and execution settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui.params import METHODS, STEP_MODES, feature_prior_available, shipped_feature_prior
from lbi_gui.widgets.number_inputs import ScientificSpinBox
from lbi_gui.widgets.panel import ParamPanel, form, set_combo_data, tool_button

SWITCH_TIP = ("Switch between the joint and the layer-wise inversion in one click (restarts "
              "a running solve warm)")
LAYERWISE_NEEDS_LAYERS = ("Layer-wise inverts a network layer by layer and needs at least two "
                          "layers; this network has one (use auto or one layer: the same "
                          "problem).")
#: Shown under the feature prior's row when layer-wise is chosen and no prior is available.
PRIOR_NEEDED = "Layer-wise needs a feature prior: choose one, or fit it with lbi feature-prior."
PRIOR_TIP = ("The learned feature prior layer-wise inversion uses for the hidden layers: the "
             "files P.json + P.safetensors written by `lbi feature-prior NET --samples "
             "clean.npy --out P` for this network. Zoo networks may ship one (\"shipped\").")


class SolverPanel(ParamPanel):
    """Edits method, feature_prior, steps, max_iter, tol, tol_mode, report_every, device,
    dtype, threads.

    ``prior_requested`` asks the window for a feature prior file (its dialog and its checks
    live with the window's other file commands); the window answers with
    :meth:`set_feature_prior`.
    """

    prior_requested = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.method = QtWidgets.QComboBox()
        for name, label in METHODS:
            self.method.addItem(label, name)
        self.switch = QtWidgets.QPushButton("⇄ Layer-wise")
        self.switch.setToolTip(SWITCH_TIP)
        self.steps = QtWidgets.QComboBox()
        for name, label in STEP_MODES:
            self.steps.addItem(label, name)
        for combo in (self.method, self.steps):
            # Long labels are elided in the closed box (the list shows them whole), so the
            # parameter column stays narrow enough for a 1024-pixel screen.
            combo.setSizeAdjustPolicy(
                QtWidgets.QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
            combo.setMinimumContentsLength(20)
            combo.view().setMinimumWidth(combo.view().sizeHintForColumn(0) + 24)
        self.max_iter = QtWidgets.QSpinBox()
        self.max_iter.setRange(1, 10_000_000)
        self.max_iter.setSingleStep(100)
        self.max_iter.setKeyboardTracking(False)
        self.tol = ScientificSpinBox(0.0, 1.0, 1e-4, allow_zero=True)
        self.tol.setToolTip("objective: stop when the objective moved by less than this "
                            "(relative) over the second half of the run; relative/absolute: "
                            "when the change of x and of the dual in one iteration is below "
                            "this (0: never)")
        self.tol_mode = QtWidgets.QComboBox()
        self.tol_mode.addItem("objective", "objective")
        self.tol_mode.addItem("relative step", "relative")
        self.tol_mode.addItem("absolute (paper)", "absolute")
        self.report_every = QtWidgets.QSpinBox()
        self.report_every.setRange(1, 100_000)
        self.report_every.setToolTip("Report (curve point, image) every N iterations; the window "
                                     "redraws at most 30 times per second regardless")
        self.device = QtWidgets.QComboBox()
        self.device.addItem("Auto", "auto")  # CUDA when torch finds a GPU, else CPU
        self.device.addItem("CPU", "cpu")
        self.device.setToolTip("CUDA appears when torch finds a GPU")
        self.dtype = QtWidgets.QComboBox()
        self.dtype.addItem("float32", "float32")
        self.dtype.addItem("float64", "float64")
        self.threads = QtWidgets.QSpinBox()
        self.threads.setRange(1, 256)
        self._layers = 2  # of the network on screen (set_layer_count)
        self._network = ""  # the network on screen (set_network): is a prior shipped with it?
        self._feature_prior: str | None = None  # BASE of the chosen prior; None: none chosen
        self.prior_label = QtWidgets.QLabel("none")
        self.prior_label.setToolTip(PRIOR_TIP)
        # Ignored width: a long file name never widens the parameter column.
        self.prior_label.setSizePolicy(QtWidgets.QSizePolicy.Policy.Ignored,
                                       QtWidgets.QSizePolicy.Policy.Preferred)
        self.prior_button = QtWidgets.QPushButton("Feature prior…")
        self.prior_button.setToolTip(PRIOR_TIP)
        self.prior_clear = tool_button("✕")
        self.prior_clear.setToolTip("Use no chosen feature prior (a shipped one still applies)")
        self.prior_hint = QtWidgets.QLabel(PRIOR_NEEDED)
        self.prior_hint.setWordWrap(True)
        self.prior_hint.setStyleSheet("color: #b35c00;")
        self.prior_hint.setVisible(False)
        self.threads.setToolTip("CPU threads for the solver (1 keeps the window responsive; "
                                "more can help on large networks)")

        method_row = QtWidgets.QHBoxLayout()
        method_row.addWidget(self.method, 1)
        method_row.addWidget(self.switch)
        tol_row = QtWidgets.QHBoxLayout()
        tol_row.addWidget(self.tol, 1)
        tol_row.addWidget(self.tol_mode)
        exec_row = QtWidgets.QHBoxLayout()
        exec_row.addWidget(self.device, 1)
        exec_row.addWidget(self.dtype)
        exec_row.addWidget(QtWidgets.QLabel("threads"))
        exec_row.addWidget(self.threads)
        lay = form()
        prior_row = QtWidgets.QHBoxLayout()
        prior_row.addWidget(self.prior_button)
        prior_row.addWidget(self.prior_label, 1)
        prior_row.addWidget(self.prior_clear)
        lay.addRow("Method", method_row)
        lay.addRow("Prior", prior_row)
        lay.addRow(self.prior_hint)
        lay.addRow("Step sizes", self.steps)
        lay.addRow("Max iterations", self.max_iter)
        lay.addRow("Tolerance", tol_row)
        lay.addRow("Update every", self.report_every)
        lay.addRow("Device", exec_row)
        self.set_form(lay)

        self.method.activated.connect(lambda _i: self._method_changed())
        self.switch.clicked.connect(self.toggle_joint_layerwise)
        self.prior_button.clicked.connect(self.prior_requested.emit)
        self.prior_clear.clicked.connect(lambda: self.set_feature_prior(None))
        for key, w in (("steps", self.steps), ("tol_mode", self.tol_mode),
                       ("device", self.device), ("dtype", self.dtype)):
            w.activated.connect(lambda _i, k=key: self._emit(k))
        numbers: tuple[tuple[str, QtWidgets.QAbstractSpinBox], ...] = (
            ("max_iter", self.max_iter), ("tol", self.tol), ("report_every", self.report_every),
            ("threads", self.threads))
        for key, box in numbers:
            # both spin box kinds have valueChanged; their common base does not declare it
            box.valueChanged.connect(  # type: ignore[attr-defined]
                lambda _v, k=key: self._emit(k))
        self._update_switch()

    def values(self) -> dict[str, Any]:
        return {"method": self.method.currentData(), "steps": self.steps.currentData(),
                "max_iter": int(self.max_iter.value()), "tol": float(self.tol.value()),
                "tol_mode": self.tol_mode.currentData(),
                "report_every": int(self.report_every.value()),
                "device": self.device.currentData(), "dtype": self.dtype.currentData(),
                "threads": int(self.threads.value()), "feature_prior": self._feature_prior}

    def set_values(self, values: dict[str, Any]) -> None:
        with self.quiet():
            for key in ("method", "steps", "tol_mode", "dtype"):
                if key in values:
                    set_combo_data(getattr(self, key), values[key])
            if "device" in values and not set_combo_data(self.device, values["device"]):
                self.device.addItem(str(values["device"]), values["device"])
                set_combo_data(self.device, values["device"])
            for key in ("max_iter", "report_every"):
                if key in values:
                    getattr(self, key).setValue(int(values[key]))
            if "threads" in values:
                self.threads.setValue(int(values["threads"] or 1))
            if "tol" in values:
                self.tol.setValue(float(values["tol"]))
            if "feature_prior" in values:
                self._feature_prior = values["feature_prior"] or None
        self._update_switch()

    def set_cuda_available(self, available: bool) -> None:
        if available and self.device.findData("cuda") < 0:
            self.device.addItem("CUDA (GPU)", "cuda")

    def _method_item(self, name: str) -> QtGui.QStandardItem:
        """The method list's entry for ``name`` (a combo box's own model is a
        QStandardItemModel, whose items can be disabled one by one)."""
        model = self.method.model()
        assert isinstance(model, QtGui.QStandardItemModel)
        item = model.item(self.method.findData(name))
        assert item is not None, name
        return item

    def set_layer_count(self, n: int) -> None:
        """One-layer (alias PDHG) inverts one layer: offer it only for one-layer networks
        (others explain why)."""
        for name in ("one-layer", "pdhg"):
            item = self._method_item(name)
            item.setEnabled(n == 1)
            item.setToolTip("" if n == 1 else f"This method inverts a single layer; this "
                            f"network has {n}. Use auto, joint or layer-wise.")
        # Layer-wise inverts a network stage by stage: with one layer there are no stages and
        # it would be the one-layer method under another name, so it is not offered.
        item = self._method_item("layerwise")
        item.setEnabled(n > 1)
        item.setToolTip("" if n > 1 else LAYERWISE_NEEDS_LAYERS)
        self._layers = n
        self._update_switch()

    def set_network(self, network: str) -> None:
        """The network on screen: whether the zoo ships a prior for it is shown."""
        self._network = network
        self._update_prior()

    def set_feature_prior(self, base: str | None) -> None:
        """Use the feature prior ``base`` (a path the window has checked; None: none chosen);
        emits ``changed("feature_prior")`` when it differs."""
        base = base or None
        if base == self._feature_prior:
            return
        self._feature_prior = base
        self._update_prior()
        self._emit("feature_prior")

    def toggle_joint_layerwise(self) -> None:
        """Joint → layer-wise, anything else → joint; emits ``changed("method")``."""
        target = "joint" if self.method.currentData() == "layerwise" else "layerwise"
        if not self.switch.isEnabled():
            return
        set_combo_data(self.method, target)
        self._method_changed()

    def _method_changed(self) -> None:
        self._update_switch()
        self._emit("method")

    def _update_prior(self) -> None:
        """The prior's row follows the choice, the network and the method."""
        chosen, layers = self._feature_prior, self._layers
        if chosen:
            self.prior_label.setText(Path(chosen).name)
            self.prior_label.setToolTip(chosen)
        else:
            shipped = bool(self._network) and shipped_feature_prior(self._network)
            self.prior_label.setText("shipped" if shipped else "none")
            self.prior_label.setToolTip(PRIOR_TIP)
        self.prior_clear.setEnabled(bool(chosen))
        # A one-layer network has no hidden layers, so no prior to choose; a chosen one can
        # still be cleared.
        self.prior_button.setEnabled(layers > 1)
        self.prior_button.setToolTip(PRIOR_TIP if layers > 1 else LAYERWISE_NEEDS_LAYERS)
        self.prior_hint.setVisible(
            self.method.currentData() == "layerwise" and layers > 1
            and not feature_prior_available(self._network, chosen))

    def _update_switch(self) -> None:
        self._update_prior()
        to_joint = self.method.currentData() == "layerwise"
        self.switch.setText("⇄ Joint" if to_joint else "⇄ Layer-wise")
        layers = self._layers
        self.switch.setEnabled(layers > 1 or to_joint)
        self.switch.setToolTip(SWITCH_TIP if layers > 1 else LAYERWISE_NEEDS_LAYERS)
