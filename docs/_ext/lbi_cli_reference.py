"""``lbi-cli`` directive: the ``lbi`` command's help, generated from its argparse parsers.

The reference page cannot drift from the command: each section is the ``--help`` text that
``lbi_engine.cli.build_parser()`` prints, one section per subcommand, in the parser's order.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

#: Help text is wrapped to the terminal's width; fix it so the page does not depend on where
#: it is built.
HELP_COLUMNS = "100"


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps subparsers only here
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _section(title: str, anchor: str, text: str) -> nodes.section:
    section = nodes.section(ids=[anchor], names=[nodes.fully_normalize_name(title)])
    section += nodes.title(text=title)
    section += nodes.literal_block(text, text)
    return section


class LbiCliDirective(SphinxDirective):
    """Insert one section per ``lbi`` subcommand holding its ``--help``."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        from lbi_engine.cli import build_parser

        before = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = HELP_COLUMNS
        try:
            parser = build_parser()
            out = [_section("lbi", "cli-lbi", parser.format_help())]
            for name, sub in _subcommands(parser).items():
                out.append(_section(f"lbi {name}", f"cli-lbi-{name}", sub.format_help()))
        finally:
            if before is None:
                os.environ.pop("COLUMNS", None)
            else:
                os.environ["COLUMNS"] = before
        return out


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("lbi-cli", LbiCliDirective)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
