"""Where the main window opens and how its docks are built (sizes that fit small screens)."""

from __future__ import annotations

from PySide6 import QtCore, QtGui, QtWidgets

from lbi_gui.settings import settings
from lbi_gui.widgets.aux_strip import AUX_MIN_HEIGHT
from lbi_gui.window.parts import Panels, StatusWidgets, Views

#: The window's preferred size; it opens smaller when the screen's available area is smaller.
PREFERRED_SIZE = (1600, 1000)
#: Room left for the window manager's frame and title bar (the geometry excludes them).
FRAME_MARGIN = (16, 40)
#: Side docks never ask for more width than this; narrower content scrolls instead.
DOCK_MAX_MIN_WIDTH = 270
#: Width the images' centre gets before the input column grows (two columns of views, each
#: room for a 64×64 picture at 3×, beside their colour bars).
CENTRE_WIDTH = 560


def fit_geometry(available: QtCore.QRect, wanted: QtCore.QRect | None = None) -> QtCore.QRect:
    """Where the window opens: ``wanted`` (a remembered geometry) or the preferred size
    (centred), shrunk to the screen's ``available`` area and moved inside it.

    The geometry excludes the window manager's frame: a border of ``FRAME_MARGIN[0] / 2`` on
    the left, right and bottom and a title bar making ``FRAME_MARGIN[1]`` in all vertically.
    """
    border = FRAME_MARGIN[0] // 2
    top = FRAME_MARGIN[1] - border
    max_w = max(200, available.width() - FRAME_MARGIN[0])
    max_h = max(200, available.height() - FRAME_MARGIN[1])
    if wanted is None or not wanted.isValid():
        w, h = min(PREFERRED_SIZE[0], max_w), min(PREFERRED_SIZE[1], max_h)
        x = available.x() + border + (max_w - w) // 2
        y = available.y() + top + (max_h - h) // 2
        return QtCore.QRect(x, y, w, h)
    w, h = min(wanted.width(), max_w), min(wanted.height(), max_h)
    x = min(max(wanted.x(), available.x() + border), available.right() + 1 - border - w)
    y = min(max(wanted.y(), available.y() + top), available.bottom() + 1 - border - h)
    return QtCore.QRect(x, y, w, h)


def add_dock(window: QtWidgets.QMainWindow, title: str, widget: QtWidgets.QWidget,
             area: QtCore.Qt.DockWidgetArea, scroll: bool = False,
             max_min_width: int | None = DOCK_MAX_MIN_WIDTH) -> QtWidgets.QDockWidget:
    """A dock named after ``title`` holding ``widget`` (in a scroll area with ``scroll``)."""
    dock = QtWidgets.QDockWidget(title, window)
    dock.setObjectName(f"dock_{title.lower()}")
    if scroll:
        sa = QtWidgets.QScrollArea()
        sa.setWidgetResizable(True)
        sa.setFrameShape(QtWidgets.QFrame.Shape.NoFrame)
        sa.setWidget(widget)
        # Scroll vertically; horizontally only when the user narrows the dock below its
        # content (a dock that insisted on its content's width pushed the window past
        # a 1024-pixel screen).
        need = widget.minimumSizeHint().width() + sa.verticalScrollBar().sizeHint().width() + 2
        sa.setMinimumWidth(need if max_min_width is None else min(max_min_width, need))
        if max_min_width is None:
            sa.setHorizontalScrollBarPolicy(QtCore.Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        widget = sa
    dock.setWidget(widget)
    window.addDockWidget(area, dock)
    return dock


def titled_column(sections: list[tuple[str, QtWidgets.QWidget]]) -> QtWidgets.QWidget:
    """Widgets as titled sections of one column (noise, regularisation and solver)."""
    box = QtWidgets.QWidget()
    lay = QtWidgets.QVBoxLayout(box)
    lay.setContentsMargins(4, 4, 4, 4)
    for title, panel in sections:
        group = QtWidgets.QGroupBox(title)
        g = QtWidgets.QVBoxLayout(group)
        g.setContentsMargins(2, 2, 2, 2)
        g.addWidget(panel)
        lay.addWidget(group)
    lay.addStretch(1)
    return box


def available_area(widget: QtWidgets.QWidget) -> QtCore.QRect:
    """The available area (without panels/taskbars) of the screen ``widget`` is on."""
    screen = widget.screen() or QtGui.QGuiApplication.primaryScreen()
    return screen.availableGeometry() if screen is not None else QtCore.QRect(0, 0, 1280, 720)


def restore_layout(window: QtWidgets.QMainWindow) -> bool:
    """The remembered geometry and dock layout; False when there is none."""
    s = settings()
    geometry, state = s.value("window/geometry"), s.value("window/state")
    if geometry is not None and window.restoreGeometry(geometry):
        # Qt's restore clamps to the screen it sees now; the size the user chose is
        # remembered on its own, and shrunk only to this screen's available area.
        size = s.value("window/size")
        wanted = window.geometry()
        if isinstance(size, QtCore.QSize) and size.isValid():
            wanted.setSize(size)
        if not window.isMaximized():
            window.setGeometry(fit_geometry(available_area(window), wanted))
    return state is not None and bool(window.restoreState(state))


def save_layout(window: QtWidgets.QMainWindow, readable: bool) -> None:
    """Remembers geometry and docks; a layout whose image views are squeezed below a
    readable size (not ``readable``) is not remembered (the next launch starts from the
    default)."""
    s = settings()
    s.setValue("window/geometry", window.saveGeometry())
    normal = window.normalGeometry() if window.isMaximized() else window.geometry()
    s.setValue("window/size", normal.size())
    if readable:
        s.setValue("window/state", window.saveState())
    else:
        s.remove("window/state")


def status_widgets(bar: QtWidgets.QStatusBar) -> StatusWidgets:
    """The permanent widgets of the status bar: state, iteration, speed, time, why the run
    stopped, and the progress bar."""
    state, iteration = QtWidgets.QLabel("Loading the engine…"), QtWidgets.QLabel("k = —")
    speed, time = QtWidgets.QLabel("— it/s"), QtWidgets.QLabel("0.0 s")
    reason, progress = QtWidgets.QLabel(""), QtWidgets.QProgressBar()
    progress.setMaximumWidth(120)
    progress.setTextVisible(False)
    for w in (state, iteration, speed, time, progress, reason):
        bar.addPermanentWidget(w)
    iteration.setMinimumWidth(70)
    speed.setMinimumWidth(60)
    reason.setMinimumWidth(160)
    reason.setMaximumWidth(420)  # a long reason is cut (its tooltip has it whole)
    return StatusWidgets(bar, state, iteration, speed, time, reason, progress)


def build_docks(window: QtWidgets.QMainWindow, panels: Panels,
                views: Views) -> dict[str, QtWidgets.QDockWidget]:
    """The images and the auxiliary strip in the centre, panels, curves and runs in docks
    (tabbed on the left, the parameters on the right); the window at its opening size."""
    centre = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
    centre.addWidget(views.image_grid)
    centre.addWidget(views.aux_strip)
    centre.setStretchFactor(0, 5)
    centre.setStretchFactor(1, 1)
    centre.setSizes([500, AUX_MIN_HEIGHT])
    centre.setCollapsible(0, False)  # the images never vanish behind the strip
    # The strip of auxiliary variables yields its room first: the window's minimum
    # height must stay within a 720-pixel screen with the images at a readable size.
    views.aux_strip.setMinimumHeight(24)
    window.setCentralWidget(centre)
    left, right = QtCore.Qt.DockWidgetArea.LeftDockWidgetArea, \
        QtCore.Qt.DockWidgetArea.RightDockWidgetArea
    parameters = titled_column([("Noise", panels.noise), ("Regularisation", panels.reg),
                                ("Solver", panels.solver)])
    docks = {
        "network": add_dock(window, "Network", panels.network, left, scroll=True),
        "data": add_dock(window, "Data", panels.data, left, scroll=True),
        # Parameters keep their full width (sliders beside values); they scroll vertically.
        "parameters": add_dock(window, "Parameters", parameters, right, scroll=True,
                               max_min_width=None),
        # Curves and runs share the left column with the inputs (tabs): under the images
        # they left a 64×64 picture ~70 pixels at 1280×720; a run raises the curves.
        "curves": add_dock(window, "Curves", views.curves, left),
        "runs": add_dock(window, "Runs", views.run_table, left, scroll=True),
    }
    window.tabifyDockWidget(docks["data"], docks["network"])
    window.tabifyDockWidget(docks["network"], docks["curves"])
    window.tabifyDockWidget(docks["curves"], docks["runs"])
    docks["data"].raise_()
    window.setCorner(QtCore.Qt.Corner.BottomLeftCorner, left)
    window.setCorner(QtCore.Qt.Corner.BottomRightCorner, right)
    window.setGeometry(fit_geometry(available_area(window)))
    return docks


def default_dock_sizes(window: QtWidgets.QMainWindow,
                       docks: dict[str, QtWidgets.QDockWidget]) -> None:
    """Dock proportions that fit the content (only meaningful once the window is shown)."""
    # the images' centre gets CENTRE_WIDTH first (a 64×64 picture at 3× in two
    # columns), the input column what is left of it, within [its minimum, 480]
    params = docks["parameters"].minimumSizeHint().width()
    side = max(DOCK_MAX_MIN_WIDTH, min(480, window.width() - params - CENTRE_WIDTH))
    window.resizeDocks([docks["data"], docks["parameters"]], [side, 370],
                       QtCore.Qt.Orientation.Horizontal)
