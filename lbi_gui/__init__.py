"""lbi_gui: the desktop application (Qt/PySide6 + pyqtgraph) over ``lbi_engine``.

Importing this package (or any module in it) never imports torch: the window appears first
and the engine loads in the solver thread.
"""

__version__ = "0.1.0"
