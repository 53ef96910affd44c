"""CSV text lbi writes (curves.csv, a sweep's results.csv, the GUI's run list): empty cells for
undefined values, round-trip floats, and text cells that a spreadsheet would run as a formula
neutralised (and restored when lbi reads its own CSV back).

Part of the one results writer (:mod:`lbi_engine.results.exports` re-exports these).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Iterable, Sequence
from typing import Any


def _format_cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)  # shortest round-trip representation: no precision is lost
    return str(value)


def csv_text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """CSV with empty cells for undefined values and round-trip float formatting; text that a
    spreadsheet would run as a formula is neutralised (:func:`neutralise_cell`)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    # csv quotes a cell with "\n" (the line end) but not one with a bare "\r", which readers
    # take as a line end too: such rows are written fully quoted
    quoted = csv.writer(buffer, lineterminator="\n", quoting=csv.QUOTE_ALL)
    writer.writerow(header)
    for row in rows:
        cells = [neutralise_cell(_format_cell(v)) for v in row]
        (quoted if any("\r" in c for c in cells) else writer).writerow(cells)
    return buffer.getvalue()


#: What makes a spreadsheet read a cell as a formula (OWASP, "CSV Injection").
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutralise_cell(text: str) -> str:
    """``'`` before a text cell that starts like a formula (OWASP): a network name such as
    ``=HYPERLINK(...)`` read from a file must not run when results.csv is opened in a
    spreadsheet. Numbers (``-0.5``, ``-inf``) stay as they are. Cells that already start
    with ``'`` before such a character get one more, so :func:`restore_cell` is exact."""
    if text.lstrip("'").startswith(_FORMULA_START) and not _is_number(text):
        return "'" + text
    return text


def restore_cell(text: str) -> str:
    """The cell :func:`neutralise_cell` was given (for reading a CSV lbi wrote)."""
    if text.startswith("'") and text.lstrip("'").startswith(_FORMULA_START):
        return text[1:]
    return text


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return text.strip() == text
