"""The documentation builds with warnings as errors, and its generated references are whole."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.docs import _blocks

DOCS = _blocks.ROOT / "docs"


@pytest.fixture(scope="module")
def html(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("sphinx")
    pytest.importorskip("myst_parser")
    out = tmp_path_factory.mktemp("html")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html",
         str(DOCS), str(out)],
        capture_output=True, text=True, timeout=600, cwd=_blocks.ROOT)
    assert done.returncode == 0, done.stderr[-4000:]
    return out


def test_every_page_is_built(html: Path) -> None:
    sources = {p.relative_to(DOCS).with_suffix("").as_posix() for p in DOCS.rglob("*.md")
               if "_build" not in p.parts}
    built = {p.relative_to(html).with_suffix("").as_posix() for p in html.rglob("*.html")}
    assert sources <= built, sources - built  # -W also fails on a page left out of the toctree


def test_cli_reference_is_every_subcommands_help(html: Path) -> None:
    from lbi_engine.cli import build_parser

    page = (html / "reference" / "cli.html").read_text(encoding="utf-8")
    subparsers = next(a for a in build_parser()._actions if hasattr(a, "choices")
                      and isinstance(a.choices, dict))
    for name in subparsers.choices:
        assert f'id="cli-lbi-{name}"' in page, name
    for flag in ("--resize", "--noise-level", "--workers", "--allow-code"):
        assert flag in page, flag


def test_api_reference_describes_the_request_fields(html: Path) -> None:
    import html as markup

    page = markup.unescape(re.sub(r"<[^>]+>", "", (html / "reference" / "api.html")
                                  .read_text(encoding="utf-8")))
    page = " ".join(page.split())
    # each field's description from its class docstring reaches the page, with its type
    for text in ("resize (bool) \u2013 resize image to the network",
                 "noise_level (float | None) \u2013 the per-entry noise std",
                 "stop_reason (str | None) \u2013 why the run ended",
                 "max_iter (int) \u2013 iteration cap"):
        assert text in page, text
