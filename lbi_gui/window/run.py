"""Run control and live display for the main window (a mixin of MainWindow)."""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np

from lbi_gui.dialogs.messages import confirm, show_error
from lbi_gui.model.runs import RunResult
from lbi_gui.model.selection import same_sample
from lbi_gui.params import (
    METHOD_LABELS,
    METHODS,
    PRIOR_METHODS,
    STALE_KEYS,
    describe_change,
    feature_prior_available,
)
from lbi_gui.widgets.run_table import CANCEL_TEXT, RUN_ALL_TEXT

#: Seconds between two curve redraws during a run (six plots, the costliest redraw).
CURVES_INTERVAL = 0.25
#: Seconds between two image redraws during a run (the status line: every update).
IMAGES_INTERVAL = 0.1
#: At most this many auxiliary-variable views are built ahead of a run.
AUX_RESERVE_MAX = 8

STATE_TEXT = {"booting": "Starting engine…", "idle": "Ready", "preparing": "Preparing…",
              "running": "Running", "paused": "Paused"}


class RunMixin:
    """Run, Pause/Resume, Stop, Finish now, Reset, Run all; draws what the worker sends."""

    # ---- commands -------------------------------------------------------------------------
    def run(self) -> None:
        """Start a fresh run with the current parameters (Ctrl+R); a run in progress is
        discarded only when the user says so."""
        self.flush_changes()
        if self.controller.running and not confirm(
                self, "Discard the running inversion?",
                "A run is in progress. Start a new run and discard this one?\n\n"
                "(Finish now keeps the current iterate as a result instead.)",
                yes="Discard and run"):
            return
        if self.controller.engine_info is None:
            # Queued: the run begins by itself once the engine has loaded and prepared.
            self._autorun = True
            self._update_actions()
            return
        self._fresh_run = True  # old curves stay until the new run reports (it may fail)
        self.shown_result = None
        self.controller.start(self.current_request())
        self.progress.setMaximum(max(1, int(self.current_request()["max_iter"])))
        self._update_actions()

    def toggle_pause(self) -> None:
        self.controller.toggle_pause()
        self._update_actions()

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
        self.shown_result = None
        self.status_iter.setText("k = —")
        self.status_speed.setText("— it/s")
        self.status_time.setText("0.0 s")
        self.status_reason.setText("")
        self.progress.setValue(0)

    def run_all_methods(self) -> None:
        """Run every method on the current sample; each finished run lands in the table."""
        self.flush_changes()
        if self.controller.engine_info is None:
            return
        self._fresh_run = True
        request = self.current_request()
        # auto repeats another method, pdhg is an alias of one-layer
        methods = [m for m, _label in METHODS if m not in ("auto", "pdhg")]
        if self.info is not None and len(self.info.layers) == 1:
            methods.remove("layerwise")  # no stages: it would repeat one-layer
        if self.info is not None and len(self.info.layers) > 1:
            methods.remove("one-layer")  # inverts one layer; the others cover deep networks
            if not feature_prior_available(str(request.get("network")),
                                           request.get("feature_prior")):
                # refused before running rather than run to return noise (issue #23)
                methods = [m for m in methods if m not in PRIOR_METHODS]
        self.controller.run_all(request, methods)
        self.docks["runs"].raise_()

    # ---- display of a run -----------------------------------------------------------------
    def _on_view_update(self, prog: Any) -> None:
        if getattr(self, "_fresh_run", False):
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
        if now - getattr(self, "_images_drawn", 0.0) >= IMAGES_INTERVAL:
            self._images_drawn = now
            self.image_grid.set_iterate(prog.x_display, prog.iteration, psnr)
            self.aux_strip.set_aux(prog.aux_display)
        if now - getattr(self, "_curves_drawn", 0.0) >= CURVES_INTERVAL:
            self._curves_drawn = now
            self.curves.update_curves(curves, live_until=self._expected_end())
        self._update_status(prog.iteration, prog.stage)

    def _expected_end(self) -> int:
        """The iteration the run stops at if nothing else stops it (max_iter is the whole
        run's budget: warm restarts continue it)."""
        return max(1, int((self.controller.run_request or {}).get("max_iter", 1)))

    def _update_status(self, iteration: int, stage: str = "") -> None:
        c = self.controller
        self.status_iter.setText(f"k = {iteration}" + (f" ({stage})" if stage else ""))
        self.status_speed.setText(f"{c.iterations_per_second:,.0f} it/s")
        elapsed = c.curves.arrays()["elapsed"][-1] if len(c.curves) else 0.0
        self.status_time.setText(f"{elapsed:.1f} s")
        max_iter = self._expected_end()
        self.progress.setMaximum(max_iter)
        self.progress.setValue(min(max_iter, iteration))

    def _on_restart_marked(self, iteration: int, what: str) -> None:
        self.curves.mark_restart(iteration, what)
        self.statusBar().showMessage(f"Warm restart at k = {iteration}: {what}", 4000)

    def _on_run_finished(self, result: RunResult) -> None:
        # The controller does not flush its last view update first: everything it would
        # draw is drawn here once (a double redraw made Stop look slow under load).
        if getattr(self, "_fresh_run", False):
            self._fresh_run = False
            self.curves.clear()
        latest = self.controller.latest
        if latest is not None and latest.run_id == result.run_id:
            self.aux_strip.set_aux(latest.aux_display)
        self.image_grid.set_iterate(result.x_display, result.iterations,
                                    _num(result.metrics.get("psnr")))
        self.curves.update_curves(result.curves)
        self._update_status(result.iterations)
        self.status_reason.setText(f"stopped: {result.stop_reason}")
        if result.request.get("alpha") == "auto" and result.metrics.get("alpha") is not None \
                and result.metrics.get("alpha_rule", "fixed") not in ("fixed", "given"):
            # Auto α: show its choice (a typed α is never overwritten by what a method did)
            self.reg_panel.show_chosen_alpha(float(result.metrics["alpha"]))
            self.status_reason.setText(f"stopped: {result.stop_reason}; α = "
                                       f"{float(result.metrics['alpha']):.3g} "
                                       f"({result.metrics['alpha_rule']})")
        if result.user_action != "stop":
            self.run_table.add(result)
            self.shown_result = result
        self.set_stale(None)
        self.refresh_stale()
        self._update_actions()

    def _on_run_failed(self, err: Any) -> None:
        self._update_actions()
        self.status_reason.setText("run failed")
        show_error(self, "The run failed", err.message, detail=err.detail,
                   fix=None if err.is_user_error else
                   "Try the safe step sizes, a smaller α or another method.")

    def _on_queue_progress(self, number: int, total: int, method: str) -> None:
        """Run all: which method of how many is running now."""
        self.queue_text = f"Run all {number}/{total}: {METHOD_LABELS.get(method, method)}"
        self.run_table.run_all.setText(CANCEL_TEXT)
        self._update_actions()

    def run_all_or_cancel(self) -> None:
        """The runs table's button: Run all, or Cancel while a Run all is going."""
        if self.controller.queue_active:
            self.controller.cancel_queue()
            self.statusBar().showMessage("Run all cancelled", 4000)
        else:
            self.run_all_methods()

    def _on_queue_done(self, errors: list[Any]) -> None:
        self.queue_text = ""
        self.run_table.run_all.setText(RUN_ALL_TEXT)
        self._update_actions()
        if errors:
            lines = "\n".join(f"• {e.request.get('method') if e.request else '?'}: {e.message}"
                              for e in errors)
            show_error(self, "Some methods could not run", lines,
                       detail="\n\n".join(e.detail for e in errors))
        else:
            self.statusBar().showMessage("All methods finished; see the Runs table", 5000)

    def _overlay_selected(self) -> None:
        """Two or more runs selected in the table: their curves overlaid on the plots."""
        selected = self.run_table.selected()
        self.curves.overlay.set_runs(selected if len(selected) >= 2 else [])

    def show_result(self, result: RunResult) -> None:
        """Show a finished run from the table (image and curves)."""
        if self.controller.running:
            return
        self.shown_result = result
        current = self.info.request if self.info is not None else {}
        own_problem = same_sample(current, result.request, noise=True)
        if result.truth is not None or not own_problem:
            # The run's own ground truth (None: unknown), never the current network's.
            self.image_grid.set_truth(result.truth)
            if not own_problem:
                self.image_grid.set_decoder(None)
        self.image_grid.set_iterate(result.x_display, result.iterations,
                                    _num(result.metrics.get("psnr")))
        self.curves.set_run(result.curves)
        self.status_reason.setText(f"run #{result.run_id}: {result.stop_reason}")
        self.set_stale(None)
        self.refresh_stale()

    # ---- problem display ------------------------------------------------------------------
    def _on_prepared(self, info: Any, from_run: bool) -> None:
        """A problem is ready: show truth, decoder output, layers, δ; clear stale results."""
        changed_problem = self.info is None or not from_run and self._problem_differs(info)
        self.info = info
        self.good_request = dict(info.request) if info.request else self.current_request()
        self.remember_opened(self.good_request)
        self.network_panel.clear_problem()
        self.network_panel.show_network(info.network_name, info.layers, info.card,
                                        info.input_shape, info.output_shape)
        self.image_grid.set_truth(info.truth)
        self.image_grid.set_decoder(info.decoder, info.decoder_psnr)
        self.noise_panel.show_delta(info.delta, info.delta_squared, info.noise_norm)
        self.reg_panel.set_delta(info.delta)
        self.reg_panel.set_layer_count(max(0, len(info.layers) - 1))
        self.solver_panel.set_layer_count(len(info.layers))
        self._drop_disabled_method(len(info.layers))
        # Views for the auxiliary variables x_1 … x_{L−1} are built now, not at the run's
        # first update (that stalled the event loop for ~70 ms as the run started).
        self.aux_strip.reserve(min(AUX_RESERVE_MAX, max(0, len(info.layers) - 1)))
        self.curves.set_references(info.decoder_psnr, info.noise_norm)
        self.data_panel.show_preprocessing(_preprocessing_text(info))
        notes = list(getattr(info, "warnings", None) or [])
        if notes and (not from_run or notes != getattr(self, "_notes_shown", [])):
            # What the engine changed in the user's input (e.g. clipped data) must be seen.
            self.statusBar().showMessage("Note: " + " ".join(notes), 15000)
        self._notes_shown = notes
        restoring, self._restoring = getattr(self, "_restoring", False), False
        if changed_problem and not from_run and not self.controller.running and not restoring:
            self.image_grid.set_iterate(None)
            self.aux_strip.clear()
        self.status_state.setText(STATE_TEXT.get(self.controller.state, ""))
        if self._autorun and not from_run:
            self._autorun = False
            self.run()
        self._update_actions()

    def _drop_disabled_method(self, n_layers: int) -> None:
        """A method the new network cannot use (PDHG on a multi-layer network) falls back to
        joint, with a note, instead of failing at the next Run."""
        if n_layers == 1 and self.solver_panel.values()["method"] == "layerwise":
            self.solver_panel.set_values({"method": "auto"})
            self.reg_panel.set_method("auto")
            self._request = self.current_request()
            self.statusBar().showMessage(
                "Layer-wise needs at least two layers; this network has one: method set to "
                "auto (one layer)", 8000)
        if n_layers > 1 and self.solver_panel.values()["method"] == "pdhg":
            self.solver_panel.set_values({"method": "joint"})
            self.reg_panel.set_method("joint")
            self._request = self.current_request()
            self.statusBar().showMessage(
                f"PDHG inverts a single layer; this network has {n_layers}: method set to "
                "joint", 8000)

    # ---- stale results ----------------------------------------------------------------------
    def refresh_stale(self) -> None:
        """Mark the result on screen stale when the parameters on screen are not its own."""
        shown = self.shown_result
        if shown is None or self.controller.running:
            return
        change = describe_change(shown.request, self.current_request(), STALE_KEYS)
        self.set_stale(change or None, shown.run_id)

    def set_stale(self, change: str | None, run_id: int | None = None) -> None:
        """Dim the iterate, error and curves and say why (``change``), or undo that (None)."""
        self.image_grid.set_stale(change is not None)
        self.curves.set_stale(None if change is None else
                              f"Curves of run #{run_id}; parameters changed since: {change}. "
                              "Run to update.")
        if change is not None:
            self.status_reason.setText(f"stale: {change}")

    def _problem_differs(self, info: Any) -> bool:
        return not same_sample(self.info.request if self.info is not None else {},
                               info.request)

    def _update_actions(self) -> None:
        c = self.controller
        self.actions_.switch.setEnabled(self.solver_panel.switch.isEnabled())
        self.actions_.switch.setToolTip(self.solver_panel.switch.toolTip())
        ready = c.engine_info is not None and self.info is not None
        a = self.actions_
        # Run is enabled while the engine starts: a run asked for then is queued.
        a.run.setEnabled(not getattr(self, "_boot_failed", False))
        a.run_all.setEnabled(ready and not c.running)
        a.pause.setEnabled(c.running)
        a.pause.setText("Resume" if c.paused else "Pause")
        a.stop.setEnabled(c.running)
        a.finish.setEnabled(c.running)
        exportable = bool(self.run_table.runs) or self.shown_result is not None
        a.export.setEnabled(exportable)
        a.export.setToolTip("Export a finished run: images, curves, result.json (Ctrl+E)"
                            if exportable else "Nothing to export yet: finish a run first "
                            "(a run in the Runs table, or shown from a session)")
        text = STATE_TEXT.get(c.state, c.state)
        if c.queue_active and getattr(self, "queue_text", ""):
            text = f"{text} — {self.queue_text}"
        if c.state == "booting" and self._autorun:
            text = "Starting engine… (the run begins by itself)"
        self.status_state.setText(text)


def _num(v: Any) -> float | None:
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def _preprocessing_text(info: Any) -> str:
    """What was done to the data before inversion, in one or two lines."""
    shape = "×".join(str(s) for s in info.input_shape)
    parts = [f"network input {shape}"]
    if info.truth is not None:
        t = np.asarray(info.truth)
        parts.append(f"ground truth {t.shape[-2]}×{t.shape[-1]}, values "
                     f"[{float(t.min()):.3g}, {float(t.max()):.3g}]")
    pre = info.preprocessing or {}
    offset, scale = float(pre.get("offset", 0.0)), float(pre.get("scale", 1.0))
    if offset or scale != 1.0:
        parts.append(f"network input = (x − {offset:.4g}) / {scale:.4g}")
    req = info.request or {}
    if req.get("data"):
        parts.append("measured y used as is (no noise added)")
    elif req.get("noise_std"):
        parts.append(f"y^δ = output + N(0, {float(req['noise_std']):.3g}²), clipped to dom Ψ")
    text = "; ".join(parts)
    notes = list(getattr(info, "warnings", None) or [])
    return text + "".join(f"\n⚠ {note}" for note in notes)
