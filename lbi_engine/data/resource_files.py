"""Where the bundled files live: the folder with ``models/``, ``datasets/`` and ``icons/``.

The checkout keeps them in ``resources/``; every install (editable, wheel, ``pip install .``,
pipx, a cluster worker) carries that folder as the package ``lbi_resources`` (setup.py), found
here through :mod:`importlib.resources`, so nothing depends on the current directory or on a
source tree next to the code. Code run from a checkout reads the checkout's own folder.
Imports neither torch nor Qt: the GUI uses it before either.
"""

from __future__ import annotations

import importlib.resources
import os
import sys
from pathlib import Path

from lbi_engine.errors import DataFileError

__all__ = ["PACKAGE", "resources_dir"]

PACKAGE = "lbi_resources"


def _is_resources(folder: Path) -> bool:
    return (folder / "models").is_dir() or (folder / "datasets").is_dir()


def _installed() -> Path | None:
    """The installed ``lbi_resources`` package as a directory, or None if not installed."""
    try:
        root = importlib.resources.files(PACKAGE)
    except ModuleNotFoundError:
        return None
    # Installs unpack to a directory (pip never installs zipped); a zip import would give a
    # Traversable that np.load and safetensors cannot open by path, so it does not count.
    return root if isinstance(root, Path) and _is_resources(root) else None


def _checkout() -> Path | None:
    """``resources/`` of the source checkout this ``lbi_engine`` was imported from, if any.

    Preferred to the installed package so that code run from one checkout (``PYTHONPATH=.``)
    never reads another checkout's or an older install's files; an editable install gives the
    same folder either way. pyproject.toml beside it tells a checkout from site-packages.
    """
    root = Path(__file__).resolve().parents[2]
    folder = root / "resources"
    if (root / "pyproject.toml").is_file() and _is_resources(folder):
        return folder
    return None


def resources_dir() -> Path:
    """The bundled files' folder: ``$LBI_RESOURCES`` if set; inside a PyInstaller bundle its
    ``resources/``; in a source checkout its ``resources/``; else the installed package
    ``lbi_resources`` (wheels, ``pip install .``, pipx), located by :mod:`importlib.resources`.
    """
    env = os.environ.get("LBI_RESOURCES")
    if env:
        p = Path(env).expanduser()
        if not p.is_dir():
            raise DataFileError(f"LBI_RESOURCES={env} is not a directory; point it at the "
                                "folder that contains datasets/ and models/, or unset it")
        return p
    looked: list[str] = []
    if getattr(sys, "frozen", False):  # PyInstaller one-folder/one-file bundles
        frozen = Path(getattr(sys, "_MEIPASS", Path(sys.executable).parent)) / "resources"
        if _is_resources(frozen):
            return frozen
        looked.append(str(frozen))
    for where, found in (("a source checkout", _checkout), (f"package {PACKAGE}", _installed)):
        folder = found()
        if folder is not None:
            return folder
        looked.append(where)
    raise DataFileError(f"bundled resources not found (looked in {', '.join(looked)}); "
                        "reinstall lbi (pip install lbi / pip install -e .), or set "
                        "LBI_RESOURCES to a folder with datasets/ and models/")
