"""Entry point of ``lbi-gui``: command-line options, QApplication, the window.

The options mirror ``lbi invert`` so that a command line can open the window pre-configured
(``--run`` starts at once). Parsing needs no torch or Qt. The engine runs, by default, in a
child process (:mod:`lbi_gui.engine.process`) that ends with the app; :func:`main` starts it
first of all, before importing Qt, so that its torch import and network loading overlap the
window's construction (:mod:`lbi_gui.engine.prestart`).
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lbi_gui.params import METHODS, REGULARISERS, default_request, prior_base


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="lbi-gui", description="Desktop application for lifted Bregman inversion of "
        "pre-trained neural networks. Options pre-configure the window (same as `lbi invert`).")
    p.add_argument("file", nargs="?", help="a session (.lbisession), network or image to open")
    p.add_argument("--network", help="zoo name (e.g. mnist-cnn-ae) or network file")
    p.add_argument("--input-shape", help="network input shape without batch, e.g. 1,28,28")
    p.add_argument("--dataset", help="bundled dataset name (default mnist)")
    p.add_argument("--sample", type=int, help="sample index in the dataset split")
    p.add_argument("--split", help="dataset split (val or train)")
    p.add_argument("--image", help="ground-truth image file (PNG, JPEG, TIFF, NPY)")
    p.add_argument("--truth", help="ground truth for a measured y (--data)")
    p.add_argument("--data", help="measured network output y (NPY)")
    p.add_argument("--resize", action="store_true", default=None,
                   help="resize --image to the network's input size")
    p.add_argument("--allow-code", "--allow-pickle", dest="allow_pickle", action="store_true",
                   default=None,
                   help="consent, for this run, to open a model whose loading runs code from "
                        "the file (TorchScript, a pickled whole model); trusted files only")
    p.add_argument("--noise-std", type=float, help="Gaussian noise standard deviation")
    p.add_argument("--seed", type=int, help="noise seed")
    p.add_argument("--alpha", type=_alpha, help="regularisation weight α, or auto (chosen from "
                   "the data; the default)")
    p.add_argument("--regulariser", choices=[r for r, _ in REGULARISERS])
    p.add_argument("--method", choices=[m for m, _ in METHODS])
    p.add_argument("--steps", choices=["auto", "accelerated", "balanced", "safe",
                                       "conservative", "paper"])
    p.add_argument("--max-iter", type=int)
    p.add_argument("--tol", type=float)
    p.add_argument("--tol-mode", choices=["objective", "relative", "absolute"])
    p.add_argument("--time-budget", type=float, help="stop after this many solver seconds")
    p.add_argument("--layer-alphas", help="per-layer α of the layer-wise method, e.g. 0.01,0.02")
    p.add_argument("--feature-prior", metavar="P",
                   help="the feature prior of the layer-wise method: P.json + P.safetensors "
                        "from `lbi feature-prior NET --samples clean.npy --out P`")
    p.add_argument("--device", help="cpu or cuda")
    p.add_argument("--dtype", choices=["float32", "float64"])
    p.add_argument("--threads", type=int, help="solver threads (default 1)")
    p.add_argument("--report-every", type=int, help="report every N iterations")
    p.add_argument("--run", action="store_true", help="start the inversion at once")
    p.add_argument("--no-restore", action="store_true",
                   help="ignore the remembered window layout")
    p.add_argument("--smoke-test", action="store_true",
                   help="run one short inversion on the bundled default, print its PSNR and "
                        "exit 0 on success (checks an installation or a desktop bundle)")
    return p


def _alpha(text: str) -> float | str:
    return "auto" if text.strip().lower() == "auto" else float(text)


def request_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The request overrides the options ask for (unset options keep the defaults)."""
    mapping = {"network": "network", "dataset": "dataset", "sample": "index", "split": "split",
               "image": "image", "truth": "truth", "data": "data", "noise_std": "noise_std",
               "seed": "seed", "alpha": "alpha", "regulariser": "regulariser",
               "method": "method", "steps": "steps", "max_iter": "max_iter", "tol": "tol",
               "device": "device", "dtype": "dtype", "threads": "threads",
               "report_every": "report_every", "resize": "resize",
               "allow_pickle": "allow_pickle", "tol_mode": "tol_mode",
               "time_budget": "time_budget", "feature_prior": "feature_prior"}
    req = default_request()
    for opt, key in mapping.items():
        value = getattr(args, opt)
        if value is not None:
            req[key] = value
    if args.input_shape:
        from lbi_gui.widgets.network_panel import parse_shape  # imports Qt: only when asked

        req["input_shape"] = parse_shape(args.input_shape)
    if args.layer_alphas:
        req["layer_alphas"] = [float(v) for v in args.layer_alphas.split(",") if v.strip()]
    for key in ("image", "truth", "data", "feature_prior"):
        if req[key]:
            req[key] = str(Path(req[key]).expanduser().resolve())
    if req["feature_prior"]:  # the window holds a prior by its BASE, as the request does
        req["feature_prior"] = prior_base(req["feature_prior"])
    if req["network"] and Path(req["network"]).expanduser().exists():
        req["network"] = str(Path(req["network"]).expanduser().resolve())
    elif args.network and args.dataset is None and not any(req[k] for k in
                                                              ("image", "truth", "data")):
        # a zoo network without --dataset: its own bundled data, as `lbi invert` picks it
        # (natural-cnn-ae takes colour patches, not the default MNIST digits)
        from lbi_engine.models.zoo_data import FIRST_SPLIT, dataset_for, zoo_input_shape

        fits = dataset_for(zoo_input_shape(args.network), str(req["dataset"]))
        if fits is not None and fits != req["dataset"]:
            req["dataset"] = fits
            if args.split is None:
                req["split"] = FIRST_SPLIT.get(fits, req["split"])
    return req


def main(argv: list[str] | None = None) -> int:
    # In a frozen app (PyInstaller) the engine child is this executable started again:
    # freeze_support() turns that start into the child instead of a second window.
    multiprocessing.freeze_support()
    args = build_parser().parse_args(argv)
    try:
        request = request_from_args(args)
    except ValueError as exc:
        print(f"lbi-gui: --input-shape or --layer-alphas: {exc}; give comma-separated numbers",
              file=sys.stderr)
        return 2
    prestarted = _prestart_engine(request, warm=not args.file)
    from PySide6 import QtGui, QtWidgets

    from lbi_gui.dialogs.messages import install_excepthook
    from lbi_gui.window.main_window import MainWindow

    existing = QtWidgets.QApplication.instance()
    # a window needs a QApplication; a QCoreApplication made elsewhere cannot show one
    app = existing if isinstance(existing, QtWidgets.QApplication) else \
        QtWidgets.QApplication(sys.argv[:1])
    app.setApplicationName("lbi-gui")
    app.setOrganizationName("lbi")
    app.setApplicationDisplayName("lbi")
    if prestarted:
        from lbi_gui.settings import engine_backend

        if engine_backend() != "process":  # the setting (QSettings) needs Qt to be read
            from lbi_gui.engine import prestart

            prestart.discard()
    from lbi_engine.data.resource_files import resources_dir
    from lbi_engine.errors import DataFileError

    try:
        icon = resources_dir() / "icons" / "lbi.png"
    except DataFileError:  # no icon is no reason not to start; the run will name the problem
        icon = Path("/nonexistent")
    if icon.is_file():
        app.setWindowIcon(QtGui.QIcon(str(icon)))
    if args.smoke_test:
        request["max_iter"] = min(int(request.get("max_iter") or 200), 200)
    window = MainWindow(request, autorun=args.run or args.smoke_test,
                        restore_layout=not args.no_restore and not args.smoke_test)
    for hook in WINDOW_HOOKS:
        hook(window)
    try:
        if args.smoke_test:
            return _smoke_test(app, window)
        install_excepthook(lambda: window)
        window.show()
        if args.file:
            window.files.open_path(str(Path(args.file).expanduser().resolve()))
        code = int(app.exec())
        _close_down(app, window)
        return code
    finally:
        _end_engine()


#: Called with the main window before it is shown (benchmarks/bench_startup.py times the
#: start-up through this; an embedding application may use it too).
WINDOW_HOOKS: list[Callable[[Any], None]] = []


def _prestart_engine(request: dict[str, Any], warm: bool) -> bool:
    """Start the engine child now, before Qt is imported, and let it warm ``request`` (the
    window's initial problem) unless ``warm`` is False (a file to open will replace it).
    Skipped where the thread backend is asked for by the environment; the setting, read
    once Qt is up, may still discard the child."""
    import os

    if (os.environ.get("LBI_ENGINE_BACKEND") or "process").strip().lower() != "process":
        return False
    from lbi_gui.engine import prestart

    return prestart.prestart(dict(request) if warm else None)


def _end_engine() -> None:
    """End the engine child now (atexit would too, later and after Qt is gone)."""
    module = sys.modules.get("lbi_gui.engine.host")
    if module is not None:
        module.shutdown_host()
    module = sys.modules.get("lbi_gui.engine.prestart")
    if module is not None:
        module.discard()  # started early but never adopted (no job was sent)


def _close_down(app: Any, window: Any) -> None:
    """After the event loop: end the engine child, then delete the window inside Qt, not in
    the interpreter's finalization. A window left to finalization, with records from the
    child still queued for it, ended the process with SIGSEGV after its work was done (about
    every second ``--smoke-test`` once runs reported every few iterations; a known PySide6
    end-of-process crash class, PYSIDE-2254)."""
    from PySide6 import QtCore

    _end_engine()  # no more messages from the child into a closing window
    window.deleteLater()
    app.processEvents()
    app.sendPostedEvents(None, QtCore.QEvent.Type.DeferredDelete.value)


def _smoke_test(app: Any, window: Any, timeout_ms: int = 240_000) -> int:
    """Runs the window's autorun to its end; exit 0 when it finished with a finite PSNR."""
    import math

    from PySide6 import QtCore

    outcome: dict[str, Any] = {}

    def finished(result: Any) -> None:
        outcome["result"] = result
        app.quit()

    def failed(error: Any) -> None:
        outcome["error"] = error
        app.quit()

    controller = window.controller
    window.files.confirm_quit = False  # the smoke test's run is not the user's
    controller.run_finished.connect(finished)
    controller.run_failed.connect(failed)
    controller.boot_failed.connect(failed)
    controller.prepare_failed.connect(failed)
    QtCore.QTimer.singleShot(timeout_ms, app.quit)
    window.show()
    app.exec()
    window.close()
    _close_down(app, window)
    result = outcome.get("result")
    psnr = None if result is None else result.metrics.psnr
    if result is None or psnr is None or not math.isfinite(psnr):
        print(f"lbi-gui smoke test FAILED: {outcome.get('error') or 'no finished run'}",
              file=sys.stderr)
        return 1
    print(f"lbi-gui smoke test OK: {result.iterations} iterations, PSNR {psnr:.2f} dB, "
          f"stop reason {result.stop_reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
