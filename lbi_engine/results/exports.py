"""Writing the results of a run: result.json, reconstruction.npy/.png, curves.csv, decoder.*.

Shared by the CLI (``lbi invert``) and the GUI's export dialog, so both write the same files.
Every file is written atomically (a crash never leaves half a file), a run's folder is
replaced as a whole (``export_run`` via ``lbi_engine.results.folder_swap``: never old and new files
mixed), and nothing existing is replaced unless the caller passes ``overwrite=True``: an
export is a record of an experiment, and silently losing the previous one is worse than an
error.

Records may be :class:`~lbi_engine.solvers.base.IterateRecord` objects or their
``to_numpy()`` dicts (what the GUI keeps), so the functions accept both. curves.csv's rows are
built in :mod:`~lbi_engine.results.curves`, CSV text in :mod:`~lbi_engine.results.csv_cells`,
images and arrays in :mod:`~lbi_engine.results.images` (all re-exported here).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import platform
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from lbi_engine.io import (
    OutputExistsError,
    atomic_write_text,
    safe_output_path,
)
from lbi_engine.results.csv_cells import csv_text as csv_text  # re-exported
from lbi_engine.results.csv_cells import neutralise_cell as neutralise_cell  # re-exported
from lbi_engine.results.csv_cells import restore_cell as restore_cell  # re-exported
from lbi_engine.results.curves import _field, write_curves_csv
from lbi_engine.results.curves import curve_rows as curve_rows  # re-exported
from lbi_engine.results.folder_swap import recover_folder, staged_folder
from lbi_engine.results.images import save_npy, save_png
from lbi_engine.results.images import to_numpy as _to_numpy
from lbi_engine.results.images import to_uint8_image as to_uint8_image  # re-exported (old home)

RESULT_KIND = "lbi-result"
RESULT_FORMAT_VERSION = 1

#: The files ``export_run`` may write, in the order it writes them (result.json last, so a
#: result.json on disk means every other file of the run is complete).
RUN_FILES = (
    "reconstruction.npy",
    "reconstruction.png",
    "truth.npy",
    "truth.png",
    "noisy_data.npy",
    "noisy_data.png",
    "curves.csv",
    "decoder.npy",
    "decoder.png",
    "README.txt",
    "result.json",
)
#: README.txt's line for each file (a person opening the folder reads what is what).
FILE_NOTES = {
    "reconstruction.npy": "the reconstruction x: float32, the network's input shape, display "
                          "range (preprocessing undone)",
    "reconstruction.png": "the reconstruction as an image",
    "truth.npy": "the ground truth as the solver saw it (after --resize): float32, the "
                 "network's input shape, display range",
    "truth.png": "the ground truth as an image, to compare with reconstruction.png",
    "noisy_data.npy": "the noisy data y^delta the solver inverted (the network's output of "
                      "the truth plus noise): float32, the network's output shape",
    "noisy_data.png": "the noisy data as an image (channels side by side, scaled from its "
                      "min to its max)",
    "curves.csv": "one row per reported iterate: objective, Bregman terms, regulariser, psnr, "
                  "ssim, residuals",
    "decoder.npy": "the network's decoder applied to y^delta (a reference to compare with)",
    "decoder.png": "the decoder's output as an image",
    "README.txt": "this list of the folder's files",
    "result.json": "every parameter of the run and its final numbers; `lbi invert --record "
                   "result.json` repeats it",
}


# ---------------------------------------------------------------------------------------------
# small helpers


def package_versions() -> dict[str, str]:
    """Versions that decide the numbers of a run (written into result.json).

    torch's version is read from the installed package's metadata when torch is not imported
    yet, so a caller without torch (the GUI process) writes the same document for free.
    """
    import sys

    from lbi_engine import __version__

    torch = sys.modules.get("torch")
    if torch is not None:
        torch_version = str(torch.__version__)
    else:
        from importlib.metadata import PackageNotFoundError, version

        try:
            torch_version = version("torch")
        except PackageNotFoundError:
            torch_version = "not installed"
    return {
        "lbi": __version__,
        "torch": torch_version,
        "numpy": str(np.__version__),
        "python": platform.python_version(),
    }


def json_safe(value: Any) -> Any:
    """``value`` with numpy/torch scalars made plain and NaN/Inf replaced by None.

    JSON has no NaN or Infinity; Python would write the non-standard tokens, which other
    readers reject. "Undefined" is null in result.json (e.g. PSNR without a ground truth).
    """
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist") and not isinstance(value, (str, bytes)):
        return json_safe(value.tolist())
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "value") and isinstance(value.value, str):  # Enum members
        return value.value
    return str(value)


def write_json(path: str | Path, data: dict[str, Any], overwrite: bool = False) -> Path:
    """Pretty JSON (strict: no NaN tokens), written atomically."""
    target = safe_output_path(path, overwrite)
    text = json.dumps(json_safe(data), indent=2, allow_nan=False) + "\n"
    atomic_write_text(target, text)
    return target


# ---------------------------------------------------------------------------------------------
# a whole run


def check_outputs_free(out_dir: str | Path, names: Iterable[str], overwrite: bool) -> None:
    """Refuse before any work is done when an output would be replaced without permission.

    First repairs what an interrupted folder swap left (``folder_swap.recover_folder``), so
    that the check sees the previous result even if a crash had moved it aside.
    """
    recover_folder(out_dir)
    for name in names:
        safe_output_path(Path(out_dir) / name, overwrite)


def result_document(
    prepared: Any, final_record: Any, sample: int = 0, extra: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The content of result.json for one sample of a prepared, finished run."""
    request = prepared.request
    bundle = prepared.bundle
    encoder = bundle.encoder
    metrics = prepared.final_metrics(final_record, sample).to_dict()
    extras = _field(final_record, "extras") or {}
    warning = extras.get("warning") if isinstance(extras, dict) else None
    network = {
        "name": getattr(bundle, "name", request.network),
        "sha256": getattr(bundle, "sha256", None),
        "input_shape": list(encoder.input_shape),
        "output_shape": list(encoder.output_shape),
        "layers": len(encoder.layers),
        "has_decoder": getattr(bundle, "decoder", None) is not None,
    }
    rewrites = list(getattr(encoder, "rewrites", None) or [])
    if rewrites:  # what lifting changed to make the network liftable (same forward map)
        network["rewrites"] = rewrites
        network["lifted_layers_added"] = sum(int(r["lifted_layers_added"]) for r in rewrites)
    return build_result_document(request.to_dict(), network, metrics,
                                 [warning] if warning else [], extra)


def build_result_document(
    request: dict[str, Any],
    network: dict[str, Any],
    metrics: dict[str, Any],
    warnings: list[str] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """result.json from plain values (no torch): the CLI (via :func:`result_document`) and
    the GUI (from what its engine process sent) build the same document here. After alpha
    "auto" the request records the chosen alpha, so that ``--record`` repeats the run with it
    frozen."""
    if metrics.get("alpha_rule", "fixed") != "fixed":
        request = {**request, "alpha": metrics["alpha"]}
    document: dict[str, Any] = {
        "kind": RESULT_KIND,
        "format_version": RESULT_FORMAT_VERSION,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "request": request,
        "network": network,
        "seed": request.get("seed"),
        "versions": package_versions(),
        "metrics": metrics,
        "warnings": list(warnings or []),
    }
    if extra:
        document.update(extra)
    return document


def export_run(
    prepared: Any,
    final_record: Any,
    records: Sequence[Any] | None,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    sample: int = 0,
    extra: dict[str, Any] | None = None,
) -> dict[str, Path]:
    """Writes every file of a run into ``out_dir`` (created if missing); returns name -> path.

    ``prepared`` is an :class:`lbi_engine.api.PreparedRun`, ``final_record`` the last record
    (IterateRecord or its ``to_numpy()``), ``records`` the reported iterates for curves.csv
    (None: no curves). Existing files are refused up front unless ``overwrite``. With
    ``overwrite`` the previous result is replaced as a whole: files of it that this run does
    not write (a decoder image, curves.csv) are gone afterwards; other entries of the folder
    are kept.
    """
    problem = prepared.problem
    x = np.asarray(_to_numpy(_field(final_record, "x")), dtype=np.float32)[sample]
    reconstruction = np.asarray(prepared.bundle.preprocessing.undo(x), dtype=np.float32)
    reconstruction = reconstruction.reshape(tuple(problem.input_shape))
    truth = None
    if prepared.truth_image is not None:
        truth = np.asarray(prepared.truth_image, np.float32).reshape(problem.input_shape)
    simulated = not getattr(prepared.request, "data", None)  # y^delta made here, noise added
    noisy = _to_numpy(problem.y_delta)[sample] if simulated else None
    return write_result_folder(
        out_dir,
        reconstruction=reconstruction,
        display=prepared.to_display(x),
        records=records,
        decoder=prepared.decoder_image,
        document=lambda: result_document(prepared, final_record, sample, extra),
        overwrite=overwrite,
        sample=sample,
        truth=truth,
        truth_display=prepared.truth_image,
        noisy_data=noisy,
    )


def write_result_folder(
    out_dir: str | Path,
    *,
    reconstruction: Any,
    display: Any,
    records: Sequence[Any] | None,
    decoder: Any,
    document: Any,
    overwrite: bool = False,
    sample: int = 0,
    truth: Any = None,
    truth_display: Any = None,
    noisy_data: Any = None,
) -> dict[str, Path]:
    """The one writer of a run's folder (CLI and GUI): reconstruction.npy (display-space
    values in the network's input shape), reconstruction.png, truth.* (``truth`` in the
    input shape, ``truth_display`` its image), noisy_data.* (``noisy_data``: y^delta of a
    simulated run; its PNG only where it is an image), curves.csv, decoder.*, README.txt (one
    line per file), result.json (``document``: a dict, or a callable that builds it).
    Torch-free."""
    out = Path(out_dir)
    has_decoder = decoder is not None
    noisy_image = noisy_data is not None and _is_image(np.shape(noisy_data))
    absent = {"truth.npy": truth is None, "truth.png": truth_display is None,
              "noisy_data.npy": noisy_data is None, "noisy_data.png": not noisy_image,
              "curves.csv": records is None}
    names = [
        n
        for n in RUN_FILES
        if (has_decoder or not n.startswith("decoder")) and not absent.get(n, False)
    ]
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"{out} is a file, not a folder; give a folder for the results")
    check_outputs_free(out, names, overwrite)
    # Everything is written into a fresh sibling folder that then replaces ``out`` in one
    # step (lbi_engine.results.folder_swap): an export that dies halfway leaves the previous result
    # complete, and a finished one leaves no file of the previous result behind.
    from lbi_engine.results.folder_lock import output_folder_lock

    with output_folder_lock(out), \
            staged_folder(out, keep=lambda name: name not in RUN_FILES, last="result.json") as new:
        written = {"reconstruction.npy": save_npy(new / "reconstruction.npy", reconstruction)}
        written["reconstruction.png"] = save_png(new / "reconstruction.png", display)
        if records is not None:
            written["curves.csv"] = write_curves_csv(records, new / "curves.csv", sample)
        if truth is not None:
            written["truth.npy"] = save_npy(new / "truth.npy", truth)
        if truth_display is not None:
            written["truth.png"] = save_png(new / "truth.png", truth_display)
        if noisy_data is not None:
            written["noisy_data.npy"] = save_npy(new / "noisy_data.npy", noisy_data)
        if noisy_image:
            written["noisy_data.png"] = save_png(new / "noisy_data.png", noisy_data,
                                                 vmin=None, vmax=None)
        if has_decoder:
            written["decoder.npy"] = save_npy(new / "decoder.npy", decoder)
            written["decoder.png"] = save_png(new / "decoder.png", decoder)
        written["README.txt"] = _write_readme(new / "README.txt",
                                             [*written, "README.txt", "result.json"])
        doc = dict(document() if callable(document) else document)
        doc["files"] = sorted([*written, "result.json"])
        written["result.json"] = write_json(new / "result.json", doc)
    return {name: out / name for name in written}


def _is_image(shape: tuple[int, ...]) -> bool:
    """An array a PNG shows as a picture: (H, W) or (C, H, W) with H, W > 1 (a code
    vector is not)."""
    dims = list(shape)
    while len(dims) > 3 and dims[0] == 1:
        dims = dims[1:]
    return len(dims) in (2, 3) and dims[-1] > 1 and dims[-2] > 1


def _write_readme(path: Path, names: Sequence[str]) -> Path:
    """README.txt: every file of the folder with one line saying what it is."""
    width = max(len(n) for n in names)
    lines = ["Files of this lbi result folder:", ""]
    lines += [f"{n.ljust(width)}  {FILE_NOTES[n]}" for n in sorted(names)]
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path
