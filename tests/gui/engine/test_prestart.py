"""The engine child started before the window: adopted by the host, warmed on
the initial problem, skipped past when the first job wants another network, ended when no
window adopts it."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from lbi_gui import engine
from lbi_gui.engine import messages as m
from lbi_gui.engine import prestart
from lbi_gui.engine.warmup import Warmup
from lbi_gui.params import default_request
from tests.gui.conftest import _forget_bundles
from tests.gui.fake_engine import make_fake_engine

SMALL = {**default_request(), "network": "circle-perceptron", "dataset": "cartoon",
         "split": "disc", "index": 1, "max_iter": 20}


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


class _Inbox:
    """Stands in for a window's ProcessBackend: records what the host delivers."""

    def __init__(self) -> None:
        self.got: list[Any] = []

    def deliver(self, event: Any) -> None:
        self.got.append(event)

    def engine_died(self, why: str) -> None:
        self.got.append(why)

    def has(self, *kinds: type) -> bool:
        return any(isinstance(e, kinds) for e in self.got)


def test_the_host_adopts_the_prestarted_child_and_its_warm_network(qtbot) -> None:
    from lbi_gui.engine.host import EngineHost

    assert prestart.prestart(dict(SMALL))
    proc = prestart._PENDING[0]
    host = EngineHost()
    inbox = _Inbox()
    ch = host.open_channel(inbox)
    try:
        host.send(m.Boot(ch))
        assert host.pid == proc.pid  # adopted, not a second child
        assert prestart._PENDING is None
        qtbot.waitUntil(lambda: inbox.has(m.Booted), timeout=120000)
        assert host.hello is not None and host.hello.qt_modules == ()  # the child has no Qt
        host.send(m.Prepare(ch, 7, dict(SMALL)))
        qtbot.waitUntil(lambda: inbox.has(m.Prepared, m.Failed), timeout=120000)
        event = inbox.got[-1]
        assert isinstance(event, m.Prepared) and event.job_id == 7, event
        assert event.info.network_name == "circle-perceptron"
    finally:
        host.close_channel(ch, 2000)
        host.shutdown()
    assert _gone(proc.pid)


def test_a_child_nobody_adopts_is_ended() -> None:
    assert prestart.prestart(None)
    proc = prestart._PENDING[0]
    assert proc.is_alive()
    prestart.discard()
    assert prestart._PENDING is None and _gone(proc.pid)
    prestart.discard()  # twice is harmless


def test_warmup_loads_prepares_and_iterates_once(monkeypatch) -> None:
    fake = make_fake_engine()
    monkeypatch.setattr(engine, "ENGINE_FACTORY", lambda: fake)
    try:
        warm = Warmup({**default_request(), "network": "fake-net", "max_iter": 5})
        assert warm.done.wait(30)
        assert warm.steps == ["engine", "prepare", "iterate"]
        from lbi_gui.engine import run_driver

        assert any(key[0] == "fake-net" for key in run_driver._BUNDLES)  # kept for the job
    finally:
        _forget_bundles()


@pytest.mark.parametrize("other,expected", [
    ({"network": "another-net"}, ["engine"]),  # its work would be wasted: skipped
    ({"alpha": 0.5}, ["engine", "prepare", "iterate"]),  # the same network: still useful
])
def test_warmup_skips_what_a_job_for_another_network_does_not_need(
        monkeypatch, other: dict[str, Any], expected: list[str]) -> None:
    fake = make_fake_engine()
    gate = threading.Event()

    def slow_engine():  # the job arrives while the engine still loads
        gate.wait(30)
        return fake

    monkeypatch.setattr(engine, "ENGINE_FACTORY", slow_engine)
    try:
        first = {**default_request(), "network": "fake-net", "max_iter": 5}
        warm = Warmup(first)
        warm.note_job({**first, **other})
        gate.set()
        assert warm.done.wait(30)
        assert warm.steps == expected
    finally:
        gate.set()
        _forget_bundles()


def test_warmup_failures_are_left_to_the_real_jobs(monkeypatch) -> None:
    def broken():
        raise ImportError("no torch here")

    monkeypatch.setattr(engine, "ENGINE_FACTORY", broken)
    warm = Warmup(dict(SMALL))
    assert warm.done.wait(30) and warm.engine_ready.is_set()
    assert warm.steps == []  # nothing claimed; the boot job imports again and reports it


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice is Linux's")
def test_the_warmup_priority_is_its_own_threads_only(monkeypatch) -> None:
    """WARM_NICE is added to the warm-up thread alone (0: the normal priority, which a
    launch beside CPU-bound work needs: a niced import starved behind it)."""
    from lbi_gui.engine import warmup

    fake = make_fake_engine()
    seen: list[int] = []

    def engine_seen_from_the_warm_thread():
        seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id()))
        return fake

    monkeypatch.setattr(engine, "ENGINE_FACTORY", engine_seen_from_the_warm_thread)
    mine = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    try:
        assert Warmup(None).done.wait(30)
    finally:
        _forget_bundles()
    assert seen == [min(19, mine + warmup.WARM_NICE)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == mine


def test_a_run_never_waits_for_the_warmups_iteration(monkeypatch) -> None:
    """The first run after launch shows its curve at once: it waits for the loaded network
    only, not for the warm-up's throw-away iteration (low priority: seconds on a busy
    machine, during which the window showed "k = —")."""
    from lbi_gui.engine.child import _Channel

    fake = make_fake_engine()
    real_iterate = fake.iterate
    release = threading.Event()
    warm_thread: list[str] = []

    def slow_iterate(prepared: Any, **kw: Any) -> Any:
        if threading.current_thread().name == "lbi-engine-warmup":
            warm_thread.append("iterating")
            release.wait(30)  # the warm-up's first iteration takes "forever"
        return real_iterate(prepared, **kw)

    fake.iterate = slow_iterate
    monkeypatch.setattr(engine, "ENGINE_FACTORY", lambda: fake)
    events: list[Any] = []
    try:
        request = {**default_request(), "network": "fake-net", "max_iter": 5, "tol": 0.0}
        warm = Warmup(request)
        assert warm.prepared.wait(30)
        chan = _Channel(1, events.append, warm)
        chan.submit(m.Prepare(1, 1, dict(request)))
        chan.submit(m.Run(1, m.RunJob(run_id=1, request=dict(request))))
        deadline = threading.Event()
        for _ in range(300):
            if any(isinstance(e, m.RunDone) for e in events):
                break
            deadline.wait(0.1)
        assert any(isinstance(e, m.Prepared) for e in events)
        assert any(isinstance(e, m.ProgressReport) for e in events)
        assert any(isinstance(e, m.RunDone) for e in events), events
        assert not warm.done.is_set()  # the run finished while the warm-up still iterated
        release.set()
        assert warm.done.wait(30)
        chan.close()
        chan.thread.join(10)
    finally:
        release.set()
        _forget_bundles()
