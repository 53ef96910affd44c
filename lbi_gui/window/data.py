"""Data before the engine, network/data compatibility, number-field shortcuts (collaborators
of the main window).

Why here: these are the window's start-up and input conveniences: the sample,
thumbnails and ground truth show from numpy before torch loads; choosing a zoo network brings
a dataset it can invert (and the other way round); run-control shortcuts work while a number
field has the focus.
"""

from __future__ import annotations

import math
from typing import Any

from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui.engine.messages import PreparedInfo
from lbi_gui.model.selection import Selection
from lbi_gui.model.view_state import ViewState
from lbi_gui.widgets.data_panel import THUMBS_PER_PAGE
from lbi_gui.widgets.image_grid import ImageGrid
from lbi_gui.widgets.number_inputs import ScientificSpinBox
from lbi_gui.window.controller import RunController
from lbi_gui.window.parts import Panels


class DataInputs:
    """The data panel's sources (bundled sets before and after the engine loads) and the
    agreement between the network and the data chosen."""

    def __init__(self, view: ViewState[PreparedInfo], selection: Selection,
                 controller: RunController, panels: Panels, image_grid: ImageGrid,
                 status_bar: QtWidgets.QStatusBar, parent: QtWidgets.QWidget) -> None:
        self.view = view
        self.selection = selection
        self.controller = controller
        self.panels = panels
        self.image_grid = image_grid
        self.status_bar = status_bar
        #: The parent of the dialogs opened here.
        self.parent = parent
        panels.data.splits_needed.connect(self.load_splits)
        panels.data.thumbnails_needed.connect(self.load_thumbnails)

    def current_request(self) -> dict[str, Any]:
        return dict(self.selection.request)

    def on_prepared(self, info: PreparedInfo, from_run: bool) -> None:
        """A problem the user asked for was prepared: the panel shows the data it used."""
        if not from_run and not self.controller.running:
            self.follow_prepared(info.request)

    def match_network_and_data(self, key: str, old: dict[str, Any] | None = None) -> None:
        """Keep a zoo network and a bundled dataset compatible: choosing one brings the other
        along (the circle perceptron takes 64×64 cartoons, the MNIST networks 28×28 digits)."""
        from lbi_engine.models import zoo_data as compat

        req = self.current_request()
        if req.get("image") or req.get("data") or req.get("truth"):
            return  # the user's own files: their size is checked (or resized) by the engine
        if key == "network":
            dataset = compat.dataset_for(compat.zoo_input_shape(req["network"]), req["dataset"])
            if dataset and dataset != req["dataset"]:
                split = compat.FIRST_SPLIT.get(dataset)
                self.selection.update({"dataset": dataset, "split": split, "index": 0})
                self.load_splits(dataset)
                self.load_thumbnails(dataset, self.panels.data.values()["split"], 0,
                                     THUMBS_PER_PAGE)
                self.status_bar.showMessage(
                    f"{req['network']} takes other images: switched the data to {dataset}", 6000)
        else:
            zoo = [self.panels.network.combo.itemData(i)
                   for i in range(self.panels.network.combo.count())]
            zoo = [z for z in zoo if isinstance(z, str) and not self.panels.network.is_file(z)]
            if req["network"] not in zoo:
                # The user's own network is never swapped for a zoo one: data that does not
                # fit it is refused instead (the engine decides when its shape is unknown).
                misfit = self._data_misfit(req)
                if misfit:
                    self._refuse_data(misfit, old)
                return
            network = compat.network_for(req["dataset"], req["network"], zoo)
            if network and network != req["network"]:
                self.selection.update({"network": network})
                self.status_bar.showMessage(
                    f"{req['dataset']} images do not fit {req['network']}: switched the "
                    f"network to {network}", 6000)

    def follow_prepared(self, prepared: dict[str, Any] | None) -> None:
        """The data panel shows the data that was prepared: a dataset the solver switched to,
        or the resize it turned on, so that the network's input fits (its note says so)."""
        from lbi_gui.model.data_fit import follow_changes

        follow = follow_changes(self.current_request(), prepared or {})
        if not follow:
            return
        self.selection.update(follow)  # the panels follow the model
        self.show_data({k: follow[k] for k in ("dataset", "split", "index") if k in follow})
        self.selection.update(self.panels.data.values())  # what the data panel shows now

    def _data_misfit(self, req: dict[str, Any]) -> str | None:
        """Why the bundled dataset in ``req`` cannot be the input of the network on screen
        (None: it can, or its input size is not known yet)."""
        from lbi_engine.models import zoo_data as compat

        info = self.view.info
        want = compat.DATASET_SHAPES.get(req["dataset"])
        if info is None or want is None or req.get("resize") \
                or (info.request or {}).get("network") != req["network"]:
            return None
        shape = tuple(int(s) for s in info.input_shape)
        fits = shape[1:] == want[1:] if len(shape) == 3 else \
            math.prod(shape) == math.prod(want)  # a flat input takes the pixels in order
        if fits:
            return None
        name = str(info.network_name)
        return (f"{req['dataset']} images are {want[1]}×{want[2]}; {name} takes inputs of "
                f"shape {'×'.join(map(str, shape))}.")

    def _refuse_data(self, why: str, old: dict[str, Any] | None) -> None:
        """Keep the network and the data that fit it; say why the new data was refused."""
        from lbi_gui.dialogs.messages import show_error

        good = old or self.view.good_request or {}
        self.show_data({k: good.get(k) for k in ("dataset", "split", "index") if k in good})
        show_error(self.parent, "These images do not fit the network", why,
                   fix="Keep your network and pick data of its input size, tick “Resize "
                       "images to the network input”, or open your own image (File → Open "
                       "image…).")

    def show_data(self, values: dict[str, Any]) -> None:
        """Dataset, its own splits, split, index and the thumbnails of that page, agreeing
        (after a refusal or a revert: the split combo must not keep the other set's splits)."""
        dataset = values.get("dataset")
        if dataset:
            self.panels.data.set_values({"dataset": dataset})
            self.load_splits(dataset)
        if values.get("split"):
            self.panels.data.set_values({"split": values["split"]})
        self.load_splits("")  # the size of the split now chosen bounds the index: set it next
        if "index" in values:
            self.panels.data.set_values({"index": values["index"]})
        index = int(self.panels.data.values()["index"])
        v = self.panels.data.values()
        self.load_thumbnails(v["dataset"], v["split"], index - index % THUMBS_PER_PAGE,
                             THUMBS_PER_PAGE)

    def show_lists(self) -> None:
        """Zoo, datasets and splits before the engine (torch) loads (then the panels can show
        the request, and :meth:`preview_truth` the sample).

        All of it is read with numpy (:func:`lbi_gui.engine.data_view`), so the window shows
        the sample at once; the decoder output and the network's layers follow once the
        engine has prepared the problem.
        """
        from lbi_gui import engine

        view = engine.data_view()
        try:
            self.panels.network.set_zoo(view.list_zoo())
            self.panels.data.set_datasets(view.list_datasets())
        except Exception as exc:  # a broken install: the engine will say more
            self.status_bar.showMessage(f"Bundled data: {exc}", 5000)
            return
        self.load_splits(self.selection.request.get("dataset") or "mnist")

    def preview_truth(self) -> None:
        """The dataset sample as ground truth while the engine is still starting."""
        if self.controller.engine_info is not None:
            return  # the engine's prepare shows the truth (and the decoder output)
        req = self.current_request()
        if req.get("image") or req.get("data") or req.get("truth"):
            return  # user files are read by the engine (allow-listed readers)
        try:
            sample = self._data_source().get_sample(req["dataset"], req["split"],
                                                    int(req["index"]))
            self.image_grid.set_truth(sample[0].detach().cpu().numpy())
        except Exception:  # an unknown set or index: prepare will report it
            self.image_grid.set_truth(None)

    @staticmethod
    def _data_source() -> Any:
        """The engine if loaded, else its torch-free data view (datasets, splits, samples)."""
        from lbi_gui import engine

        return engine.load_engine() if engine.engine_loaded() else engine.data_view()

    def load_splits(self, dataset: str) -> None:
        """Splits of ``dataset`` ("" = keep them) and the size of the chosen split."""
        eng = self._data_source()
        values = self.panels.data.values()
        try:
            if dataset:
                self.panels.data.set_splits(list(eng.list_splits(dataset)), None)
                values = self.panels.data.values()
            self.panels.data.set_size(eng.dataset_size(values["dataset"], values["split"]))
        except Exception as exc:  # an unknown dataset name from a session
            self.status_bar.showMessage(f"Dataset: {exc}", 5000)

    def load_thumbnails(self, dataset: str, split: str, start: int, count: int) -> None:
        eng = self._data_source()
        images = []
        for i in range(start, start + count):
            try:
                images.append(eng.get_sample(dataset, split, i)[0].detach().cpu().numpy())
            except Exception:  # past the end of the split, or an unknown set
                break
        self.panels.data.set_thumbnails(start, images)

# ---- shortcuts in number fields ----------------------------------------------------------
class FieldShortcuts(QtCore.QObject):
    """Run-control shortcuts must work while a number field has the focus: a spin box
    claims Space, Esc, Ctrl+Return and Ctrl+Backspace for itself (Qt's ShortcutOverride),
    which left Pause, Stop, Finish now and Reset dead after a value was typed. This filter,
    installed on every number field of ``window``, lets the window's shortcuts through."""

    def __init__(self, window: QtWidgets.QMainWindow) -> None:
        super().__init__(window)
        self._keys = {act.shortcut().toString() for act in window.actions()
                      if not act.shortcut().isEmpty()}
        bar = window.statusBar()
        for box in window.findChildren(QtWidgets.QAbstractSpinBox):
            box.installEventFilter(self)
            if isinstance(box, ScientificSpinBox):  # a refused typed value is said, not lost
                box.rejected.connect(lambda message: bar.showMessage(
                    f"Not accepted: {message}", 10000))
            line = box.findChild(QtWidgets.QLineEdit)
            if line is not None:
                line.installEventFilter(self)

    def eventFilter(self, obj: QtCore.QObject, event: QtCore.QEvent) -> bool:
        if event.type() == QtCore.QEvent.Type.ShortcutOverride and isinstance(
                event, QtGui.QKeyEvent):
            keys = QtGui.QKeySequence(event.keyCombination()).toString()
            if keys in self._keys:
                box = obj if isinstance(obj, QtWidgets.QAbstractSpinBox) else obj.parent()
                if isinstance(box, QtWidgets.QAbstractSpinBox):
                    box.interpretText()  # the typed value counts (e.g. for Ctrl+R)
                event.ignore()  # not overridden: the window's shortcut fires
                return True
        return super().eventFilter(obj, event)
