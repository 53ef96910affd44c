"""Parameter sweeps: a grid over alpha x noise std x method x samples, batched and resumable.

* A *cell* is one (noise std, method, alpha); its samples are solved in one batch
  (:mod:`lbi_engine.experiments.batch`), each sample leaving it when its stop rule fires
  (:mod:`lbi_engine.solvers.shrinking`); alpha "auto" with a noise-scaled weight (the learned
  prior's) is one weight for the whole cell, any other "auto" a search per sample. Sample
  INDEX gets the noise seed SEED + INDEX, so one row is repeated by
  ``lbi invert --sample INDEX --seed SEED+INDEX`` with the cell's parameters.
* Results go to ``results.csv``, one row per (cell, sample), keyed by every parameter that
  changes the numbers (including the network file's sha256). After each cell the whole file
  is rewritten atomically, so an interrupted sweep loses at most the cell in progress and a
  re-run skips every cell whose rows are all present.
* With a :class:`~lbi_engine.experiments.sweep_dask.ClusterOptions` the cells run as Dask
  tasks (:mod:`lbi_engine.experiments.sweep_dask`, imported only then); this process still
  writes every row, through the same ``record`` as the local loop.
* The plots (``psnr_vs_alpha.png``, ``psnr_vs_noise.png``) and ``summary.md`` are derived
  from the CSV and regenerated on every run (:mod:`lbi_engine.experiments.sweep_summary`).
"""

from __future__ import annotations

import csv
import io
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lbi_engine.errors import InputError
from lbi_engine.experiments.cells import solve_cell
from lbi_engine.experiments.sweep_summary import aggregate as aggregate  # re-exported
from lbi_engine.experiments.sweep_summary import cell_alpha, write_summary
from lbi_engine.io import atomic_write_text
from lbi_engine.results.exports import csv_text, restore_cell
from lbi_engine.settings.defaults import REQUEST_DEFAULTS

RESULTS = "results.csv"
KEY_COLUMNS = ("network", "network_sha256", "dataset", "split", "index", "seed", "noise_std",
               "alpha", "method", "regulariser", "steps", "max_iter", "tol", "tol_mode", "dtype")
METRIC_COLUMNS = ("psnr", "ssim", "decoder_psnr", "objective", "reg_term", "bregman_terms",
                  "iterations", "stop_reason", "seconds", "discrepancy", "delta",
                  "delta_squared", "noise_norm", "l2_norm", "tv_iso", "tv_aniso",
                  "alpha_chosen", "alpha_rule")
#: Where and how long: the Dask worker's address (``local`` in-process) and the wall time of
#: the whole cell (data, noise, solve, metrics), the same for every sample of the cell.
RUN_COLUMNS = ("worker", "cell_seconds")
COLUMNS = KEY_COLUMNS + METRIC_COLUMNS + RUN_COLUMNS
#: Columns added after the first version: a CSV written before them still resumes (they read
#: as empty and are written out on the next rewrite).
ADDED_COLUMNS = (*RUN_COLUMNS, "alpha_chosen", "alpha_rule")


@dataclass(frozen=True)
class SweepSpec:
    """The grid and the fixed parameters of a sweep."""

    network: str
    alphas: tuple[float | str, ...]  # "auto": chosen per sample (alpha_chosen column)
    noise_stds: tuple[float, ...]
    methods: tuple[str, ...]
    indices: tuple[int, ...]
    dataset: str = "mnist"
    split: str = "val"
    seed: int = 0
    # the defaults of `lbi invert` (the run record's), so that a sweep's cell and a single run
    # of the same setting are the same run
    regulariser: str = REQUEST_DEFAULTS["regulariser"]
    steps: str = REQUEST_DEFAULTS["steps"]
    max_iter: int = REQUEST_DEFAULTS["max_iter"]
    tol: float = REQUEST_DEFAULTS["tol"]
    tol_mode: str = REQUEST_DEFAULTS["tol_mode"]
    input_shape: tuple[int, ...] | None = None
    device: str = REQUEST_DEFAULTS["device"]
    dtype: str = REQUEST_DEFAULTS["dtype"]
    allow_pickle: bool = False
    threads: int | None = None

    def cells(self) -> list[tuple[float, str, float | str]]:
        """(noise std, method, alpha) in run order (one noise draw serves a whole row)."""
        return [(s, m, a) for s in self.noise_stds for m in self.methods for a in self.alphas]

    def report_every(self) -> int:
        """invert's record cadence where the objective stop rule reads the records (another
        cadence stops elsewhere, and the row would not repeat with `lbi invert`); else one
        record at the end, the cheapest."""
        if self.tol_mode == "objective" and self.tol > 0:
            return int(REQUEST_DEFAULTS["report_every"])
        return self.max_iter

    def request(self, noise_std: float, method: str, alpha: float | str) -> Any:
        from lbi_engine.api import InversionRequest

        return InversionRequest(
            network=self.network, input_shape=self.input_shape, dataset=self.dataset,
            split=self.split, index=self.indices[0], noise_std=noise_std, seed=self.seed,
            alpha=alpha, regulariser=self.regulariser, method=method, steps=self.steps,
            max_iter=self.max_iter, tol=self.tol, tol_mode=self.tol_mode, device=self.device,
            dtype=self.dtype, report_every=self.report_every(), threads=self.threads,
            allow_pickle=self.allow_pickle,
        ).validate()


@dataclass
class SweepResult:
    csv_path: Path
    ran: int
    skipped: int
    rows: list[dict[str, str]]
    files: list[Path] = field(default_factory=list)


def _cell_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return ";".join(_cell_text(v) for v in value)
    return str(value)


def _key(row: dict[str, Any]) -> tuple[str, ...]:
    return tuple(_cell_text(row[c]) if not isinstance(row[c], str) else row[c]
                 for c in KEY_COLUMNS)


def read_results(path: Path) -> list[dict[str, str]]:
    """The rows of an existing results.csv (checked to have this version's columns)."""
    from lbi_engine.limits import check_bytes, read_regular

    if not os.path.lexists(path):
        return []
    fix = "Use another --out folder (or move the file away)."
    # a regular file within the memory limit (a FIFO would hang the resume, /dev/zero fill
    # the memory), then its parsed rows, which take up to 30 times its bytes (SECURITY.md)
    data = read_regular(path, "sweep results", None, InputError)
    check_bytes(32 * len(data), f"sweep results {path}", "use another --out folder")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path} is not UTF-8 text (byte {exc.start}), so lbi did not write "
                         f"it. {fix}") from None
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = tuple(reader.fieldnames or ())
        missing = set(COLUMNS) - set(header)
        if (set(header) - set(COLUMNS) or missing - set(ADDED_COLUMNS)
                or len(set(header)) != len(header)):
            raise InputError(
                f"{path} has other columns than this lbi writes; it is not a sweep of this "
                f"version. {fix}"
            )
        rows = []
        for row in reader:
            if None in row or None in row.values():  # more or fewer cells than columns
                raise InputError(f"{path}, line {reader.line_num}: the row does not have "
                                 f"one cell per column, so lbi did not write it. {fix}")
            rows.append({**dict.fromkeys(missing, ""),
                         **{k: restore_cell(v) for k, v in row.items()}})
    except csv.Error as exc:  # e.g. a field larger than csv's limit, a NUL byte
        raise InputError(f"{path} is not a CSV lbi wrote ({exc}). {fix}") from None
    return rows


def run_sweep(
    spec: SweepSpec,
    out_dir: str | Path,
    progress: Callable[[int, int, str], None] | None = None,
    cluster: Any = None,
) -> SweepResult:
    """Runs the missing cells of ``spec`` and (re)writes the CSV, plots and summary.

    ``cluster``: a :class:`lbi_engine.experiments.sweep_dask.ClusterOptions` sends the cells
    to Dask workers (this process still writes every row); ``None`` solves them here.
    """
    from lbi_engine.experiments.batch import dataset_truths
    from lbi_engine.models.zoo import load_network

    if not (spec.alphas and spec.noise_stds and spec.methods and spec.indices):
        raise InputError("the sweep grid is empty: give at least one alpha, noise std, method "
                         "and sample.")
    from lbi_engine.regularisers import regulariser_name

    if str(spec.regulariser).strip().lower() != "auto":
        regulariser_name(spec.regulariser)  # a typo fails now, not after the first cells
    from lbi_engine.results.owned_folders import owned_folder

    out = owned_folder(out_dir)
    csv_path = out / RESULTS
    rows = read_results(csv_path)
    bundle = load_network(spec.network, input_shape=spec.input_shape,
                          allow_pickle=spec.allow_pickle)
    sha = str(getattr(bundle, "sha256", "") or "")
    done = {_key(r) for r in rows}

    def sample_keys(std: float, method: str, alpha: float | str) -> list[dict[str, Any]]:
        return [{"network": spec.network, "network_sha256": sha, "dataset": spec.dataset,
                 "split": spec.split, "index": i, "seed": spec.seed + i, "noise_std": float(std),
                 "alpha": cell_alpha(alpha), "method": method, "regulariser": spec.regulariser,
                 "steps": spec.steps, "max_iter": spec.max_iter, "tol": float(spec.tol),
                 "tol_mode": spec.tol_mode, "dtype": spec.dtype} for i in spec.indices]

    cells = spec.cells()
    todo = [cell for cell in cells if not all(_key(k) in done for k in sample_keys(*cell))]
    skipped = len(cells) - len(todo)
    for cell in todo:  # validate every request before the first (possibly long) solve
        spec.request(*cell)
    if progress is not None:
        progress(skipped, len(cells), f"{skipped} cell(s) already done")
    truths = dataset_truths(spec.dataset, spec.split, list(spec.indices)) if todo else None

    def record(cell: tuple[float, str, float | str], metrics: list[dict[str, Any]], worker: str,
               seconds: float) -> None:
        """Appends a finished cell's rows and rewrites the CSV (the only writer of it)."""
        run = {"worker": worker, "cell_seconds": round(seconds, 3)}
        for key, values in zip(sample_keys(*cell), metrics, strict=True):
            rows.append({c: _cell_text(v) for c, v in {**values, **key, **run}.items()
                         if c in COLUMNS})
        atomic_write_text(csv_path, csv_text(COLUMNS, [[r.get(c, "") for c in COLUMNS]
                                                       for r in rows]))

    local = todo
    if cluster is not None and todo:
        from lbi_engine.experiments.sweep_dask import run_cells

        run_cells(cluster, spec, bundle, truths, todo, record, progress, skipped)
        local = []
    prepared_std: dict[float, Any] = {}
    for number, (std, method, alpha) in enumerate(local, start=1):
        started = time.perf_counter()
        metrics = solve_cell(spec, bundle, truths, (std, method, alpha), prepared_std)
        record((std, method, alpha), metrics, "local", time.perf_counter() - started)
        if progress is not None:
            progress(skipped + number, len(cells), f"std {std:g}, {method}, alpha {alpha}")
    if not csv_path.exists():  # nothing ran and nothing was there: still leave the header
        atomic_write_text(csv_path, csv_text(COLUMNS, []))
    keys = {_key(k) for cell in cells for k in sample_keys(*cell)}
    mine = [r for r in rows if _key(r) in keys]
    files = write_summary(spec, mine, out)
    return SweepResult(csv_path, len(todo), skipped, mine, [csv_path, *files])

