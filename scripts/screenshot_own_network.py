"""Screenshots of the window inverting one's own 64×64 colour network on one's own photo.

    xvfb-run -a -s "-screen 0 1280x720x24" env QT_QPA_PLATFORM=xcb \
        .venv/bin/python scripts/screenshot_own_network.py docs/screenshot_own_1280x720.png
    xvfb-run -a -s "-screen 0 1920x1080x24" env QT_QPA_PLATFORM=xcb \
        .venv/bin/python scripts/screenshot_own_network.py docs/screenshot_own_1920x1080.png

The network (two strided convolutions with ReLU, random weights, saved as weights + model
card: opening it runs no code) and the photo (scikit-image's bundled astronaut, cropped and
resized to 64×64) are written to a temporary folder; the window opens them as a user would
(File → Open network, File → Open image), runs the default inversion and grabs the whole
screen once the run has finished. Throw-away settings: a user's layout is neither read nor
changed. Exit code 1 if the run fails or times out.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def own_network(folder: Path) -> str:
    """A 3×64×64 ReLU CNN encoder as a state dict and its card."""
    import torch
    from torch import nn

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 16, 4, stride=2, padding=1), nn.ReLU(),
                        nn.Conv2d(16, 32, 4, stride=2, padding=1), nn.ReLU())
    path = folder / "my-colour-cnn.pt"
    torch.save(net.state_dict(), path)
    layers = [{"type": "Conv2d", "in_channels": 3, "out_channels": 16, "kernel_size": [4, 4],
               "stride": [2, 2], "padding": [1, 1]}, {"type": "ReLU"},
              {"type": "Conv2d", "in_channels": 16, "out_channels": 32, "kernel_size": [4, 4],
               "stride": [2, 2], "padding": [1, 1]}, {"type": "ReLU"}]
    (folder / "my-colour-cnn.json").write_text(json.dumps(
        {"name": "my-colour-cnn", "format_version": 1, "input_shape": [3, 64, 64],
         "architecture": {"layers": layers, "encoder_layers": 4}}), encoding="utf-8")
    return str(path)


def own_photo(folder: Path) -> str:
    from PIL import Image
    from skimage import data

    path = folder / "my-photo.png"
    Image.fromarray(data.astronaut()[0:300, 100:400]).resize((64, 64), Image.LANCZOS).save(path)
    return str(path)


def main(argv: list[str]) -> int:
    out = Path(argv[0] if argv else ROOT / "docs" / "screenshot_own_1280x720.png")
    from PySide6 import QtCore, QtWidgets

    QtCore.QSettings.setPath(QtCore.QSettings.Format.IniFormat,
                             QtCore.QSettings.Scope.UserScope,
                             tempfile.mkdtemp(prefix="lbi-screenshot-"))
    app = QtWidgets.QApplication.instance() or QtWidgets.QApplication(sys.argv[:1])
    from lbi_gui.window.main_window import MainWindow

    folder = Path(tempfile.mkdtemp(prefix="lbi-own-"))
    network, photo = own_network(folder), own_photo(folder)
    win = MainWindow({"noise_std": 0.05}, restore_layout=False)
    win.show()

    def wait(condition, timeout: float = 300.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end and not condition():
            app.processEvents()
            time.sleep(0.01)
        return bool(condition())

    if not wait(lambda: win.info is not None and win.controller.state == "idle"):
        return 1
    win.open_network(network)
    win.open_data_file("image", photo)
    if not wait(lambda: win.info is not None and win.info.request.get("image") == photo
                and win.info.request.get("network") == network
                and win.controller.state == "idle"):
        print("screenshot: the own network and photo did not prepare", file=sys.stderr)
        return 1
    win.run()
    if not wait(lambda: bool(win.run_table.runs)):
        print("screenshot: the run did not finish", file=sys.stderr)
        return 1
    wait(lambda: False, 1.0)  # the last redraws
    screen = win.screen()
    shot = screen.grabWindow(0)
    out.parent.mkdir(parents=True, exist_ok=True)
    shot.save(str(out))
    grid = win.image_grid
    vb = grid.plots["iterate"].vb
    print(f"{out}: screen {screen.size().width()}×{screen.size().height()}, window "
          f"{win.width()}×{win.height()}, 64-px iterate drawn at "
          f"{64 * vb.width() / vb.viewRect().width():.0f} px; status: "
          f"{win.status_reason.text()!r}")
    win._closing = True  # a screenshot's run is not the user's: no "unsaved runs" question
    win.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
