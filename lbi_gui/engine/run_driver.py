"""Qt-free driving of ``lbi_engine`` generators: what the solver thread or process runs.

Why a module of its own: the same logic serves two backends. The thread backend
(:mod:`lbi_gui.engine.worker`) wraps it in a QObject living in a QThread; the process backend
(:mod:`lbi_gui.engine.child`) runs it in a child process that must never import Qt. A run is
"pull records until told otherwise": :class:`RunDriver` pulls, converts what the window needs
into numpy copies and hands them to an ``emit`` callback at most ~30 times per second (every
curve point is kept; only the latest images are sent). Control (pause, stop, finish, warm
restart, shutdown) comes from another thread through methods that only set events and cancel
tokens, so they are safe to call while :meth:`RunDriver.run` is busy. Everything emitted is a
plain dataclass of numpy arrays and Python values, so it pickles across a process boundary.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from lbi_engine.errors import ShapeMismatchError
from lbi_gui import engine as engine_bridge
from lbi_gui.engine.bundles import (  # the cache: tests and the prestart reach it here
    _BUNDLES,
    _BUNDLES_LOCK,
    _bundle_key,
    _keep_bundle,
)
from lbi_gui.engine.messages import (  # re-exported: the records' old import path
    Booted,
    ErrorInfo,
    Event,
    Failed,
    Prepared,
    PreparedInfo,
    Progress,
    ProgressReport,
    RunDone,
    RunJob,
    RunOutcome,
)
from lbi_gui.params import describe_change

#: Minimum seconds between two progress emits (the window redraws at most this often).
EMIT_INTERVAL = 1.0 / 30.0

__all__ = ["EMIT_INTERVAL", "Emit", "ErrorInfo", "PreparedInfo", "Progress", "RunDriver",
           "RunJob", "RunOutcome"]

#: ``emit(event)`` with one of :data:`lbi_gui.engine.messages.EVENTS`: Booted, Prepared,
#: ProgressReport, RunDone or Failed.
Emit = Callable[[Event], None]

#: Warning classes meant for developers (library deprecations), not for the user.
_DEV_WARNINGS = (DeprecationWarning, PendingDeprecationWarning, FutureWarning, ResourceWarning)


def _measured(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _first(t: Any) -> float | None:
    """Sample 0 of a (B,) tensor/array as a float (None stays None)."""
    return None if t is None else float(t.reshape(-1)[0])


def _plain(position: Any) -> dict[str, Any] | None:
    """A record's ``RunPosition`` (stage, point, points_at_most, alpha) as a plain dict."""
    return None if position is None else dataclasses.asdict(position)


class RunDriver:
    """Loads the engine, prepares problems and runs solvers; jobs run in the caller's thread.

    ``load`` returns the engine namespace (:func:`lbi_gui.engine.load_full_engine`); it is
    called lazily by the first job, so a process backend whose child was restarted needs no
    extra boot message before it can prepare or run.
    """

    def __init__(self, emit: Emit, load: Callable[[], Any] | None = None) -> None:
        self._emit = emit
        self._load = load or engine_bridge.load_full_engine
        self._eng: Any = None
        self._lock = threading.Lock()
        self._resume = threading.Event()
        self._resume.set()
        self._token: Any = None
        self._action: str | None = None  # "stop" | "finish" | "restart"
        self._pending: dict[str, Any] | None = None
        self._in_run = False
        self._closing = False
        self._notes: dict[int, list[str]] = {}  # id(prepared) -> its warnings, until _info

    # ---- control, thread-safe --------------------------------------------------------------
    @property
    def closing(self) -> bool:
        return self._closing

    def pause(self) -> None:
        self._resume.clear()

    def resume(self) -> None:
        self._resume.set()

    def request_stop(self, action: str = "stop") -> None:
        """End the current run: "stop" (discard) or "finish" (keep this iterate)."""
        with self._lock:
            self._action = action
            self._pending = None
            if self._token is not None:
                self._token.cancel()
        self._resume.set()

    def request_restart(self, request: dict[str, Any]) -> bool:
        """Restart the running solve warm with ``request``; False if no run is going."""
        with self._lock:
            if not self._in_run or self._action in ("stop", "finish"):
                return False
            self._action, self._pending = "restart", dict(request)
            if self._token is not None:
                self._token.cancel()
        return True

    def shutdown(self) -> None:
        """Make the current job end at the next record and every later job a no-op."""
        self._closing = True
        self.request_stop("stop")

    # ---- jobs, run in the solver thread ----------------------------------------------------
    def _engine(self) -> Any:
        if self._eng is None:
            self._eng = self._load()
        return self._eng

    def boot(self) -> None:
        """Import the engine (torch) in this thread and report what it offers."""
        if self._closing:
            return
        try:
            eng = self._engine()
            info = {"zoo": list(eng.list_zoo()), "datasets": list(eng.list_datasets()),
                    "cuda": bool(eng.cuda_available())}
        except BaseException as exc:  # any failure must reach a dialog
            self._emit(Failed(0, ErrorInfo.from_exc("boot", exc)))
            return
        self._emit(Booted(info))

    def prepare(self, job_id: int, request: dict[str, Any]) -> None:
        if self._closing:
            return
        try:
            self._engine()
            prepared = self._prepare(request)
            info = self._info(prepared)
        except BaseException as exc:
            self._emit(Failed(job_id, ErrorInfo.from_exc("prepare", exc, request)))
            return
        self._emit(Prepared(job_id, info))

    def run(self, job: RunJob, action: str | None = None) -> None:
        """Run ``job`` to its end; ``action`` ("stop"/"finish") was asked before it began."""
        if self._closing:
            return
        with self._lock:
            self._action, self._pending, self._in_run = action, None, True
        (self._resume.clear if job.start_paused and action is None else self._resume.set)()
        request = dict(job.request)
        try:
            eng = self._engine()
            eng.set_threads(max(1, int(request.get("threads") or 1)))
            prepared = self._prepare(request)
            self._emit(Prepared(-1, self._info(prepared)))
            outcome = self._drive(job.run_id, request, prepared)
        except BaseException as exc:
            with self._lock:
                self._in_run, self._token = False, None
            self._emit(Failed(job.run_id, ErrorInfo.from_exc("run", exc, request)))
            return
        self._emit(RunDone(outcome))

    # ---- internals -------------------------------------------------------------------------
    def _drive(self, run_id: int, request: dict, prepared: Any) -> RunOutcome:
        """Pull records, restarting warm on request; returns when the run has ended."""
        eng = self._eng
        elapsed_offset, warm = 0.0, None
        points: list[dict[str, Any]] = []
        restarts: list[tuple[int, str]] = []
        new_info: PreparedInfo | None = None
        last, last_it, last_emit = None, 0, 0.0
        # max_iter is the run's budget: a warm restart continues it instead of starting it
        # again (the engine counts max_iter per segment, so each segment gets what is left).
        budget = int(request.get("max_iter") or 1)
        segments: list[tuple[int, dict[str, Any]]] = [(0, dict(request))]
        while True:
            token = eng.CancelToken()
            with self._lock:
                self._token = token
                if self._action is not None:
                    token.cancel()
            # A warm start continues the engine's iteration count, so k is global; the first
            # record of a segment repeats the restart iteration with the new objective.
            gen = eng.iterate(prepared, cancel=token, warm_start_from=warm)
            try:
                for rec in gen:
                    it = int(rec.iteration)
                    last, last_it = rec, it
                    points.append(self._point(rec, it, elapsed_offset))
                    now = time.perf_counter()
                    if rec.final or token.cancelled or now - last_emit >= EMIT_INTERVAL:
                        self._emit(ProgressReport(self._progress(
                            run_id, points, rec, it, prepared, restarts, new_info)))
                        points, restarts, new_info, last_emit = [], [], None, now
                    if rec.final or token.cancelled:
                        break
                    self._wait_if_paused(token)
                    if token.cancelled:
                        break
            finally:
                gen.close()
            with self._lock:
                action, pending = self._action, self._pending
                if action == "restart":
                    self._action, self._pending = None, None
                if action != "restart" or pending is None or last is None:
                    self._in_run, self._token = False, None
            if action == "restart" and pending is not None and last is not None:
                warm = last.to_numpy()
                elapsed_offset += float(last.elapsed)
                restarts.append((last_it, describe_change(request, pending)))
                budget = int(pending.get("max_iter") or budget)
                request = pending
                segments.append((last_it, dict(request)))
                prepared = self._prepare(dict(request, max_iter=max(1, budget - last_it)))
                new_info = self._info(prepared)
                continue
            break
        if last is None:
            raise RuntimeError("the solver ended without reporting a single iterate")
        if points or restarts:
            self._emit(ProgressReport(self._progress(run_id, points, last, last_it, prepared,
                                                      restarts, new_info)))
        metrics = eng.final_metrics(prepared, last)
        reason = {"stop": "stopped by user", "finish": "finished by user"}.get(action or "")
        x_raw = np.array(last.x[0].detach().cpu().numpy() if hasattr(last.x, "detach")
                         else last.x[0], copy=True)
        req_dict = prepared.request.to_dict() if hasattr(prepared.request, "to_dict") \
            else dict(request)
        req_dict["max_iter"] = budget  # the run's budget, not the last segment's remainder
        return RunOutcome(run_id=run_id, request=req_dict,
                          stop_reason=reason or str(last.stop_reason or "max_iterations"),
                          iterations=last_it, elapsed=elapsed_offset + float(last.elapsed),
                          metrics=metrics, x_raw=x_raw,
                          x_display=np.array(prepared.to_display(last.x[0]), copy=True),
                          aux_display=self._aux(prepared, last), user_action=action,
                          segments=segments)

    def _wait_if_paused(self, token: Any) -> None:
        """Pause = stop pulling records; wake up for resume, cancel or shutdown."""
        while not self._resume.wait(0.05):
            if token.cancelled or self._closing:
                return

    def _prepare(self, request: dict[str, Any]) -> Any:
        """prepare() the request, reusing a loaded network when it did not change."""
        eng = self._eng
        key = _bundle_key(request)
        with _BUNDLES_LOCK:
            bundle = _BUNDLES.get(key)
        try:
            fitted = _fit_data(request, bundle)
        except ShapeMismatchError:  # no data fits: a network that cannot be lifted says
            if bundle is None:  # so first, not a question about data (and is kept loaded)
                from lbi_engine.models.zoo import load_network

                shape = request.get("input_shape")
                _keep_bundle(key, load_network(str(request["network"]), input_shape=tuple(
                    shape) if shape else None, allow_code=bool(request.get("allow_pickle"))))
            raise
        record = {"format_version": eng.FORMAT_VERSION, **fitted.request}
        record.pop("kind", None)
        # The engine reports recoverable changes to the user's input (measured data clipped
        # into the activation's domain, ...) as warnings; they would only reach stderr, so
        # they are caught here and shown by the window.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            prepared = eng.prepare(eng.InversionRequest.from_dict(record), bundle=bundle)
        notes = list(dict.fromkeys([*([fitted.note] if fitted.note else []),
                                    *(str(w.message) for w in caught
                                      if not issubclass(w.category, _DEV_WARNINGS))]))
        self._notes = {id(prepared): notes}  # only the newest problem's are ever asked for
        _keep_bundle(key, prepared.bundle)
        return prepared

    def _info(self, prepared: Any) -> PreparedInfo:
        bundle = prepared.bundle
        enc = bundle.encoder

        def opt(v: Any) -> float | None:
            return None if v is None else float(v)

        def img(a: Any) -> np.ndarray | None:
            return None if a is None else np.array(a, dtype=np.float32, copy=True)

        req = prepared.request.to_dict() if hasattr(prepared.request, "to_dict") else {}
        return PreparedInfo(
            request=req, network_name=str(getattr(bundle, "name", req.get("network"))),
            card=_card_with_lifting(bundle),
            layers=layer_rows(enc),
            truth=img(prepared.truth_image), decoder=img(prepared.decoder_image),
            decoder_psnr=opt(prepared.decoder_psnr), delta=opt(prepared.delta),
            delta_squared=opt(prepared.delta_squared), noise_norm=opt(prepared.noise_norm),
            input_shape=tuple(enc.input_shape), output_shape=tuple(enc.output_shape),
            preprocessing=dict(bundle.preprocessing.to_dict())
            if hasattr(getattr(bundle, "preprocessing", None), "to_dict") else {},
            warnings=self._notes.pop(id(prepared), []),
            sha256=getattr(bundle, "sha256", None),
            has_decoder=getattr(bundle, "decoder", None) is not None)

    @staticmethod
    def _point(rec: Any, it: int, elapsed_offset: float) -> dict[str, Any]:
        breg = rec.bregman_terms
        return {"iteration": it, "objective": _first(rec.objective),
                "reg_term": _first(rec.reg_term), "discrepancy": _first(rec.discrepancy),
                # inf = not measured (no dual variable, first record): no point, as in
                # curves.csv
                "primal_residual": _measured(_first(rec.primal_residual)),
                "dual_residual": _measured(_first(rec.dual_residual)), "psnr": _first(rec.psnr),
                "ssim": _first(rec.ssim), "elapsed": elapsed_offset + float(rec.elapsed),
                "stage": str(getattr(rec, "stage", "") or ""),
                # the record's RunPosition as plain values (the pipe carries no engine
                # classes) for the status line
                "position": _plain(getattr(rec, "position", None)),
                "bregman": [float(v) for v in breg[0].tolist()] if breg is not None else []}

    @staticmethod
    def _aux(prepared: Any, rec: Any) -> list[np.ndarray]:
        if not rec.aux:
            return []
        return [np.array(a, dtype=np.float32, copy=True) for a in prepared.aux_images(rec.aux)]

    def _progress(self, run_id: int, points: list, rec: Any, it: int, prepared: Any,
                  restarts: list, info: PreparedInfo | None) -> Progress:
        return Progress(run_id=run_id, points=list(points), iteration=it,
                        stage=str(getattr(rec, "stage", "") or ""),
                        x_display=np.array(prepared.to_display(rec.x[0]), dtype=np.float32,
                                           copy=True),
                        aux_display=self._aux(prepared, rec), restarts=list(restarts),
                        prepared=info)


def _fit_data(request: dict[str, Any], bundle: Any) -> Any:
    """The request with its data made to fit the network (:mod:`lbi_gui.model.data_fit`):
    the shape of a loaded network, else the one its file or card declares."""
    from lbi_engine.models.declared import declared_input_shape
    from lbi_gui.model.data_fit import fit_to_network

    shape = tuple(bundle.input_shape) if bundle is not None and hasattr(
        bundle, "input_shape") else declared_input_shape(
        str(request.get("network") or ""), request.get("input_shape"))
    return fit_to_network(request, shape)


def layer_rows(network: Any) -> list[dict[str, Any]]:
    """The network panel's rows: the network's summary, plus, for a graph network (one whose
    summary names each layer's ``inputs``), ``terms``: [state, kind of its map] per input
    (states: 0 the input, i + 1 the output of layer i), so the panel can say what each
    lifted node merges."""
    rows = [dict(row) for row in network.summary()]
    for i, row in enumerate(rows):
        if "inputs" in row:
            row["terms"] = [[int(j), str(m.kind)] for j, m in network.terms(i)]
    return rows


def _card_with_lifting(bundle: Any) -> dict[str, Any]:
    """The bundle's card, plus what lifting rewrote (max-pooling as ReLU layers) under
    "lifting", so that the network panel and an export can say so."""
    card = dict(getattr(bundle, "card", None) or {})
    enc = getattr(bundle, "encoder", None)
    rewrites = list(getattr(enc, "rewrites", None) or [])
    if rewrites and enc is not None:
        card["lifting"] = {"rewrites": rewrites, "note": enc.rewrite_note()}
    return card
