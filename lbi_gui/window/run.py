"""Run control and live display: the main window's collaborator for runs."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from PySide6 import QtWidgets

from lbi_engine.results.verdict import finite_number
from lbi_gui.dialogs.messages import confirm, show_error
from lbi_gui.engine.messages import ErrorInfo, PreparedInfo, Progress
from lbi_gui.model import AppModel
from lbi_gui.model.runs import RunResult
from lbi_gui.model.selection import same_sample
from lbi_gui.model.view_state import ViewState
from lbi_gui.params import (
    METHOD_LABELS,
    METHODS,
    PRIOR_METHODS,
    STALE_KEYS,
    describe_change,
    feature_prior_available,
)
from lbi_gui.widgets.run_table import CANCEL_TEXT, RUN_ALL_TEXT
from lbi_gui.window.actions import STATE_TEXT
from lbi_gui.window.controller import RunController
from lbi_gui.window.overlays import RunOverlays
from lbi_gui.window.parts import Panels, StatusWidgets, Views
from lbi_gui.window.run_text import concern_texts, preprocessing_text

#: Seconds between two curve redraws during a run (six plots, the costliest redraw).
CURVES_INTERVAL = 0.25
#: Seconds between two image redraws during a run (the status line: every update).
IMAGES_INTERVAL = 0.1
#: At most this many auxiliary-variable views are built ahead of a run.
AUX_RESERVE_MAX = 8

class RunView:
    """Run, Pause/Resume, Stop, Finish now, Reset, Run all; draws what the worker sends.

    It draws on the views of a run, the status bar and the panels that describe the problem
    (δ, layers, the α chosen); it writes what is on screen to ``view`` and reads the request
    from ``model``'s selection. ``flush_changes`` applies parameter edits still pending (a
    run starts from what the panels show).
    """

    def __init__(self, view: ViewState[PreparedInfo], model: AppModel, controller: RunController,
                 panels: Panels, views: Views, status: StatusWidgets,
                 docks: Mapping[str, QtWidgets.QDockWidget],
                 flush_changes: Callable[[], None], parent: QtWidgets.QWidget) -> None:
        self.view = view
        self.selection = model.selection
        self.controller = controller
        self.panels = panels
        self.image_grid, self.aux_strip = views.image_grid, views.aux_strip
        self.curves, self.run_table = views.curves, views.run_table
        self.status = status
        self.docks = docks
        self.flush_changes = flush_changes
        #: The parent of the dialogs opened here.
        self.parent = parent
        #: A run was started: its first update clears the previous run's curves (they stay
        #: until then, as the new run may fail).
        self._fresh_run = False
        # perf_counter() of the last image / curve redraw during a run (throttling)
        self._images_drawn = 0.0
        self._curves_drawn = 0.0
        #: The engine's notes shown for the problem on screen (said once per problem).
        self._notes_shown: list[str] = []
        self.overlays = RunOverlays(views.run_table, views.curves)

    def current_request(self) -> dict[str, Any]:
        """The request on screen (the model's selection)."""
        return dict(self.selection.request)

    # ---- commands -------------------------------------------------------------------------
    def run(self) -> None:
        """Start a fresh run with the current parameters (Ctrl+R); a run in progress is
        discarded only when the user says so."""
        self.flush_changes()
        if self.controller.running and not confirm(
                self.parent, "Discard the running inversion?",
                "A run is in progress. Start a new run and discard this one?\n\n"
                "(Finish now keeps the current iterate as a result instead.)",
                yes="Discard and run"):
            return
        if self.controller.engine_info is None:
            # Queued: the run begins by itself once the engine has loaded and prepared.
            self.view.autorun = True
            return
        self._fresh_run = True  # old curves stay until the new run reports (it may fail)
        self.view.shown_result = None
        if self.docks["runs"].visibleRegion().isEmpty():
            self.docks["curves"].raise_()  # the inputs' tabs give way to the live curves
        self.controller.start(self.current_request())
        # the last run's "stopped by user" / "stale" / concerns must not stand beside this one
        self._clear_status("k = 0 · start", "running")

    def toggle_pause(self) -> None:
        self.controller.toggle_pause()

    def stop(self) -> None:
        self.controller.stop()

    def finish_now(self) -> None:
        self.controller.finish_now()

    def reset(self) -> None:
        """Stop and clear the iterate, auxiliary variables and curves."""
        self.controller.reset()
        self.curves.clear()
        self.aux_strip.clear()
        self.image_grid.set_iterate(None)
        self.view.shown_result = None
        self.status.speed.setText("— it/s")
        self._clear_status("k = —", "")

    def _clear_status(self, iteration: str, reason: str) -> None:
        """The status bar as a run begins (or after Reset): nothing of the last run left."""
        self.status.reason.setText(reason)
        self.status.reason.setToolTip("")
        self.status.iteration.setText(iteration)
        self.status.time.setText("0.0 s")
        self.status.progress.setRange(0, 1000)
        self.status.progress.setValue(0)

    def run_all_methods(self) -> None:
        """Run every method on the current sample; each finished run lands in the table."""
        self.flush_changes()
        if self.controller.engine_info is None:
            return
        self._fresh_run = True
        request = self.current_request()
        # auto repeats another method, pdhg is an alias of one-layer
        methods = [m for m, _label in METHODS if m not in ("auto", "pdhg")]
        if self.view.info is not None and len(self.view.info.layers) == 1:
            methods.remove("layerwise")  # no stages: it would repeat one-layer
        if self.view.info is not None and len(self.view.info.layers) > 1:
            methods.remove("one-layer")  # inverts one layer; the others cover deep networks
            if not feature_prior_available(str(request.get("network")),
                                           request.get("feature_prior")):
                # refused before running rather than run to return noise
                methods = [m for m in methods if m not in PRIOR_METHODS]
        self.controller.run_all(request, methods)
        self.docks["runs"].raise_()

    # ---- display of a run -----------------------------------------------------------------
    def on_view_update(self, prog: Progress) -> None:
        if self._fresh_run:
            self._fresh_run = False
            self.curves.clear()
            self.set_stale(None)
        curves = self.controller.curves
        psnr = None
        if len(curves):
            psnr = curves.arrays()["psnr"][-1]
            psnr = None if math.isnan(psnr) else float(psnr)
        # Painting runs Python (pyqtgraph) holding the GIL the solver thread needs between
        # torch calls, so during a run images are redrawn at ≤ 10 Hz and curves at ≤ 4 Hz;
        # the status line follows every update (≤ 30 Hz) and the final state is always drawn.
        now = time.perf_counter()
        if now - self._images_drawn >= IMAGES_INTERVAL:
            self._images_drawn = now
            self.image_grid.set_iterate(prog.x_display, prog.iteration, psnr)
            self.aux_strip.set_aux(prog.aux_display)
        if now - self._curves_drawn >= CURVES_INTERVAL:
            self._curves_drawn = now
            self.curves.update_curves(curves, live_until=self._expected_end())
        self._update_status(prog.iteration, prog.stage)

    def _expected_end(self) -> int:
        """The iteration the run stops at if nothing else stops it (max_iter is the whole
        run's budget: warm restarts continue it)."""
        return max(1, int((self.controller.run_request or {}).get("max_iter", 1)))

    def _update_status(self, iteration: int, stage: str = "", done: bool = False) -> None:
        """Stage, iterations, time and what is left (the engine's estimate, through
        :mod:`lbi_gui.model.progress`); the bar fills with k / max-iter only for a run that
        can only stop there."""
        c = self.controller
        prog = c.progress.status()
        self.status.iteration.setText(f"k = {iteration}" if done else prog.iteration_text())
        self.status.speed.setText(f"{c.iterations_per_second:,.0f} it/s")
        self.status.time.setText(f"{prog.elapsed:.1f} s" if done else prog.time_text())
        bar = self.status.progress
        if done or prog.fraction is not None:
            bar.setRange(0, 1000)
            bar.setValue(1000 if done else round(1000 * float(prog.fraction or 0.0)))
        elif bar.maximum() != 0:
            bar.setRange(0, 0)  # busy: the run stops when its tolerance is met

    def on_restart_marked(self, iteration: int, what: str) -> None:
        self.curves.mark_restart(iteration, what)
        self.status.bar.showMessage(f"Warm restart at k = {iteration}: {what}", 4000)

    def on_run_finished(self, result: RunResult) -> None:
        # The controller does not flush its last view update first: everything it would
        # draw is drawn here once (a double redraw made Stop look slow under load).
        if self._fresh_run:
            self._fresh_run = False
            self.curves.clear()
        latest = self.controller.latest
        if latest is not None and latest.run_id == result.run_id:
            self.aux_strip.set_aux(latest.aux_display)
        self.image_grid.set_iterate(result.x_display, result.iterations,
                                    finite_number(result.metrics.psnr))
        self.curves.update_curves(result.curves)
        self._update_status(result.iterations, done=True)
        self.status.reason.setText(f"stopped: {result.stop_reason}")
        chosen = result.metrics.alpha
        if result.request.get("alpha") == "auto" and chosen is not None \
                and result.metrics.alpha_rule not in ("fixed", "given"):
            # Auto α: show its choice (a typed α is never overwritten by what a method did)
            self.panels.reg.show_chosen_alpha(float(chosen))
            self.status.reason.setText(f"stopped: {result.stop_reason}; α = "
                                       f"{float(chosen):.3g} ({result.metrics.alpha_rule})")
        self._say_concerns(result)
        if result.user_action != "stop":
            self.run_table.add(result)
            self.view.shown_result = result
        self.set_stale(None)
        self.refresh_stale()

    def _say_concerns(self, result: RunResult) -> None:
        """A result that is flat, over-regularised, capped or off its α target is never
        shown as a plain success (:func:`concern_texts`)."""
        texts = concern_texts(result) if result.user_action != "stop" else None
        self.status.reason.setToolTip(texts[1] if texts else "")
        if texts:
            self.status.reason.setText(texts[0])
            self.status.bar.showMessage(texts[2], 30000)

    def on_boot_failed(self, err: ErrorInfo) -> None:
        self.view.boot_failed = True
        self.view.autorun = False
        self.status.state.setText("Engine not available")
        show_error(self.parent, "The numerical engine could not be loaded", err.message,
                   detail=err.detail, fix="Check the installation (pip install -e .) and "
                                          "restart lbi-gui.")

    def on_run_failed(self, err: ErrorInfo) -> None:
        self.status.reason.setText("run failed")
        show_error(self.parent, "The run failed", err.message, detail=err.detail,
                   fix=None if err.is_user_error else
                   "Try the safe step sizes, a smaller α or another method.")

    def on_queue_progress(self, number: int, total: int, method: str) -> None:
        """Run all: which method of how many is running now."""
        self.view.queue_text = f"Run all {number}/{total}: {METHOD_LABELS.get(method, method)}"
        self.run_table.run_all.setText(CANCEL_TEXT)

    def run_all_or_cancel(self) -> None:
        """The runs table's button: Run all, or Cancel while a Run all is going."""
        if self.controller.queue_active:
            self.controller.cancel_queue()
            self.status.bar.showMessage("Run all cancelled", 4000)
        else:
            self.run_all_methods()

    def on_queue_done(self, errors: list[ErrorInfo]) -> None:
        self.view.queue_text = ""
        self.run_table.run_all.setText(RUN_ALL_TEXT)
        if errors:
            lines = "\n".join(f"• {e.request.get('method') if e.request else '?'}: {e.message}"
                              for e in errors)
            show_error(self.parent, "Some methods could not run", lines,
                       detail="\n\n".join(e.detail for e in errors))
        else:
            self.status.bar.showMessage("All methods finished; see the Runs table", 5000)

    def show_result(self, result: RunResult) -> None:
        """Show a finished run from the table (image and curves)."""
        if self.controller.running:
            return
        self.view.shown_result = result
        current = self.view.info.request if self.view.info is not None else {}
        own_problem = same_sample(current, result.request, noise=True)
        if result.truth is not None or not own_problem:
            # The run's own ground truth (None: unknown), never the current network's.
            self.image_grid.set_truth(result.truth)
            if not own_problem:
                self.image_grid.set_decoder(None)
        self.image_grid.set_iterate(result.x_display, result.iterations,
                                    finite_number(result.metrics.psnr))
        self.curves.set_run(result.curves)
        self.status.reason.setText(f"run #{result.run_id}: {result.stop_reason}")
        self.set_stale(None)
        self.refresh_stale()

    # ---- problem display ------------------------------------------------------------------
    def on_loading(self, request: dict[str, Any]) -> None:
        """A prepare or run loads ``request``: the network panel says so for a new network."""
        network = str(request.get("network") or "")
        info = self.view.info
        if network and (info is None or network != info.request.get("network")):
            self.panels.network.show_loading(Path(network).name)

    def describe_prepared(self, _err: object = None) -> None:
        """The panel describes the network prepared last again (a new one failed to load)."""
        info = self.view.info
        if info is not None and self.panels.network.loading:
            self.panels.network.show_network(info.network_name, info.layers, info.card,
                                             info.input_shape, info.output_shape)

    def on_prepared(self, info: PreparedInfo, from_run: bool) -> None:
        """A problem is ready: show truth, decoder output, layers, δ; clear stale results."""
        changed_problem = self.view.info is None or not from_run and self._problem_differs(info)
        new_network = self.view.info is not None and \
            self.view.info.request.get("network") != info.request.get("network")
        self.view.info = info
        self.view.good_request = dict(info.request) if info.request else self.current_request()
        self.panels.network.clear_problem()
        self.panels.network.show_network(info.network_name, info.layers, info.card,
                                         info.input_shape, info.output_shape)
        self.image_grid.set_truth(info.truth)
        self.image_grid.set_decoder(info.decoder, info.decoder_psnr)
        self.panels.noise.show_delta(info.delta, info.delta_squared, info.noise_norm)
        self.panels.reg.set_delta(info.delta)
        self.panels.reg.set_layer_count(max(0, len(info.layers) - 1), fresh=new_network)
        self.panels.solver.set_layer_count(len(info.layers))
        self._drop_disabled_method(len(info.layers))
        # Views for the auxiliary variables x_1 … x_{L−1} are built now, not at the run's
        # first update (that stalled the event loop for ~70 ms as the run started).
        self.aux_strip.reserve(min(AUX_RESERVE_MAX, max(0, len(info.layers) - 1)))
        self.curves.set_references(info.decoder_psnr, info.noise_norm)
        self.panels.data.show_preprocessing(preprocessing_text(info))
        notes = list(info.warnings)
        if notes and (not from_run or notes != self._notes_shown):
            # What the engine changed in the user's input (e.g. clipped data) must be seen.
            self.status.bar.showMessage("Note: " + " ".join(notes), 15000)
        self._notes_shown = notes
        restoring, self.view.restoring = self.view.restoring, False
        if changed_problem and not from_run and not self.controller.running and not restoring:
            self.image_grid.set_iterate(None)
            self.aux_strip.clear()
            self.overlays.overlay_runs([])  # another network's runs: not this problem's
        self.status.state.setText(STATE_TEXT.get(self.controller.state, ""))
        if self.view.autorun and not from_run:
            self.view.autorun = False
            self.run()

    def _drop_disabled_method(self, n_layers: int) -> None:
        """A method the new network cannot use (PDHG on a multi-layer network) falls back to
        joint, with a note, instead of failing at the next Run."""
        if n_layers == 1 and self.panels.solver.values()["method"] == "layerwise":
            self.selection.update({"method": "auto"})
            self.status.bar.showMessage(
                "Layer-wise needs at least two layers; this network has one: method set to "
                "auto (one layer)", 8000)
        if n_layers > 1 and self.panels.solver.values()["method"] == "pdhg":
            self.selection.update({"method": "joint"})
            self.status.bar.showMessage(
                f"PDHG inverts a single layer; this network has {n_layers}: method set to "
                "joint", 8000)

    # ---- stale results ----------------------------------------------------------------------
    def refresh_stale(self) -> None:
        """Mark the result on screen stale when the parameters on screen are not its own."""
        shown = self.view.shown_result
        if shown is None or self.controller.running:
            return
        keys = STALE_KEYS
        if shown.request.get("method") == "layerwise":  # only layer-wise reads the prior
            keys = keys | {"feature_prior"}
        change = describe_change(shown.request, self.current_request(), keys)
        self.set_stale(change or None, shown.run_id)

    def set_stale(self, change: str | None, run_id: int | None = None) -> None:
        """Dim the iterate, error and curves and say why (``change``), or undo that (None)."""
        self.image_grid.set_stale(change is not None)
        self.curves.set_stale(None if change is None else
                              f"Curves of run #{run_id}; parameters changed since: {change}. "
                              "Run to update.")
        if change is not None:
            self.status.reason.setText(f"stale: {change}")

    def _problem_differs(self, info: PreparedInfo) -> bool:
        return not same_sample(self.view.info.request if self.view.info is not None else {},
                               info.request)
