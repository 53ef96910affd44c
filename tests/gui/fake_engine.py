"""A tiny stand-in for ``lbi_engine`` (numpy only) to test GUI mechanics in isolation.

It speaks the same protocol as the real engine namespace of ``lbi_gui.engine``: requests,
prepare, a generator of records, final metrics, cancel tokens. Its "solver" relaxes x towards
the truth geometrically, so every number it reports is known in closed form:
x_k = (1 - r^k) x†, objective_k = r^k. ``delay`` seconds are slept per iteration.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import numpy as np

from lbi_engine.errors import InputError
from lbi_engine.results.run_metrics import RunMetrics

RATE = 0.99


class FakeToken:
    def __init__(self) -> None:
        self._e = threading.Event()

    def cancel(self) -> None:
        self._e.set()

    @property
    def cancelled(self) -> bool:
        return self._e.is_set()


@dataclass
class FakeRequest:
    values: dict[str, Any]

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FakeRequest:
        d = dict(d)
        d.pop("kind", None)
        if d.pop("format_version", None) != 1:
            raise InputError("format_version missing")
        if d["alpha"] != "auto" and float(d["alpha"]) <= 0:  # "auto": the engine chooses
            raise InputError(f"alpha={d['alpha']}: must be > 0.")
        return cls(d)

    def to_dict(self) -> dict[str, Any]:
        return {"format_version": 1, "kind": "lbi-run-record", **self.values}

    def __getattr__(self, name: str) -> Any:
        try:
            return self.__dict__["values"][name]
        except KeyError as exc:
            raise AttributeError(name) from exc


@dataclass
class FakeRecord:
    method: str
    iteration: int
    x: np.ndarray
    aux: list[np.ndarray]
    objective: np.ndarray
    bregman_terms: np.ndarray
    reg_term: np.ndarray
    discrepancy: np.ndarray
    primal_residual: np.ndarray
    dual_residual: np.ndarray
    elapsed: float
    psnr: np.ndarray
    ssim: np.ndarray
    final: bool = False
    stop_reason: str | None = None
    stage: str = ""
    extras: dict[str, Any] = field(default_factory=dict)

    def to_numpy(self) -> dict[str, Any]:
        return {"iteration": self.iteration, "x": self.x.copy(),
                "aux": [a.copy() for a in self.aux]}


def _truth(index: int) -> np.ndarray:
    yy, xx = np.mgrid[0:16, 0:16]
    return ((xx - 8) ** 2 + (yy - 8) ** 2 < (3 + index % 4) ** 2).astype(np.float32)


def make_fake_engine(delay: float = 0.0) -> SimpleNamespace:
    """The fake namespace; ``delay`` = seconds per iteration (simulates a slow solver)."""

    def prepare(request: FakeRequest, bundle: Any = None) -> Any:
        net = request.network
        if str(net).endswith(".bad"):
            raise InputError(f"{net}: cannot be lifted (fake)")
        truth = _truth(int(request.index))
        bundle = bundle or SimpleNamespace(
            name=net, card={"description": "fake"}, preprocessing=None,
            encoder=SimpleNamespace(
                input_shape=(1, 16, 16), output_shape=(8,),
                summary=lambda: [{"kind": "Linear", "in_shape": (1, 16, 16), "out_shape": (8,),
                                  "activation": "relu", "norm": 1.0, "source": "0"},
                                 {"kind": "Linear", "in_shape": (8,), "out_shape": (8,),
                                  "activation": "identity", "norm": 2.0, "source": "1"}]))
        std = float(request.noise_std)
        return SimpleNamespace(
            request=request, bundle=bundle, truth_image=truth, decoder_image=truth * 0.5,
            decoder_psnr=10.0, delta=std * 2, delta_squared=(std * 2) ** 2, noise_norm=std,
            to_display=lambda x: np.asarray(x, dtype=np.float32).reshape(16, 16),
            aux_images=lambda aux: [np.asarray(a)[0].reshape(2, 4) for a in aux])

    def iterate(prepared: Any, *, cancel: FakeToken | None = None,
                warm_start_from: dict | None = None, alpha: float | None = None) -> Any:
        req = prepared.request
        truth = prepared.truth_image[None, None]
        start = int(warm_start_from["iteration"]) if warm_start_from else 0
        every, max_iter = int(req.report_every), int(req.max_iter)
        t0 = time.perf_counter()

        def record(k: int, final: bool = False, reason: str | None = None) -> FakeRecord:
            frac = RATE ** k
            one = lambda v: np.array([v], dtype=np.float64)  # noqa: E731
            return FakeRecord(
                method=req.method, iteration=k, x=(1 - frac) * truth,
                aux=[np.full((1, 8), 1 - frac, dtype=np.float32)], objective=one(frac),
                bregman_terms=np.array([[frac / 2, frac / 4]]),
                reg_term=one(0.01 if req.alpha == "auto" else float(req.alpha)),
                discrepancy=one(frac), primal_residual=one(frac), dual_residual=one(frac / 2),
                elapsed=time.perf_counter() - t0, psnr=one(10 + k / 10), ssim=one(0.5),
                final=final, stop_reason=reason)

        yield record(start)
        k = start
        while k - start < max_iter:
            if cancel is not None and cancel.cancelled:
                yield record(k, True, "cancelled")
                return
            if delay:
                time.sleep(delay)
            k += 1
            if (k - start) % every == 0 and k - start < max_iter:
                yield record(k)
        yield record(k, True, "max_iterations")

    def final_metrics(prepared: Any, record: FakeRecord) -> RunMetrics:
        return RunMetrics(psnr=float(record.psnr[0]), ssim=0.5,
                          objective=float(record.objective[0]),
                          discrepancy=float(record.discrepancy[0]), iterations=record.iteration)

    class _T:  # what the GUI thread calls on get_sample(...)[0]
        def __init__(self, a: np.ndarray) -> None:
            self.a = a

        def detach(self) -> _T:
            return self

        def cpu(self) -> _T:
            return self

        def numpy(self) -> np.ndarray:
            return self.a

    return SimpleNamespace(
        InversionRequest=FakeRequest, FORMAT_VERSION=1, prepare=prepare, iterate=iterate,
        final_metrics=final_metrics, CancelToken=FakeToken, list_zoo=lambda: ["fake-net"],
        list_datasets=lambda: ["mnist"], list_splits=lambda ds: ["val", "train"],
        dataset_size=lambda ds, split: 50,
        get_sample=lambda ds, split, i: [_T(_truth(i)[None])], cuda_available=lambda: False,
        set_threads=lambda n: None)
