"""Sphinx configuration of lbi's documentation.

Build: ``sphinx-build -W -b html docs docs/_build/html`` (the ``docs`` extra installs Sphinx and
myst-parser). The suite builds it with warnings as errors (tests/docs/test_build.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

from lbi_engine import __version__  # noqa: E402

project = "lbi"
author = "lbi developers"
copyright = "lbi developers, MIT licence"  # noqa: A001 (Sphinx's name)
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "lbi_cli_reference",
]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "_ext"]

# The Markdown pages use $...$ maths, definition-free headings and GitHub-style anchors.
myst_enable_extensions = ["dollarmath", "amsmath", "deflist"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}
napoleon_google_docstring = True
napoleon_numpy_docstring = False
# "Attributes:" sections as field lists: autodoc documents the fields themselves once.
napoleon_use_ivar = True

html_theme = "alabaster"
html_title = f"lbi {__version__}"
html_static_path: list[str] = []
