"""The live progress line of ``lbi invert`` and ``lbi sweep``: one line on stderr, redrawn by
rich four times a second (between records too, so the clock moves while a solve works) and
erased when the run ends. Shown only when stderr is a terminal and not ``--quiet``: scripts,
CI logs and pipes get no progress output at all."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lbi_engine.cli import _common as c

#: Redraws per second: at least one a second even when a loaded machine delays some.
REFRESH_PER_SECOND = 4


class _Line:
    """A renderable whose text is read again at every redraw."""

    def __init__(self, text: Callable[[], str]) -> None:
        self._text = text

    def __rich__(self) -> Any:
        from rich.text import Text

        return Text(self._text(), no_wrap=True, overflow="ellipsis")


@contextmanager
def live_line(text: Callable[[], str], quiet: bool) -> Iterator[Callable[[], None]]:
    """Shows ``text()`` as a live line while the block runs; yields a function that redraws
    it at once (for a new stage, so that no stage passes unseen between two redraws)."""
    if quiet or not c.stderr_is_terminal():
        yield lambda: None
        return
    from rich.console import Console
    from rich.live import Live

    console = Console(stderr=True)
    with Live(_Line(text), console=console, refresh_per_second=REFRESH_PER_SECOND,
              transient=True, redirect_stdout=False, redirect_stderr=False) as live:
        yield live.refresh


def alpha_points(request: Any) -> int | None:
    """The most solves the alpha search of ``request`` may take (None: alpha is given)."""
    if request.alpha != "auto":
        return None
    from lbi_engine.settings.solver import ALPHA_START
    from lbi_engine.solvers.alpha import ALPHA_MAX, ALPHA_MIN, FACTOR, MAX_POINTS
    from lbi_engine.solvers.alpha.path import geometric

    rule = request.alpha_rule
    if rule == "auto":
        rule = "discrepancy" if request.noise_std_known() else "quasi-optimality"
    if rule == "discrepancy":
        return int(MAX_POINTS)
    return len(list(geometric(ALPHA_START, FACTOR, ALPHA_MIN, ALPHA_MAX)))
