"""Render a PNG of the lbi-gui window after a short run (offscreen, no screen needed).

    python scripts/screenshot.py                 # -> docs/screenshot_1280x720.png
    python scripts/screenshot.py --out shot.png --alpha 0.1 --max-iter 300 --size 1600x1000
    python scripts/screenshot.py --compare layerwise --tab runs   # two methods compared

Uses a throw-away settings folder, so the remembered layout of a real user is neither read
nor changed. Exit code 1 if the run fails or times out.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def wait_until(app, condition, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        app.processEvents()
        if condition():
            return True
        time.sleep(0.01)
    return condition()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "docs" / "screenshot_1280x720.png"))
    p.add_argument("--max-iter", type=int, default=None, help="default: the app's own")
    p.add_argument("--sample", type=int, default=7)
    p.add_argument("--network", default=None, help="zoo network (default: the app's own)")
    p.add_argument("--dataset", default=None, help="bundled dataset (default: the network's)")
    p.add_argument("--noise-std", type=float, default=0.33)
    p.add_argument("--alpha", default="auto",
                   help="auto (the app's default: one run, alpha chosen from the data) or a "
                        "number (two runs, at alpha/3 and alpha, for the comparison table)")
    p.add_argument("--size", default="1600x1000", help="window size WxH in pixels")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--tab", choices=["curves", "runs", "network"], default="curves",
                   help="which tabbed panel to show in front")
    p.add_argument("--compare", metavar="METHOD", default=None,
                   help="a second run with METHOD after the first (e.g. layerwise); the two "
                        "runs are selected: compared in the Runs tab, overlaid on the curves")
    args = p.parse_args(argv)
    width, height = (int(v) for v in args.size.lower().split("x"))

    from PySide6 import QtCore, QtWidgets

    settings_dir = tempfile.mkdtemp(prefix="lbi-screenshot-")
    QtCore.QSettings.setPath(QtCore.QSettings.Format.IniFormat,
                             QtCore.QSettings.Scope.UserScope, settings_dir)
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    from lbi_gui.window.main_window import MainWindow

    alpha: float | str = args.alpha if args.alpha == "auto" else float(args.alpha)
    request = {"index": args.sample, "alpha": alpha, "noise_std": args.noise_std}
    if args.max_iter is not None:
        request["max_iter"] = args.max_iter
    if args.network is not None:
        from lbi_engine.models import zoo_data

        request["network"] = args.network
        shape = zoo_data.zoo_input_shape(args.network)
        dataset = args.dataset or zoo_data.dataset_for(shape, "mnist") or "mnist"
        request.update(dataset=dataset, split=zoo_data.FIRST_SPLIT.get(dataset, "val"))
    win = MainWindow(request, restore_layout=False)
    win.resize(width, height)
    win.show()
    if not wait_until(app, lambda: win.info is not None, args.timeout):
        print("screenshot: the engine did not become ready", file=sys.stderr)
        return 1
    if alpha != "auto":  # a first run at a smaller α, so the run table has two rows
        win.reg_panel.set_values({"alpha": alpha / 3})
        win.set_request(win.current_request())
        win.run()
        wait_until(app, lambda: not win.controller.running, args.timeout)
        win.reg_panel.set_values({"alpha": alpha})
        win.set_request(win.current_request())
    win.run()
    ok = wait_until(app, lambda: not win.controller.running, args.timeout)
    if ok and args.compare:
        win.set_request({**win.current_request(), "method": args.compare})
        win.run()
        ok = wait_until(app, lambda: not win.controller.running, args.timeout)
    if not ok or not win.run_table.runs:
        print("screenshot: the run did not finish", file=sys.stderr)
        return 1
    win.docks["curves"].raise_()
    if args.compare:
        win.run_table.select_ids([r.run_id for r in win.run_table.runs[-2:]])
    if args.tab == "runs":
        win.docks["runs"].raise_()
        win.run_table.select_ids([r.run_id for r in win.run_table.runs[:2]])
    elif args.tab == "network":
        win.docks["network"].raise_()
    wait_until(app, lambda: False, 0.5)  # let the last redraws land
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if not win.grab().save(str(out)):
        print(f"screenshot: could not write {out}", file=sys.stderr)
        return 1
    runs = ", ".join(f"{r.request['method']} α {r.table_row()['alpha']:.3g} "
                     f"{r.metrics.get('psnr', float('nan')):.2f} dB" for r in win.run_table.runs)
    print(f"wrote {out} ({width}x{height}); runs: {runs}; decoder "
          f"{win.info.decoder_psnr:.2f} dB")
    win.confirm_quit = False  # the screenshot's runs are not the user's
    win.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
