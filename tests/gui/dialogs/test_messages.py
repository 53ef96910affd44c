"""The error dialogs: an exception in a slot shows a dialog and the window keeps going."""

from __future__ import annotations


def test_excepthook_shows_a_dialog_and_keeps_going(qtbot, monkeypatch) -> None:
    import sys

    from lbi_gui.dialogs import messages

    monkeypatch.setattr(sys, "excepthook", lambda *a: None)
    messages.install_excepthook(lambda: None)
    n = len(messages.OPEN_ERRORS)
    try:
        raise RuntimeError("boom in a slot")
    except RuntimeError as exc:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    box = messages.OPEN_ERRORS[-1]
    assert len(messages.OPEN_ERRORS) == n + 1
    assert "boom in a slot" in box.informativeText()
    assert "Traceback" in box.detailedText()
    box.close()
