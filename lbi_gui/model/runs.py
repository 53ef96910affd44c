"""Plain-data records of runs: curve points as they arrive, and finished runs for the table.

No Qt here: these objects cross from the worker thread into the window, go into session files
and into exports, so they hold numpy arrays and JSON-able values only.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lbi_engine.results.run_metrics import RunMetrics
from lbi_engine.results.verdict import Concern, judge
from lbi_gui.params import HOT_KEYS

#: Scalar curve columns, in CSV order (per-layer Bregman terms follow as bregman_1..L).
SCALARS = ("iteration", "objective", "reg_term", "discrepancy", "primal_residual",
           "dual_residual", "psnr", "ssim", "elapsed")


class CurveStore:
    """Every reported curve point of one run, plus the warm-restart marks.

    Appending is O(1); :meth:`arrays` converts once per change, so a 30 Hz redraw does not
    rebuild arrays that did not change.
    """

    def __init__(self) -> None:
        self._cols: dict[str, list[float]] = {k: [] for k in SCALARS}
        self._bregman: list[list[float]] = []
        self.restarts: list[tuple[int, str]] = []  # (iteration, what changed)
        #: (index of the first point, name) of each stage of the run: layer-wise stages and
        #: the alpha search's solves, as the engine names them (none for a plain run).
        self.stages: list[tuple[int, str]] = []
        self._cache: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self._cols["iteration"])

    def extend(self, points: list[dict[str, Any]]) -> None:
        """Append points (dicts with the :data:`SCALARS` keys and ``bregman``: list of L)."""
        for p in points:
            self._note_stage(str(p.get("stage") or ""))
            for key in SCALARS:
                v = p.get(key)
                self._cols[key].append(math.nan if v is None else float(v))
            self._bregman.append([float(b) for b in p.get("bregman", [])])
        if points:
            self._cache = None

    def _note_stage(self, name: str) -> None:
        """A new stage starts where the engine's stage name changes. The solve at the alpha
        chosen by a search reports no stage until its last record names it ("alpha 0.0076
        (discrepancy)"): that name goes to the solve's segment, not a new one."""
        last = self.stages[-1][1] if self.stages else ""
        if name == last:
            return
        final_name = name.startswith("alpha ") and not name.startswith("alpha search")
        if final_name and self.stages and last == "":
            self.stages[-1] = (self.stages[-1][0], name)
        elif name or self.stages:
            self.stages.append((len(self), name))
        self._cache = None

    def segment_ids(self) -> np.ndarray:
        """The stage number of every point (0 throughout for a run without stages)."""
        ids = np.zeros(len(self), dtype=np.int64)
        for number, (start, _name) in enumerate(self.stages[1:], start=1):
            ids[start:] = number
        return ids

    def stage_marks(self) -> list[tuple[int, str]]:
        """(iteration, name) where each stage after the first begins, and the first stage's
        name at its first iteration."""
        its = self._cols["iteration"]
        return [(int(its[start]), name) for start, name in self.stages if start < len(its)]

    def mark_restart(self, iteration: int, what: str) -> None:
        self.restarts.append((int(iteration), str(what)))

    @property
    def last_iteration(self) -> int:
        it = self._cols["iteration"]
        return int(it[-1]) if it else 0

    def arrays(self) -> dict[str, np.ndarray]:
        """Column arrays; ``bregman`` is (n, L), NaN-padded where L varied."""
        if self._cache is None:
            out = {k: np.asarray(v, dtype=np.float64) for k, v in self._cols.items()}
            width = max((len(b) for b in self._bregman), default=0)
            breg = np.full((len(self._bregman), width), np.nan)
            for i, row in enumerate(self._bregman):
                breg[i, : len(row)] = row
            out["bregman"] = breg
            self._cache = out
        return self._cache

    def to_csv(self) -> str:
        """The curves as CSV text (header, one line per reported iteration)."""
        arr = self.arrays()
        n_layers = arr["bregman"].shape[1]
        header = list(SCALARS) + [f"bregman_{i + 1}" for i in range(n_layers)]
        table = np.column_stack([arr[k] for k in SCALARS] + [arr["bregman"]]) if len(self) \
            else np.zeros((0, len(header)))
        buf = io.StringIO()
        buf.write(",".join(header) + "\n")
        for row in table:
            buf.write(",".join(_fmt(v) for v in row) + "\n")
        return buf.getvalue()

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for a session file (restarts included as an int array)."""
        out = dict(self.arrays())
        out["restart_iterations"] = np.asarray([r[0] for r in self.restarts], dtype=np.int64)
        out["stage_starts"] = np.asarray([s[0] for s in self.stages], dtype=np.int64)
        out["stage_names"] = np.asarray([s[1] for s in self.stages], dtype=np.str_)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], restart_notes: list[str]) -> CurveStore:
        """Rebuild from :meth:`to_arrays` output (inverse used by session loading)."""
        store = cls()
        n = len(arrays["iteration"])
        for key in SCALARS:
            store._cols[key] = [float(v) for v in np.asarray(arrays[key]).reshape(n)]
        breg = np.asarray(arrays["bregman"])
        breg = breg.reshape(n, breg.size // n if n else 0)  # a run stopped before a report: (0, 0)
        store._bregman = [[float(v) for v in row] for row in breg]  # NaN = not reported
        its = [int(v) for v in np.asarray(arrays.get("restart_iterations", []))]
        notes = list(restart_notes) + [""] * max(0, len(its) - len(restart_notes))
        store.restarts = list(zip(its, notes[: len(its)], strict=True))
        starts = np.asarray(arrays.get("stage_starts", np.zeros(0, np.int64)))
        names = np.asarray(arrays.get("stage_names", np.zeros(0, np.str_)))
        # Sessions written before stages were kept have neither: no marks then.
        if starts.shape == names.shape and starts.ndim == 1 and names.dtype.kind == "U" \
                and np.issubdtype(starts.dtype, np.integer) and np.all(starts >= 0) \
                and np.all(np.diff(starts) > 0) and (not starts.size or starts[-1] < n):
            store.stages = [(int(a), str(b)) for a, b in zip(starts, names, strict=True)]
        return store


def _fmt(v: float) -> str:
    if math.isnan(v):
        return ""
    if float(v).is_integer() and abs(v) < 1e15:
        return str(int(v))
    return repr(float(v))


@dataclass
class RunResult:
    """A finished run: what was asked, what came out, and how it got there."""

    run_id: int
    request: dict[str, Any]  # InversionRequest.to_dict() of the last segment
    stop_reason: str
    iterations: int
    elapsed: float
    metrics: RunMetrics
    x_raw: np.ndarray  # network-space result, one sample
    x_display: np.ndarray  # display space (H, W) or (C, H, W)
    curves: CurveStore = field(default_factory=CurveStore)
    decoder_psnr: float | None = None
    user_action: str | None = None  # "stop" | "finish" | None (not saved)
    #: (first iteration, request) of each segment between warm restarts.
    segments: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    #: The ground truth of the run's own problem (display space), None without one: a run
    #: shown from the table is compared with its own truth, not the current network's.
    truth: np.ndarray | None = None
    #: The run's problem as result.json describes it (name, sha256, shapes, layers, decoder)
    #: and what ``lbi invert`` writes beside the reconstruction (see lbi_gui.export).
    network: dict[str, Any] = field(default_factory=dict)
    preprocessing: dict[str, Any] = field(default_factory=dict)
    decoder: np.ndarray | None = None
    #: The user's free-text note; words starting with '#' are tags (see :attr:`tags`).
    notes: str = ""

    @property
    def tags(self) -> list[str]:
        """The note's words that start with '#', without trailing punctuation
        (e.g. "#baseline, good" -> ["#baseline"])."""
        words = (w.rstrip(",;.:!?") for w in self.notes.split())
        return [w for w in words if w.startswith("#") and len(w) > 1]

    @property
    def alpha_used(self) -> float | str | None:
        """The α that ran (result.json's ``alpha``), else the α asked for ("auto" only for a
        run that never reported one)."""
        used = self.metrics.alpha
        if isinstance(used, (int, float)) and not isinstance(used, bool):
            return float(used)
        return self.request.get("alpha")

    @property
    def alpha_rule(self) -> str:
        """How the α that ran was chosen: "typed" for the user's number, else the engine's
        rule (discrepancy, quasi-optimality, ...)."""
        if self.request.get("alpha") != "auto":
            return "typed"
        rule = str(self.metrics.alpha_rule or "")
        # the rule's name; its details ("first local minimum", a saturated search) are in
        # result.json and the status line
        short = rule.split(" (")[0].split(";")[0].strip()
        return short if short not in ("", "fixed", "given") else "auto"

    @property
    def concerns(self) -> list[Concern]:
        """Why the result may not be what it seems (flat, over-regularised, the iteration
        cap, an α search that missed its target), each with the next step; [] for none."""
        if self.user_action == "finish":  # the user stopped it: the cap is not the story
            stop = None
        else:
            stop = self.stop_reason
        return judge(self.metrics, x=self.x_display, truth=self.truth, stop_reason=stop,
                     max_iter=self.request.get("max_iter"))

    @property
    def label(self) -> str:
        alpha = self.alpha_used
        shown = "auto" if alpha == "auto" or alpha is None else f"{float(alpha):.3g}"
        return f"#{self.run_id} {self.request.get('method')} α={shown}"

    def table_row(self) -> dict[str, Any]:
        """Columns of the run table (parameters, then final metrics)."""
        r, m = self.request, self.metrics
        method = r.get("method")
        if method == "auto" and m.method_run:
            method = f"auto: {m.method_run}"  # what auto ran, as result.json says
        if m.hidden_weight is not None and m.hidden_weight != 1.0:  # a weighted objective
            method = f"{method} (hidden ×{m.hidden_weight:g})"
        regulariser = r.get("regulariser")
        if regulariser == "auto" and m.regulariser_run:  # what auto ran, likewise
            regulariser = f"auto: {str(m.regulariser_run).split(' (')[0]}"
        return {
            "run": self.run_id,
            "network": _network_name(r),
            "method": method,
            "regulariser": regulariser,
            "alpha": self.alpha_used,  # what ran (a number, so the column sorts)
            "alpha rule": self.alpha_rule,
            "noise": r.get("noise_std"),
            "sample": _sample_name(r),
            "iterations": self.iterations,
            "time [s]": self.elapsed,
            "stop": self.stop_reason,
            "check": "; ".join(c.kind for c in self.concerns),
            "restarts": len(self.curves.restarts),
            "segments": self.segments_text(),
            "PSNR": m.psnr,
            "SSIM": m.ssim,
            "decoder PSNR": self.decoder_psnr,
            "discrepancy": m.discrepancy,
            "objective": m.objective,
            "notes": self.notes,
        }

    def segments_text(self) -> str:
        """The settings of each segment, e.g. "k 0: α 0.009; k 120: α 0.02" ("—": one)."""
        if len(self.segments) < 2:
            return "—"
        keys = sorted({k for _, req in self.segments for k in HOT_KEYS
                       if req.get(k) != self.segments[0][1].get(k)})
        parts = []
        for start, req in self.segments:
            settings = ", ".join(f"{_NAMES.get(k, k)} {_cell_value(req.get(k))}" for k in keys)
            parts.append(f"k {start}: {settings}")
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        """JSON part of a session entry (arrays go to the npz, see :meth:`arrays`)."""
        return {
            "run_id": self.run_id, "request": self.request, "stop_reason": self.stop_reason,
            "iterations": self.iterations, "elapsed": self.elapsed,
            "metrics": _jsonable(self.metrics.to_dict()), "decoder_psnr": self.decoder_psnr,
            "restart_notes": [note for _, note in self.curves.restarts],
            "segments": [[int(k), req] for k, req in self.segments],
            "network": self.network, "preprocessing": self.preprocessing,
            "notes": self.notes,
        }

    def arrays(self) -> dict[str, np.ndarray]:
        out = {"x_raw": np.asarray(self.x_raw), "x_display": np.asarray(self.x_display)}
        if self.truth is not None:
            out["truth"] = np.asarray(self.truth)
        if self.decoder is not None:
            out["decoder"] = np.asarray(self.decoder)
        out.update({f"curve_{k}": v for k, v in self.curves.to_arrays().items()})
        return out

    @classmethod
    def from_parts(cls, meta: dict[str, Any], arrays: dict[str, np.ndarray]) -> RunResult:
        curve_arrays = {k[len("curve_"):]: v for k, v in arrays.items() if k.startswith("curve_")}
        curves = CurveStore.from_arrays(curve_arrays, meta.get("restart_notes", []))
        notes = meta.get("notes", "")  # sessions written before notes existed have none
        if not isinstance(notes, str):
            raise TypeError(f"run {meta.get('run_id')!r}: notes={notes!r} is not text")
        return cls(run_id=int(meta["run_id"]), request=dict(meta["request"]),
                   stop_reason=str(meta["stop_reason"]), iterations=int(meta["iterations"]),
                   elapsed=float(meta["elapsed"]),
                   metrics=RunMetrics.from_dict(dict(meta["metrics"])),
                   x_raw=np.asarray(arrays["x_raw"]), x_display=np.asarray(arrays["x_display"]),
                   curves=curves, decoder_psnr=meta.get("decoder_psnr"),
                   segments=[(int(k), dict(req)) for k, req in meta.get("segments", [])],
                   truth=np.asarray(arrays["truth"]) if "truth" in arrays else None,
                   network=dict(meta.get("network") or {}),
                   preprocessing=dict(meta.get("preprocessing") or {}),
                   decoder=np.asarray(arrays["decoder"]) if "decoder" in arrays else None,
                   notes=notes)


_NAMES = {"alpha": "α", "noise_std": "noise", "layer_alphas": "α per layer"}


def _cell_value(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def _network_name(r: dict[str, Any]) -> str:
    """A zoo name as it is, a file by its name."""
    net = str(r.get("network") or "")
    return net.replace("\\", "/").rsplit("/", 1)[-1]


def _sample_name(r: dict[str, Any]) -> str:
    if r.get("image"):
        return str(r["image"]).rsplit("/", 1)[-1]
    if r.get("data"):
        return "y: " + str(r["data"]).rsplit("/", 1)[-1]
    return f"{r.get('dataset')}/{r.get('split')}/{r.get('index')}"


def _jsonable(d: dict[str, Any]) -> dict[str, Any]:
    """Metric values as plain floats/str (numpy scalars and 1-element arrays unwrapped)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, np.ndarray) and v.size == 1:
            v = v.reshape(()).item()
        elif isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            v = None if math.isnan(v) else ("inf" if v > 0 else "-inf")
        out[k] = v if isinstance(v, (int, float, str, bool, type(None), list)) else str(v)
    return out
