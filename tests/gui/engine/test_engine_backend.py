"""Both solver backends, and the engines they drive, satisfy one Protocol each."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest

from lbi_gui.engine import messages as m
from lbi_gui.engine.backend import EngineApi, EngineBackend, signal_dispatcher
from tests.gui.fake_engine import make_fake_engine


def _protocol_methods(proto: type) -> dict[str, inspect.Signature]:
    return {name: inspect.signature(fn) for name, fn in vars(proto).items()
            if callable(fn) and not name.startswith("_")}


def _check_signatures(obj: Any, proto: type) -> None:
    """Each method accepts a call made the way the Protocol declares it: its positional
    parameters by position, its keyword-only ones by name (isinstance checks names only)."""
    for name, sig in _protocol_methods(proto).items():
        params = [p for p in sig.parameters.values() if p.name != "self"]
        args = [object() for p in params if p.kind is p.POSITIONAL_OR_KEYWORD]
        kwargs = {p.name: object() for p in params if p.kind is p.KEYWORD_ONLY}
        try:
            inspect.signature(getattr(obj, name)).bind(*args, **kwargs)
        except TypeError as exc:
            raise AssertionError(f"{name}() cannot be called as {proto.__name__} says: "
                                 f"{exc}") from exc


def test_thread_backend_satisfies_the_protocol(qtbot) -> None:
    from lbi_gui.engine.worker import ThreadBackend

    backend = ThreadBackend()
    try:
        assert isinstance(backend, EngineBackend)
        _check_signatures(backend, EngineBackend)
        assert backend.name == "thread"
    finally:
        assert backend.shutdown(5000)


def test_process_backend_satisfies_the_protocol(qtbot) -> None:
    from lbi_gui.engine.host import EngineHost
    from lbi_gui.engine.process import ProcessBackend

    host = EngineHost()  # no child is started: nothing is sent
    backend = ProcessBackend(host=host)
    try:
        assert isinstance(backend, EngineBackend)
        _check_signatures(backend, EngineBackend)
        assert backend.name == "process" and host.pid is None
    finally:
        assert backend.shutdown(1000)
        host.shutdown()


def test_the_controller_is_given_a_protocol_backend(qtbot, fake_engine) -> None:
    from lbi_gui.window.controller import RunController

    fake_engine()
    ctl = RunController(backend="thread")
    try:
        assert isinstance(ctl.backend, EngineBackend)
    finally:
        ctl.shutdown(5000)


def test_an_object_missing_a_method_is_not_a_backend() -> None:
    half = SimpleNamespace(name="x", booted=None, prepared=None, progress=None, run_done=None,
                           failed=None, thread=None, boot=lambda: None)
    assert not isinstance(half, EngineBackend)


def test_the_fake_engine_satisfies_the_engine_protocol() -> None:
    fake = make_fake_engine()
    assert isinstance(fake, EngineApi)
    _check_signatures(fake, EngineApi)


def test_the_real_engine_satisfies_the_engine_protocol() -> None:
    from lbi_gui import engine

    real = engine.default_factory()()  # imports torch (a few seconds)
    assert isinstance(real, EngineApi)
    for name in ("prepare", "iterate", "final_metrics"):
        got = set(inspect.signature(getattr(real, name)).parameters)
        want = {p for p in _protocol_methods(EngineApi)[name].parameters if p != "self"}
        assert want <= got, f"engine.{name} lacks {want - got}"


class _Signal:
    def __init__(self, log: list, name: str) -> None:
        self.log, self.name = log, name

    def emit(self, *args: Any) -> None:
        self.log.append((self.name, args))


@pytest.mark.parametrize(("event", "signal", "args"), [
    (m.Booted({"cuda": False}), "booted", ({"cuda": False},)),
    (m.Prepared(4, "info"), "prepared", (4, "info")),
    (m.ProgressReport("prog"), "progress", ("prog",)),
    (m.RunDone("out"), "run_done", ("out",)),
    (m.Failed(2, "err"), "failed", (2, "err")),
])
def test_events_become_the_signals_of_the_protocol(event, signal, args) -> None:
    log: list = []
    target = SimpleNamespace(**{s: _Signal(log, s) for s in
                                ("booted", "prepared", "progress", "run_done", "failed")})
    signal_dispatcher(target, "test")(event)
    assert log == [(signal, args)]
    with pytest.raises(m.UnknownMessageError):
        signal_dispatcher(target, "test")(m.Pong(1))
    assert isinstance(event, m.EVENTS)
