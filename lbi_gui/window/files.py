"""Files for the main window (its collaborator): networks, data, sessions, drops."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6 import QtWidgets

from lbi_engine.errors import LbiError
from lbi_gui.dialogs import messages as dialogs
from lbi_gui.dialogs.messages import confirm_overwrite, confirm_pickle, show_error
from lbi_gui.engine.messages import ErrorInfo, PreparedInfo
from lbi_gui.model import AppModel
from lbi_gui.model import session as sessions
from lbi_gui.model.data_fit import degenerate_image
from lbi_gui.model.runs import RunResult
from lbi_gui.model.view_state import ViewState
from lbi_gui.params import (
    IMAGE_SUFFIXES,
    NETWORK_SUFFIXES,
    PROBLEM_KEYS,
    SESSION_SUFFIX,
    feature_prior_problem,
    prior_base,
)
from lbi_gui.settings import add_recent, last_dir, recent_files, remember_dir
from lbi_gui.window.controller import RunController
from lbi_gui.window.data import DataInputs
from lbi_gui.window.parameters import Parameters
from lbi_gui.window.parts import Panels, StatusWidgets, Views
from lbi_gui.window.session_view import restore_view

RECENT_TITLES = {"sessions": "Sessions", "networks": "Networks", "images": "Images",
                 "data": "Measured data"}
NETWORK_FILTER = ("Networks (*.pt *.pth *.pt2 *.ts *.torchscript *.onnx *.safetensors *.json *.bin "
                  "*.ckpt);;All files (*)")
IMAGE_FILTER = "Images (*.png *.jpg *.jpeg *.bmp *.tif *.tiff *.pgm *.npy *.npz);;All files (*)"
SESSION_FILTER = f"lbi sessions (*{SESSION_SUFFIX});;All files (*)"
PRIOR_FILTER = "Feature priors (*.json *.safetensors);;All files (*)"


class FileCommands:
    """Open…/Save… and their error handling; never leaves the window unusable."""

    def __init__(self, view: ViewState[PreparedInfo], model: AppModel, controller: RunController,
                 params: Parameters, inputs: DataInputs, panels: Panels, views: Views,
                 status: StatusWidgets, network_dock: QtWidgets.QDockWidget,
                 recent_menu: QtWidgets.QMenu, set_title: Callable[[str], None],
                 parent: QtWidgets.QWidget) -> None:
        self.view, self.model, self.controller = view, model, controller
        self.params, self.inputs, self.panels = params, inputs, panels
        self.image_grid, self.curves, self.run_table = views.image_grid, views.curves, \
            views.run_table
        self.status_bar, self.status_reason = status.bar, status.reason
        self.network_dock, self.recent_menu = network_dock, recent_menu
        #: Shows a session's file name as the window's title.
        self.set_title = set_title
        #: The parent of the dialogs opened here.
        self.parent = parent
        #: Ask about unsaved runs on quit ($LBI_GUI_CONFIRM_QUIT=0: never; tests, scripts).
        self.confirm_quit = os.environ.get("LBI_GUI_CONFIRM_QUIT", "1") != "0"
        # files of a problem that prepared fine join File → Open recent
        view.events.good_request.connect(self.remember_opened)

    def may_discard(self, action: str) -> bool:
        """Before ``action`` loses runs not in a saved session or a live run: ask (save,
        discard or cancel); True when it may go on."""
        unsaved, running = self.model.runs.unsaved(), self.controller.running
        if not self.confirm_quit or not (unsaved or running):
            return True
        answer = dialogs.ask_unsaved_runs(self.parent, len(unsaved), running=running,
                                          action=action)
        return not (answer == "cancel" or (answer == "save" and not self.save_session()))

    # ---- networks -------------------------------------------------------------------------
    def open_network_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self.parent, "Open network",
                                                        last_dir("network"), NETWORK_FILTER)
        if path:
            self.open_network(path)

    def open_network(self, path: str) -> None:
        """Load a network file (TorchScript, ONNX, state dict + card; pickles ask first)."""
        remember_dir("network", path)
        self.panels.network.select_network(path)
        self.params.panel_changed("network")  # as if chosen in the panel (consent is reset)
        self.params.flush_changes()

    def open_feature_prior_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self.parent, "Choose a feature prior",
                                                        last_dir("prior"), PRIOR_FILTER)
        if path:
            self.choose_feature_prior(path)

    def choose_feature_prior(self, path: str) -> bool:
        """Use the feature prior ``path`` (BASE, BASE.json or BASE.safetensors) for layer-wise
        inversion when both its files are there; otherwise say why and keep the one before.
        Whether it fits the network is the engine's check, when it prepares the problem."""
        remember_dir("prior", path)
        problem = feature_prior_problem(path)
        if problem is not None:
            show_error(self.parent, "Not a feature prior", problem)  # says what to do
            return False
        self.panels.solver.set_feature_prior(prior_base(path))  # emits changed
        self.params.flush_changes()
        return True

    def on_prepare_failed(self, err: ErrorInfo) -> None:
        """Explain the failure; ask about pickles; go back to the last problem that worked."""
        req = err.request or {}
        if err.unsafe and not req.get("allow_pickle"):
            if confirm_pickle(self.parent, str(req.get("network")), err.message):
                self.model.selection.update({"allow_pickle": True})
                self.controller.prepare(self.params.current_request())
                return
            self._revert_problem()
            self.status_bar.showMessage("Pickled model not loaded", 5000)
            return
        if err.exc_type == "InputShapeNeededError" and not req.get("input_shape"):
            # the network stays chosen: the shape typed next prepares it (a revert would
            # put the typed shape on the network before, which fixes its own)
            self.network_dock.raise_()  # the field the user types in, in view
            self.panels.network.ask_input_shape(err.message)
            self.status_bar.showMessage(
                f"{Path(str(req.get('network'))).name} does not fix its input shape: type it "
                "under Input shape", 15000)
            return
        if err.exc_type == "ShapeMismatchError" and self._choose_other_data(err):
            return
        if req.get("network") != (self.view.good_request or {}).get("network"):
            self.panels.network.show_problem(err.message)
        self._revert_problem()
        show_error(self.parent, "Could not prepare the inversion", err.message,
                   detail=err.detail if not err.is_user_error else None,
                   fix=None if err.is_user_error else "Check the file and the parameters.")

    def _choose_other_data(self, err: ErrorInfo) -> bool:
        """Data that no resize can fit to the network (an array or a measured code of
        another shape, a network no bundled dataset fits): the user picks other data for it
        (True) or keeps the problem before (False: reverted by the caller)."""
        req = err.request or {}
        good = self.view.good_request or {}
        own_files = any(req.get(k) for k in ("image", "truth", "data"))
        choices = [("image", "Open an image…")]
        if own_files:
            choices.append(("dataset", "Use a dataset sample"))
        new_network = req.get("network") != good.get("network")
        keep = Path(str(good.get("network") or "")).name if new_network else ""
        choices.append(("keep", f"Keep {keep}" if keep else "Keep the data before"))
        answer = dialogs.ask_choice(
            self.parent, "The data does not fit the network",
            f"{err.message}\n\nAn image you open is resized to the network's input.",
            choices)
        if answer == "image":
            path = self._pick_data("Open an image for this network")
            if path:
                self.open_data_file("image", path)
                return True
        elif answer == "dataset":
            self.panels.data.set_values({"image": None, "truth": None, "data": None})
            self.params.sync_request()
            self.controller.prepare(self.params.current_request())
            return True
        self._revert_problem()
        self.status_bar.showMessage("Kept the network and data before", 6000)
        return True

    def _revert_problem(self) -> None:
        """Show the last network/data that prepared fine again (or keep the defaults)."""
        good = self.view.good_request
        if good is None:
            return
        # the feature prior too: one that does not fit the network is refused with it
        back = {k: good.get(k) for k in (*PROBLEM_KEYS, "feature_prior") if k in good}
        self.model.selection.update(back)  # the panels follow the model
        # the data panel's splits and thumbnails follow the dataset put back
        self.inputs.show_data({k: back[k] for k in ("dataset", "split", "index") if k in back})
        self.params.sync_request()

    # ---- data -----------------------------------------------------------------------------
    def _pick_data(self, title: str) -> str | None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self.parent, title, last_dir("data"),
                                                        IMAGE_FILTER)
        if path:
            remember_dir("data", path)
        return path or None

    def open_image_dialog(self) -> None:
        path = self._pick_data("Open a ground-truth image or array")
        if path:
            self.open_data_file("image", path)

    def open_data_dialog(self) -> None:
        path = self._pick_data("Load a measured network output y (NPY)")
        if path:
            self.open_data_file("data", path)

    def open_data_file(self, key: str, path: str) -> None:
        """Use ``path`` as ground truth (``image``: arrays go to ``truth``) or measured y."""
        if key == "image" and Path(path).suffix.lower() in (".npy", ".npz"):
            key = "truth"
        problem = degenerate_image(path) if key == "image" else None
        if problem is not None:
            show_error(self.parent, "Not an image to invert", problem)
            return
        remember_dir("data", path)
        self.panels.data.set_file(key, path)
        self.params.flush_changes()

    def open_path(self, path: str) -> None:
        """Route a dropped/command-line file by its suffix."""
        suffix = Path(path).suffix.lower()
        if suffix == SESSION_SUFFIX:
            self.open_session(path)
        elif suffix in NETWORK_SUFFIXES:
            self.open_network(path)
        elif suffix in IMAGE_SUFFIXES:
            self.open_data_file("image", path)
        else:
            show_error(self.parent, "Unknown kind of file", f"{path}: lbi does not know what to do "
                       f"with '{suffix or 'no suffix'}' files.",
                       fix=f"Drop a network ({', '.join(NETWORK_SUFFIXES[:4])}, …), an image "
                           f"({', '.join(IMAGE_SUFFIXES[:4])}, …) or a {SESSION_SUFFIX} file.")

    # ---- sessions -------------------------------------------------------------------------
    def _session_window_state(self) -> dict[str, Any]:
        """What a session adds to the model from the window: widget settings, the curves and
        the iterate on screen."""
        return {"request": self.params.current_request(),
                "gui": {**self.panels.reg.gui_state(), "levels": list(self.image_grid.levels()),
                        "colour_map": self.image_grid.tools.lut.currentData()},
                "curves": self.controller.curves, "shown": self.image_grid.iterate}

    def session_state(self) -> sessions.SessionState:
        return self.model.session_state(**self._session_window_state())

    def save_session(self) -> bool:
        if not self.model.session_path:
            return self.save_session_as()
        return self.save_session_to(self.model.session_path, confirmed=True)

    def save_session_as(self) -> bool:
        path, _ = QtWidgets.QFileDialog.getSaveFileName(
            self.parent, "Save session",
            str(Path(last_dir("session")) / f"session{SESSION_SUFFIX}"), SESSION_FILTER)
        if not path:
            return False
        if not path.endswith(SESSION_SUFFIX):
            path += SESSION_SUFFIX
        return self.save_session_to(path, confirmed=True)  # the file dialog asked already

    def save_session_to(self, path: str, confirmed: bool = False) -> bool:
        """Write the session; asks before replacing a file unless ``confirmed``."""
        if Path(path).exists() and not confirmed and not confirm_overwrite(self.parent, [path]):
            return False
        try:
            self.model.save(path, **self._session_window_state())  # then every run is saved
        except (OSError, LbiError, TypeError) as exc:
            show_error(self.parent, "Could not save the session", f"{path}: {exc}",
                       fix="Choose a folder you can write to, with free space.")
            return False
        remember_dir("session", path)
        add_recent(path)
        self.update_recent_menu()
        self.set_title(Path(path).name)  # Qt adds " — lbi"
        self.status_bar.showMessage(f"Session saved to {path}", 4000)
        return True

    def open_session_dialog(self) -> None:
        path, _ = QtWidgets.QFileDialog.getOpenFileName(self.parent, "Open session",
                                                        last_dir("session"), SESSION_FILTER)
        if path:
            self.open_session(path)

    def open_session(self, path: str) -> bool:
        """Read a session completely, then replace the window's state with it (after asking
        about runs not saved and a live run, which it would discard)."""
        if not self.may_discard("opening the session"):
            return False
        try:
            # checked completely first; then the model takes the runs (all saved), the
            # request and the session path
            state = self.model.open(path)
        except LbiError as exc:
            show_error(self.parent, "Could not open the session", str(exc))
            return False
        self.controller.abandon()
        self.params.set_request(state.request)  # the panels show it
        self.panels.reg.set_gui_state(state.gui)
        if state.gui.get("levels"):
            self.image_grid.set_levels(tuple(state.gui["levels"]))
        self.controller.adopt_history(state.curves, [r.run_id for r in state.runs])
        if state.curves is not None:
            self.curves.set_run(state.curves)
        else:
            self.curves.clear()
        self.view.shown_result = state.runs[-1] if state.runs else None
        restore_view(state, self.view.shown_result, self.image_grid, self.panels.reg,
                     self.status_reason)
        self.view.restoring = True  # the next prepare must not clear the restored iterate
        remember_dir("session", path)
        add_recent(path)
        self.update_recent_menu()
        self.set_title(Path(path).name)  # Qt adds " — lbi"
        if self.controller.engine_info is not None:
            self.controller.prepare(self.params.current_request())
        for note in state.warnings:  # e.g. the file asked to run model code: ignored
            self.status_bar.showMessage(note, 20000)
        return True

    def update_recent_menu(self) -> None:
        """File → Open recent: sessions, networks, images and measured data, newest first."""
        menu = self.recent_menu
        menu.clear()
        openers = {"sessions": self.open_session, "networks": self.open_network,
                   "images": lambda p: self.open_data_file("image", p),
                   "data": lambda p: self.open_data_file("data", p)}
        for kind, opener in openers.items():
            paths = recent_files(kind)
            if not paths:
                continue
            if menu.actions():
                menu.addSeparator()
            menu.addSection(RECENT_TITLES[kind])
            for path in paths:
                act = menu.addAction(Path(path).name)
                act.setToolTip(path)
                act.setData(kind)
                act.triggered.connect(lambda _c=False, p=path, o=opener: o(p))
        menu.setEnabled(bool(menu.actions()))

    def remember_opened(self, request: dict[str, Any] | None) -> None:
        """Files of a problem that prepared fine join File → Open recent."""
        request = request or {}
        changed = False
        network = str(request.get("network") or "")
        if network and Path(network).is_absolute():
            add_recent(network, "networks")
            changed = True
        for key, kind in (("image", "images"), ("truth", "images"), ("data", "data")):
            if request.get(key):
                add_recent(str(request[key]), kind)
                changed = True
        if changed:
            self.update_recent_menu()

    def load_run_parameters(self, run: RunResult) -> None:
        """Put a finished run's parameters on screen ("load these parameters")."""
        if self.controller.running:
            self.status_bar.showMessage("Stop the running inversion first", 4000)
            return
        self.params.apply_request(dict(run.request))
        self.status_bar.showMessage(f"Parameters of run #{run.run_id} loaded", 4000)
