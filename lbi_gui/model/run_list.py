"""The list of finished runs: adding, removing, notes and tags, filtering, sorting, CSV.

Why here and not in the table widget: all of this is application state with rules a test
should check without a window (which runs a filter keeps, in which order a column sorts,
which runs are not in a saved session). :class:`~lbi_gui.widgets.run_table.RunTable` draws a
:class:`RunList` and follows its events (through the Qt bridge); it keeps only what is about
pixels (row items, selection, the compare view).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from lbi_gui.model.events import Events
from lbi_gui.model.runs import RunResult

#: The run table's columns, in order (the keys of :meth:`RunResult.table_row`).
COLUMNS = ["run", "network", "method", "regulariser", "alpha", "alpha rule",
           "noise", "sample", "iterations",
           "time [s]", "stop", "check", "restarts", "segments", "PSNR", "SSIM", "decoder PSNR",
           "discrepancy", "objective", "notes"]


def cell_text(value: Any) -> str:
    """How a value reads in a table cell (and what the filter matches): 4 significant digits
    for floats, "—" for a missing value."""
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def sort_key(value: Any) -> tuple[int, float, str]:
    """Numbers sort as numbers, before everything else; the rest sorts by its cell text."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and not (isinstance(value, float) and math.isnan(value)):
        return (0, float(value), "")
    return (1, 0.0, value if isinstance(value, str) else cell_text(value))


def row_texts(run: RunResult) -> list[str]:
    """The texts of ``run``'s row, one per column (the note as the user wrote it)."""
    row = run.table_row()
    return [run.notes if key == "notes" else cell_text(row[key]) for key in COLUMNS]


def matches(run: RunResult, text: str) -> bool:
    """True when every word of ``text`` (case-insensitive) is in some cell of ``run``'s row,
    so "#baseline joint" keeps the joint runs tagged #baseline."""
    cells = [c.lower() for c in row_texts(run)]
    return all(any(word in cell for cell in cells) for word in text.lower().split())


def normalise_note(text: str) -> str:
    """One line with single spaces: the CSV and the table stay tidy."""
    return " ".join(str(text).split())


class RunList:
    """Finished runs in the order they finished; run ids are unique.

    Events (plain callbacks): ``added(run)``, ``removed(runs)``, ``reset(runs)`` (everything
    replaced), ``note_changed(run)``.
    """

    def __init__(self, runs: Iterable[RunResult] = ()) -> None:
        self._runs: list[RunResult] = []
        #: Ids of the runs that are in the last saved (or opened) session file.
        self.saved_ids: set[int] = set()
        self.events = Events("added", "removed", "reset", "note_changed")
        for run in runs:
            self._append(run)

    # ---- reading -------------------------------------------------------------------------
    @property
    def runs(self) -> list[RunResult]:
        """The runs, oldest first (a copy: change the list through this object's methods)."""
        return list(self._runs)

    def __len__(self) -> int:
        return len(self._runs)

    def __iter__(self) -> Iterator[RunResult]:
        return iter(list(self._runs))

    def __bool__(self) -> bool:
        return bool(self._runs)

    def get(self, run_id: int | None) -> RunResult | None:
        return next((r for r in self._runs if r.run_id == run_id), None)

    def ids(self) -> list[int]:
        return [r.run_id for r in self._runs]

    # ---- changing ------------------------------------------------------------------------
    def _append(self, run: RunResult) -> None:
        if self.get(run.run_id) is not None:
            raise ValueError(f"run #{run.run_id} is in the list already")
        self._runs.append(run)

    def add(self, run: RunResult) -> None:
        """Append a finished run (not yet in any saved session)."""
        self._append(run)
        self.events.added.emit(run)

    def remove(self, run_ids: Iterable[int]) -> list[RunResult]:
        """Remove the runs with these ids; returns those that were there."""
        gone = set(run_ids)
        removed = [r for r in self._runs if r.run_id in gone]
        if removed:
            self._runs = [r for r in self._runs if r.run_id not in gone]
            self.saved_ids -= gone
            self.events.removed.emit(removed)
        return removed

    def replace_all(self, runs: Iterable[RunResult], *, saved: bool = False) -> None:
        """Replace every run (a session was opened: ``saved`` marks them as in its file)."""
        fresh = RunList(runs)  # checks the ids before anything changes
        self._runs = fresh._runs
        self.saved_ids = set(fresh.ids()) if saved else set()
        self.events.reset.emit(self.runs)

    def set_note(self, run_id: int, text: str) -> bool:
        """Set a run's note (one line; words starting with '#' are its tags). An edited
        note is not in the saved session yet. Returns False when nothing changed."""
        run = self.get(run_id)
        text = normalise_note(text)
        if run is None or text == run.notes:
            return False
        run.notes = text
        self.saved_ids.discard(run_id)
        self.events.note_changed.emit(run)
        return True

    # ---- sessions ------------------------------------------------------------------------
    def mark_saved(self) -> None:
        """Every run is now in a saved session file."""
        self.saved_ids = set(self.ids())

    def unsaved(self) -> list[RunResult]:
        """Runs in no saved session (quit asks about them)."""
        return [r for r in self._runs if r.run_id not in self.saved_ids]

    # ---- views ---------------------------------------------------------------------------
    def filtered(self, text: str) -> list[RunResult]:
        """The runs :func:`matches` keeps for the filter ``text``."""
        return [r for r in self._runs if matches(r, text)]

    def tags(self) -> list[str]:
        """Every tag used in some note, sorted, without repeats."""
        return sorted({tag for run in self._runs for tag in run.tags})

    def with_tag(self, tag: str) -> list[RunResult]:
        tag = tag if tag.startswith("#") else f"#{tag}"
        return [r for r in self._runs if tag in r.tags]

    def sorted(self, column: str, descending: bool = False) -> list[RunResult]:
        """The runs ordered by a table column (see :func:`sort_key`); ties keep run order."""
        if column not in COLUMNS:
            raise KeyError(f"no column {column!r}; these exist: {', '.join(COLUMNS)}")
        return sorted(self._runs, key=lambda r: sort_key(r.table_row()[column]),
                      reverse=descending)

    def csv(self, order: Iterable[int] | None = None) -> str:
        """Every run with every column, in ``order`` (run ids; default: run order)."""
        from lbi_engine.results.exports import csv_text

        by_id = {r.run_id: r for r in self._runs}
        ids = self.ids() if order is None else [i for i in order if i in by_id]
        return csv_text(COLUMNS, [list(by_id[i].table_row().values()) for i in ids])
