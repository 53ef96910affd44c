"""Data panel: which image to invert (dataset sample or file) or a measured output y."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui.imaging import to_qimage
from lbi_gui.widgets.panel import ParamPanel, form, info_label, set_combo_data, tool_button

THUMBS_PER_PAGE = 12
THUMB_PX = 44


class DataPanel(ParamPanel):
    """Dataset / split / index with thumbnails, or user files (image, y, ground truth)."""

    thumbnails_needed = QtCore.Signal(str, str, int, int)  # dataset, split, start, count
    open_image_requested = QtCore.Signal()
    open_data_requested = QtCore.Signal()
    splits_needed = QtCore.Signal(str)  # dataset: the window answers with set_splits()

    def __init__(self, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__(parent)
        self.dataset = QtWidgets.QComboBox()
        self.split = QtWidgets.QComboBox()
        for s in ("val", "train", "all"):
            self.split.addItem(s, s)
        self.split.setToolTip("MNIST: val = digits the network never saw in training; "
                              "cartoon: the shape family (the index is the seed)")
        self.index = QtWidgets.QSpinBox()
        self.index.setRange(0, 99999)
        self.index.setKeyboardTracking(False)
        self.thumbs = QtWidgets.QListWidget()
        self.thumbs.setViewMode(QtWidgets.QListView.ViewMode.IconMode)
        self.thumbs.setIconSize(QtCore.QSize(THUMB_PX, THUMB_PX))
        self.thumbs.setFlow(QtWidgets.QListView.Flow.LeftToRight)
        self.thumbs.setWrapping(True)
        self.thumbs.setResizeMode(QtWidgets.QListView.ResizeMode.Adjust)
        self.thumbs.setMovement(QtWidgets.QListView.Movement.Static)
        self.thumbs.setSpacing(2)
        self.thumbs.setFixedHeight(2 * (THUMB_PX + 22) + 8)
        self.prev_page = tool_button("◀")
        self.next_page = tool_button("▶")
        self.prev_page.setToolTip("Previous samples")
        self.next_page.setToolTip("Next samples")
        self.image_label = info_label("—")
        self.data_label = info_label("—")
        open_image = QtWidgets.QPushButton("Open image / NPY…")
        open_image.setToolTip("Invert at your own ground truth: an image (PNG, JPEG, TIFF, BMP;"
                              " grey values in [0, 1]) or an NPY array in display range [0, 1]")
        open_data = QtWidgets.QPushButton("Load measured y…")
        open_data.setToolTip("Invert a measured network output y^δ directly (NPY); no noise "
                             "is added and there is no ground truth")
        self.resize_box = QtWidgets.QCheckBox("Resize images to the network input")
        self.resize_box.setToolTip("Resample an opened image (bilinear) to the network's "
                                   "input size; otherwise its size must match")
        self.use_dataset = QtWidgets.QPushButton("Use dataset sample")
        self.use_dataset.setToolTip("Forget the opened files and invert the dataset sample")
        self.preprocessing = info_label()

        lay = form()
        lay.addRow("Dataset", self.dataset)
        lay.addRow("Split", self.split)
        idx_row = QtWidgets.QHBoxLayout()
        idx_row.addWidget(self.index, 1)
        idx_row.addWidget(self.prev_page)
        idx_row.addWidget(self.next_page)
        lay.addRow("Sample", idx_row)
        lay.addRow(self.thumbs)
        files = QtWidgets.QGridLayout()
        files.addWidget(open_image, 0, 0)
        files.addWidget(self.image_label, 0, 1)
        files.addWidget(open_data, 1, 0)
        files.addWidget(self.data_label, 1, 1)
        files.setColumnStretch(1, 1)
        lay.addRow(files)
        lay.addRow(self.resize_box)
        lay.addRow(self.use_dataset)
        lay.addRow("Preprocessing", self.preprocessing)
        self.set_form(lay)

        self._image: str | None = None
        self._data: str | None = None
        self._truth: str | None = None
        self._page_start = -1
        self.dataset.activated.connect(lambda _i: self._dataset_changed())
        self.split.activated.connect(lambda _i: self._split_changed())
        self.index.valueChanged.connect(self._index_changed)
        self.thumbs.itemClicked.connect(self._thumb_clicked)
        self.prev_page.clicked.connect(lambda: self._page(-1))
        self.next_page.clicked.connect(lambda: self._page(+1))
        open_image.clicked.connect(self.open_image_requested)
        open_data.clicked.connect(self.open_data_requested)
        self.resize_box.toggled.connect(lambda _on: self._emit("resize"))
        self.use_dataset.clicked.connect(self._use_dataset)
        self._refresh_labels()

    # ---- request fields ------------------------------------------------------------------
    def values(self) -> dict[str, Any]:
        return {"dataset": self.dataset.currentData() or self.dataset.currentText() or "mnist",
                "split": self.split.currentData(), "index": int(self.index.value()),
                "image": self._image, "truth": self._truth, "data": self._data,
                "resize": self.resize_box.isChecked()}

    def set_values(self, values: dict[str, Any]) -> None:
        with self.quiet():
            if values.get("dataset"):
                if not set_combo_data(self.dataset, values["dataset"]):
                    self.dataset.addItem(values["dataset"], values["dataset"])
                    set_combo_data(self.dataset, values["dataset"])
            if values.get("split"):
                if not set_combo_data(self.split, values["split"]):
                    self.split.addItem(values["split"], values["split"])
                    set_combo_data(self.split, values["split"])
            if "index" in values:
                self.index.setValue(int(values["index"]))
            for key in ("image", "truth", "data"):
                if key in values:
                    setattr(self, f"_{key}", values[key] or None)
            if "resize" in values:
                self.resize_box.setChecked(bool(values["resize"]))
            self._refresh_labels()
        self._request_thumbs(force=False)

    def set_datasets(self, names: list[str]) -> None:
        with self.quiet():
            current = self.dataset.currentData()
            self.dataset.clear()
            for n in names:
                self.dataset.addItem(n, n)
            if current and not set_combo_data(self.dataset, current):
                self.dataset.addItem(current, current)
                set_combo_data(self.dataset, current)
        self._request_thumbs(force=True)

    def set_file(self, key: str, path: str | None) -> None:
        """Use ``path`` as the image, truth (NPY ground truth) or data (measured y) file.

        The engine takes one source at a time, so the other two are cleared. Emits ``changed``.
        """
        self._image = self._truth = self._data = None
        setattr(self, f"_{key}", path)
        self._refresh_labels()
        self._emit(key)

    def _use_dataset(self) -> None:
        self._image = self._data = self._truth = None
        self._refresh_labels()
        self._emit("image")

    def _refresh_labels(self) -> None:
        truth_file = self._image or self._truth
        for path, lab in ((truth_file, self.image_label), (self._data, self.data_label)):
            lab.setText(Path(path).name if path else "—")
            lab.setToolTip(path or "")
        from_files = bool(truth_file or self._data)
        for w in (self.dataset, self.split, self.index, self.thumbs, self.prev_page,
                  self.next_page):
            w.setEnabled(not from_files)
        self.use_dataset.setEnabled(from_files)

    def show_preprocessing(self, text: str) -> None:
        self.preprocessing.setText(text)

    # ---- thumbnails ----------------------------------------------------------------------
    def set_splits(self, splits: list[str], size: int | None) -> None:
        """Offer the splits of the current dataset and bound the index by its size."""
        with self.quiet():
            current = self.split.currentData()
            self.split.clear()
            for s in splits:
                self.split.addItem(s, s)
            if not set_combo_data(self.split, current) and splits:
                self.split.setCurrentIndex(0)
            self.set_size(size)

    def set_size(self, size: int | None) -> None:
        with self.quiet():
            self.index.setMaximum(max(0, size - 1) if size else 2**31 - 1)
            self.index.setToolTip(f"0 … {size - 1}" if size else "any seed")

    def _dataset_changed(self) -> None:
        self.splits_needed.emit(self.values()["dataset"])
        self._request_thumbs(force=True)
        self._emit("dataset")

    def _split_changed(self) -> None:
        self.splits_needed.emit("")  # "" = only the size of the current split changed
        self._request_thumbs(force=True)
        self._emit("split")

    def _index_changed(self, _value: int) -> None:
        self._request_thumbs(force=False)
        self._highlight()
        self._emit("index")

    def _thumb_clicked(self, item: QtWidgets.QListWidgetItem) -> None:
        self.index.setValue(int(item.data(QtCore.Qt.ItemDataRole.UserRole)))

    def _page(self, direction: int) -> None:
        start = max(0, self._page_start + direction * THUMBS_PER_PAGE)
        self._page_start = -1
        self.thumbnails_needed.emit(self.values()["dataset"], self.values()["split"], start,
                                    THUMBS_PER_PAGE)

    def _request_thumbs(self, force: bool) -> None:
        idx = int(self.index.value())
        start = idx - idx % THUMBS_PER_PAGE
        if force or start != self._page_start:
            self.thumbnails_needed.emit(self.values()["dataset"], self.values()["split"], start,
                                        THUMBS_PER_PAGE)

    def set_thumbnails(self, start: int, images: list[np.ndarray]) -> None:
        """Show ``images`` (display space) for indices start, start+1, …"""
        self._page_start = start
        self.thumbs.clear()
        for i, img in enumerate(images):
            pix = QtGui.QPixmap.fromImage(to_qimage(img)).scaled(
                THUMB_PX, THUMB_PX, QtCore.Qt.AspectRatioMode.KeepAspectRatio,
                QtCore.Qt.TransformationMode.FastTransformation)
            item = QtWidgets.QListWidgetItem(QtGui.QIcon(pix), str(start + i))
            item.setData(QtCore.Qt.ItemDataRole.UserRole, start + i)
            self.thumbs.addItem(item)
        self._highlight()

    def _highlight(self) -> None:
        idx = int(self.index.value())
        for r in range(self.thumbs.count()):
            item = self.thumbs.item(r)
            item.setSelected(int(item.data(QtCore.Qt.ItemDataRole.UserRole)) == idx)
