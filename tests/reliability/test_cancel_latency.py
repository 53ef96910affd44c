"""Stop is honoured within 200 ms at every problem size the GUI offers.

A latency guarantee, not a benchmark: the time from ``CancelToken.cancel()`` to the solver's
final record, for the largest zoo network (the CNN autoencoder) and the 64x64 circle
perceptron, every method, float32 and float64, cancelled right after the start and mid-run.
As in the GUI, one long-lived solver thread prepares and runs (per-thread kernel set-up is
part of preparing), and torch uses one thread.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from lbi_engine import api
from lbi_engine.solvers.base import CancelToken

# Wall-clock limits fail on a loaded machine (CI shares cores), so these run on request:
# `python -m pytest -m timing` on a quiet machine. What holds everywhere (cancel ends a run at
# the next check, with the last finite iterate) is in tests/engine/solvers/test_solver_protocol.py.
pytestmark = pytest.mark.timing

LIMIT_S = 0.2
PROBLEMS = {
    "mnist-cnn-ae": {"dataset": "mnist", "split": "val", "index": 0},
    "circle-perceptron": {"dataset": "cartoon", "split": "disc", "index": 0, "alpha": 1.5e-2},
}
CASES = [(net, method, dtype) for net in PROBLEMS
         for method in ("pdhg", "joint", "layerwise", "landweber", "backprop")
         for dtype in ("float32", "float64") if not (net == "mnist-cnn-ae" and method == "pdhg")]


class SolverThread:
    """Prepares and runs requests in one thread; the test thread cancels (like the GUI)."""

    def __init__(self) -> None:
        self.jobs: queue.Queue = queue.Queue()
        self.bundles: dict[str, Any] = {}
        self.thread = threading.Thread(target=self._loop, name="lbi-test-solver", daemon=True)
        self.threads_before = torch.get_num_threads()
        self.thread.start()

    def _loop(self) -> None:
        torch.set_num_threads(1)
        while (job := self.jobs.get()) is not None:
            request, token, started, out = job
            try:
                prepared = api.prepare(request, bundle=self.bundles.get(request.network))
                self.bundles[request.network] = prepared.bundle
                for record in api.iterate(prepared, cancel=token):
                    started.set()
                    if record.final:
                        out["t_final"], out["record"] = time.perf_counter(), record
            except BaseException as exc:  # handed to the test thread
                out["error"] = exc
            started.set()
            out["done"].set()

    def run_and_cancel(self, request: api.InversionRequest,
                       delay: float | None) -> tuple[float, Any]:
        """Cancel ``delay`` s after the first record; None: before the run even starts
        (Stop pressed right after Run: preparing and both records are then in the time)."""
        token, started, out = CancelToken(), threading.Event(), {"done": threading.Event()}
        if delay is None:
            t_cancel = time.perf_counter()
            token.cancel()
        self.jobs.put((request, token, started, out))
        assert started.wait(120), "the run never reported its first record"
        if delay is not None:
            time.sleep(delay)
            t_cancel = time.perf_counter()
            token.cancel()
        assert out["done"].wait(30), "the run did not end after cancel()"
        if "error" in out:
            raise out["error"]
        return out["t_final"] - t_cancel, out["record"]

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(10)
        torch.set_num_threads(self.threads_before)


@pytest.fixture(scope="module")
def solver_thread() -> Iterator[SolverThread]:
    worker = SolverThread()
    yield worker
    worker.close()


@pytest.mark.parametrize(("network", "method", "dtype"), CASES,
                         ids=[f"{n}-{m}-{d}" for n, m, d in CASES])
def test_cancel_ends_the_run_within_200_ms(network: str, method: str, dtype: str,
                                           solver_thread: SolverThread) -> None:
    fields = {"format_version": api.FORMAT_VERSION, "network": network, **PROBLEMS[network],
              "method": method, "dtype": dtype, "max_iter": 10**6, "tol": 0.0,
              "noise_std": 0.0 if method == "landweber" else 0.05, "threads": 1}
    request = api.InversionRequest.from_dict(fields)  # noise 0: Landweber never stops early
    latencies = []
    # right after the first record (the first run also stands for the GUI's display prepare,
    # which always comes before Run), at once, and mid-run
    for delay in (0.0, None, 0.12):
        latency, final = solver_thread.run_and_cancel(request, delay)
        assert final.final and final.stop_reason == "cancelled", final.stop_reasons
        latencies.append(latency)
    assert max(latencies) < LIMIT_S, f"cancel latencies {latencies} s"


def test_gui_stop_ends_the_run_within_200_ms(qtbot, window, dialogs, monkeypatch) -> None:
    """In the window: from Stop to the solver thread holding its last record < 200 ms.

    The window then shows the result; that part waits for queued repaints of the live plots
    (tens of ms each offscreen, more on a loaded machine), so it gets a looser bound.
    """
    from lbi_gui import engine

    eng = engine.load_engine()
    last_record: list[float] = []
    real_final_metrics = eng.final_metrics

    def final_metrics(*args: Any, **kwargs: Any) -> Any:  # called once the loop has ended
        last_record.append(time.perf_counter())
        return real_final_metrics(*args, **kwargs)

    monkeypatch.setattr(eng, "final_metrics", final_metrics)
    for network, extra in PROBLEMS.items():
        win = window({"network": network, **extra, "max_iter": 10**6, "tol": 0.0,
                      "method": "joint", "threads": 1})
        for _ in range(3):
            last_record.clear()
            win.runner.run()
            qtbot.waitUntil(lambda w=win: w.controller.curves.last_iteration >= 20,
                            timeout=60000)
            t_stop = time.perf_counter()
            win.runner.stop()
            qtbot.waitUntil(lambda w=win: not w.controller.running, timeout=10000)
            shown = time.perf_counter() - t_stop
            assert len(last_record) == 1
            latency = last_record[0] - t_stop
            assert latency < LIMIT_S, f"{network}: the solver ended {latency:.3f} s after Stop"
            assert shown < 1.0, f"{network}: the window showed the end after {shown:.3f} s"
            assert win.status.reason.text() == "stopped: stopped by user"
        win.close()
    assert not dialogs
