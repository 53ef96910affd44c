"""Network panel: zoo list, Open…, the lifted layers, and why a network cannot be lifted."""

from __future__ import annotations

import html
import os
from pathlib import Path
from typing import Any

from PySide6 import QtCore, QtWidgets

from lbi_gui.widgets.panel import ParamPanel, form, info_label

LAYER_COLUMNS = ["#", "kind", "input", "output", "activation", "‖W‖", "from"]


def _shape(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return "×".join(str(int(s)) for s in v)
    return "" if v is None else str(v)


def _shown(text: str) -> str:
    """``text`` as Qt can display it (undecodable file-name bytes become U+FFFD)."""
    return text.encode("utf-8", "replace").decode("utf-8") if isinstance(text, str) else text


def parse_shape(text: str) -> tuple[int, ...] | None:
    """"1,28,28" or "1x28x28" → (1, 28, 28); blank → None; raises ValueError otherwise."""
    t = text.strip().replace("×", ",").replace("x", ",").replace(" ", ",")
    parts = [p for p in t.split(",") if p]
    if not parts:
        return None
    shape = tuple(int(p) for p in parts)
    if any(s < 1 for s in shape):
        raise ValueError("every dimension must be a positive integer")
    return shape


#: Map kinds that only place a state in the result (no weights): shown as the state itself.
_PLACING_KINDS = ("Identity", "ChannelSlot")


def describe_node(index: int, row: dict[str, Any]) -> str:
    """What lifted node ``index`` (state x_{index+1}) merges, in one line, from a layer row
    with ``terms`` ([state, map kind] per input; x0 is the network's input): e.g.
    "x3 = relu(add: Conv2d(x2) + x1)" for a residual block, "x5 = identity(concat: x3 | x4)"
    for a Fire module's concatenation, "x1 = relu(Conv2d(x0))" for a chain node."""
    terms = row.get("terms") or [[index, row.get("kind", "")]]
    kinds = [str(kind) for _j, kind in terms]
    parts = [f"x{j}" if kind in _PLACING_KINDS else f"{kind}(x{j})" for j, kind in terms]
    if len(parts) == 1:
        merged = parts[0]
    elif "ChannelSlot" in kinds:
        merged = "concat: " + " | ".join(parts)
    else:
        merged = "add: " + " + ".join(parts)
    return f"x{index + 1} = {row.get('activation', '')}({merged})"


class NetworkPanel(ParamPanel):
    """Choose the network; shows its lifted layers or the reason it cannot be lifted."""

    open_requested = QtCore.Signal()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self._refs: dict[str, str] = {}  # combo key -> a path Qt cannot hold (see _key)
        self.combo = QtWidgets.QComboBox()
        self.combo.setToolTip("Bundled networks (the zoo) and files you opened")
        self.combo.setMinimumContentsLength(9)
        self.open_button = QtWidgets.QPushButton("Open…")
        self.open_button.setToolTip("Open an ONNX (.onnx), torch.export (.pt2), safetensors or "
                                    "state dict + model card file (you can also drop it on the "
                                    "window). TorchScript (.pt) runs code from the file while "
                                    "it loads: it opens only after you consent, for trusted "
                                    "files only")
        self.shape_edit = QtWidgets.QLineEdit()
        self.shape_edit.setPlaceholderText("from the file (e.g. 1,28,28)")
        self.shape_edit.setToolTip("Input shape without the batch dimension; needed only when "
                                   "the file does not say")
        self.allow_pickle = False
        #: The network being loaded ("" when the panel describes the one prepared).
        self.loading = ""
        self.summary = info_label()
        self.summary.setContentsMargins(6, 0, 6, 0)
        self.table = QtWidgets.QTableWidget(0, len(LAYER_COLUMNS))
        self.table.setHorizontalHeaderLabels(LAYER_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QtWidgets.QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setAlternatingRowColors(True)
        #: A graph network's lifted nodes, one line each with what it merges (hidden for a
        #: chain, whose table says it all).
        self.nodes = QtWidgets.QListWidget()
        self.nodes.setToolTip("The lifted nodes of a network with residual additions or "
                              "concatenations: x0 is the input, x_i the output of layer i")
        self.nodes.setMaximumHeight(140)
        self.nodes.hide()
        self.problem = info_label()
        self.problem.setObjectName("networkProblem")
        self.problem.setStyleSheet("QLabel#networkProblem { background: #fff3f0; color: #8a1f11;"
                                   " border: 1px solid #e0a49a; border-radius: 3px;"
                                   " padding: 4px; }")
        self.problem.hide()

        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.combo, 1)
        row.addWidget(self.open_button)
        lay = form()
        lay.addRow("Network", row)
        lay.addRow("Input shape", self.shape_edit)
        outer = QtWidgets.QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.addLayout(lay)
        outer.addWidget(self.summary)
        outer.addWidget(self.problem)
        outer.addWidget(self.nodes)
        outer.addWidget(self.table, 1)

        self.combo.activated.connect(lambda _i: self._emit("network"))
        self.shape_edit.editingFinished.connect(self._shape_edited)
        self.open_button.clicked.connect(self.open_requested)
        self._last_shape_text = ""

    # ---- request fields ------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        try:
            shape = parse_shape(self.shape_edit.text())
        except ValueError:
            shape = None
        return {"network": self._ref(self.combo.currentData()) or "", "input_shape": shape,
                "allow_pickle": self.allow_pickle}

    def set_values(self, values: dict[str, Any]) -> None:
        with self.quiet():
            if "network" in values:
                self.select_network(str(values["network"]))
            if "input_shape" in values:
                shape = values["input_shape"]
                self.shape_edit.setText(",".join(str(s) for s in shape) if shape else "")
                self._last_shape_text = self.shape_edit.text()
            if "allow_pickle" in values:
                self.allow_pickle = bool(values["allow_pickle"])

    def set_zoo(self, names: list[str]) -> None:
        """Fill the zoo entries (keeps opened files and the current choice)."""
        with self.quiet():
            current = self._ref(self.combo.currentData())
            files = [(self.combo.itemText(i), self.combo.itemData(i))
                     for i in range(self.combo.count()) if self._is_file(self.combo.itemData(i))]
            self.combo.clear()
            for name in names:
                self.combo.addItem(name, name)
            for text, data in files:
                self.combo.addItem(text, data)
            if current:
                self.select_network(current)

    def select_network(self, ref: str) -> None:
        """Select a zoo name or a file path (added to the list if new)."""
        key = self._key(ref)
        with self.quiet():
            if self.combo.findData(key) < 0:
                label = f"{_shown(Path(ref).name)}  (file)" if self._is_file(ref) else _shown(ref)
                self.combo.addItem(label, key)
                self.combo.setItemData(self.combo.count() - 1, _shown(ref),
                                       QtCore.Qt.ItemDataRole.ToolTipRole)
            self.combo.setCurrentIndex(self.combo.findData(key))

    def _key(self, ref: str) -> str:
        """The combo item data for ``ref``: Qt strings cannot hold the lone surrogates that
        stand for a file name's non-UTF-8 bytes, so such paths get a plain key and the real
        path is kept on the Python side."""
        if _shown(ref) == ref:
            return ref
        key = "\x00path:" + os.fsencode(ref).hex()
        self._refs[key] = ref
        return key

    def _ref(self, data: Any) -> Any:
        """The network reference behind an item's data (see :meth:`_key`)."""
        return self._refs.get(data, data) if isinstance(data, str) else data

    def is_file(self, ref: Any) -> bool:
        """Whether ``ref`` names a network file (the user's own), not a zoo network."""
        return self._is_file(ref)

    def _is_file(self, ref: Any) -> bool:
        ref = self._ref(ref)
        return isinstance(ref, str) and ("/" in ref or "\\" in ref or "." in Path(ref).name)

    def _shape_edited(self) -> None:
        text = self.shape_edit.text()
        if text == self._last_shape_text:
            return
        try:
            parse_shape(text)
        except ValueError as exc:
            self.show_problem(f"Input shape {text!r} is not valid: {exc}. Write the shape "
                              "without the batch dimension, e.g. 1,28,28.")
            return
        self._last_shape_text = text
        self._emit("input_shape")

    # ---- display -------------------------------------------------------------------------
    def show_network(self, name: str, layers: list[dict[str, Any]], card: dict[str, Any],
                     input_shape: tuple[int, ...], output_shape: tuple[int, ...]) -> None:
        """Fill the layer table for a network that lifted without problems."""
        self.problem.hide()
        self.loading = ""
        self.table.setRowCount(len(layers))
        for r, layer in enumerate(layers):
            norm = layer.get("norm")
            cells = [str(r + 1), str(layer.get("kind", "")), _shape(layer.get("in_shape")),
                     _shape(layer.get("out_shape")), str(layer.get("activation", "")),
                     "" if norm is None else f"{float(norm):.4g}",
                     str(layer.get("source", ""))]
            for c, text in enumerate(cells):
                item = QtWidgets.QTableWidgetItem(text)
                if c in (0, 5):
                    item.setTextAlignment(QtCore.Qt.AlignmentFlag.AlignRight
                                          | QtCore.Qt.AlignmentFlag.AlignVCenter)
                if c == 1 and layer.get("description"):
                    item.setToolTip(str(layer["description"]))
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        graph = any(len(layer.get("terms") or ()) > 1 for layer in layers)
        self.nodes.clear()
        if graph:
            self.nodes.addItems([describe_node(r, layer) for r, layer in enumerate(layers)])
        self.nodes.setVisible(graph)
        desc = card.get("description") or card.get("summary") or ""
        note = (card.get("lifting") or {}).get("note")  # e.g. max-pooling as ReLU layers
        desc = f"{desc}<br>{note}" if desc and note else desc or note or ""
        merges = sum(len(layer.get("terms") or ()) > 1 for layer in layers)
        kind = f" (a graph: {merges} of them merge several states)" if merges else ""
        facts = (f"<b>{name}</b>: {len(layers)} lifted layers{kind}, input "
                 f"{_shape(input_shape)}, output {_shape(output_shape)}")
        self.summary.setText(facts + (f"<br>{desc}" if desc else ""))

    def show_loading(self, name: str) -> None:
        """A newly chosen network is being read and lifted (seconds for a large one, in the
        engine): say so at once instead of describing the network before."""
        self.loading = name
        self.problem.hide()
        self.table.setRowCount(0)
        self.nodes.clear()
        self.nodes.hide()
        self.summary.setText(f"Loading <b>{html.escape(name)}</b>… its lifted layers are "
                             "listed here when it is ready.")

    def show_problem(self, message: str) -> None:
        """Explain, in the panel itself, why the network could not be used."""
        self.problem.setText(message)
        self.problem.show()

    def ask_input_shape(self, message: str) -> None:
        """The chosen network does not fix its input shape: say so, and put the cursor where
        the user types it (the network stays chosen; Enter prepares it)."""
        self.show_problem(f"{message}\nType the shape of one sample without the batch (e.g. "
                          "3,64,64) under Input shape and press Enter.")
        self.shape_edit.setFocus()

    def clear_problem(self) -> None:
        self.problem.hide()
