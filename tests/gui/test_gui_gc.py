"""The cyclic garbage collector runs only on the GUI thread once a window exists (gui_gc)."""

from __future__ import annotations

import gc
import threading

from lbi_gui import gui_gc


def test_window_moves_collection_to_the_gui_thread(qtbot, make_window, fake_engine) -> None:
    fake_engine()
    make_window()
    assert gui_gc.installed()
    assert not gc.isenabled()  # no automatic collection in the solver or reader threads

    collected_on: list[str] = []

    def note(phase: str, info: dict) -> None:
        if phase == "start":
            collected_on.append(threading.current_thread().name)

    gc.callbacks.append(note)
    try:
        for _ in range(3 * gc.get_threshold()[0]):  # enough garbage to pass generation 0
            a: list = []
            a.append(a)
        qtbot.waitUntil(lambda: bool(collected_on), timeout=5000)
    finally:
        gc.callbacks.remove(note)
    assert set(collected_on) == {threading.main_thread().name}
