"""The typed engine messages: every kind pickles, the receivers route by class, unknown
messages fail loudly, and the run driver and the child's channel speak them (no Qt needed).
"""

from __future__ import annotations

import dataclasses
import pickle
import queue
import threading
from typing import Any

import numpy as np
import pytest

from lbi_engine.results.run_metrics import RunMetrics
from lbi_gui.engine import messages as m
from lbi_gui.engine.run_driver import RunDriver
from tests.gui.fake_engine import RATE, make_fake_engine

REQUEST = {"network": "fake-net", "index": 1, "noise_std": 0.01, "alpha": 0.1,
           "method": "joint", "report_every": 1, "max_iter": 6}


def _info() -> m.PreparedInfo:
    return m.PreparedInfo(
        request=dict(REQUEST), network_name="net", card={"a": 1},
        layers=[{"kind": "Linear"}], truth=np.arange(4, dtype=np.float32).reshape(2, 2),
        decoder=None, decoder_psnr=12.5, delta=0.1, delta_squared=0.01, noise_norm=0.05,
        input_shape=(1, 2, 2), output_shape=(3,), warnings=["clipped"], sha256="ab")


def _progress() -> m.Progress:
    return m.Progress(run_id=3, points=[{"iteration": 1, "objective": 0.5}], iteration=1,
                      stage="", x_display=np.ones((2, 2), np.float32),
                      aux_display=[np.zeros(3, np.float32)], restarts=[(1, "α 0.1 → 0.2")],
                      prepared=_info())


def _outcome() -> m.RunOutcome:
    return m.RunOutcome(run_id=3, request=dict(REQUEST), stop_reason="max_iterations",
                        iterations=6, elapsed=0.5, metrics=RunMetrics(psnr=20.0),
                        x_raw=np.ones(4), x_display=np.ones((2, 2)), aux_display=[],
                        user_action=None, segments=[(0, dict(REQUEST))])


def _error() -> m.ErrorInfo:
    try:
        raise ValueError("bad α")
    except ValueError as exc:
        return m.ErrorInfo.from_exc("run", exc, dict(REQUEST))


#: One instance of every message class in lbi_gui.engine.messages.
SAMPLES: dict[type, Any] = {
    m.Boot: m.Boot(1), m.Prepare: m.Prepare(1, 7, dict(REQUEST)),
    m.Run: m.Run(1, m.RunJob(3, dict(REQUEST), start_paused=True)),
    m.Pause: m.Pause(1), m.Resume: m.Resume(1), m.Stop: m.Stop(1, "finish", 3),
    m.Restart: m.Restart(1, dict(REQUEST, alpha=0.2)), m.Close: m.Close(1), m.Exit: m.Exit(),
    m.Ping: m.Ping(9), m.Booted: m.Booted({"zoo": ["z"], "datasets": [], "cuda": False}, ch=2),
    m.Prepared: m.Prepared(-1, _info(), ch=2), m.ProgressReport: m.ProgressReport(_progress()),
    m.RunDone: m.RunDone(_outcome(), ch=2), m.Failed: m.Failed(3, _error(), ch=2),
    m.Hello: m.Hello(1234, ()), m.Pong: m.Pong(9), m.Closed: m.Closed(2), m.Died: m.Died(),
}


def _message_classes() -> set[type]:
    """The frozen message classes the module defines (payload records excluded)."""
    return {obj for obj in vars(m).values()
            if isinstance(obj, type) and dataclasses.is_dataclass(obj)
            and obj.__module__ == m.__name__ and obj.__dataclass_params__.frozen
            and obj is not m.RunJob}


def _same(a: Any, b: Any) -> bool:
    """Deep equality that compares numpy arrays by value."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    if dataclasses.is_dataclass(a):
        return type(a) is type(b) and all(
            _same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def test_every_message_class_has_a_sample() -> None:
    assert _message_classes() == set(SAMPLES), "add a sample for each new message class"


@pytest.mark.parametrize("kind", sorted(SAMPLES, key=lambda t: t.__name__),
                         ids=lambda t: t.__name__)
def test_every_message_pickles_round_trip(kind: type) -> None:
    msg = SAMPLES[kind]
    back = pickle.loads(pickle.dumps(msg, protocol=pickle.HIGHEST_PROTOCOL))
    assert type(back) is kind
    assert _same(msg, back)
    assert back is not msg


def test_messages_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        SAMPLES[m.Stop].action = "stop"  # type: ignore[misc]


def test_dispatcher_routes_by_class_and_rejects_an_unknown_message_clearly() -> None:
    seen: list[Any] = []
    route = m.Dispatcher("the test receiver", {m.Boot: seen.append, m.Pause: seen.append})
    route(m.Boot(4))
    assert seen == [m.Boot(4)]
    with pytest.raises(m.UnknownMessageError) as err:
        route(m.Resume(4))
    text = str(err.value)
    assert "the test receiver" in text and "Resume" in text and "Boot, Pause" in text
    with pytest.raises(m.UnknownMessageError, match="tuple"):
        route(("boot", 4))  # the old positional form is refused, not half-understood
    assert isinstance(err.value, TypeError)


def test_dispatcher_does_not_route_subclasses_by_accident() -> None:
    @dataclasses.dataclass(frozen=True)
    class Special(m.Boot):
        pass

    route = m.Dispatcher("r", {m.Boot: lambda msg: msg})
    assert not route.handles(Special(1))
    with pytest.raises(m.UnknownMessageError):
        route(Special(1))


def _drive(jobs: list[tuple[str, tuple]]) -> list[Any]:
    events: list[Any] = []
    driver = RunDriver(events.append, load=lambda: make_fake_engine())
    for name, args in jobs:
        getattr(driver, name)(*args)
    return events


def test_run_driver_emits_typed_events_with_the_fakes_numbers() -> None:
    events = _drive([("boot", ()), ("prepare", (5, dict(REQUEST))),
                     ("run", (m.RunJob(8, dict(REQUEST)),))])
    kinds = [type(e) for e in events]
    assert kinds[:3] == [m.Booted, m.Prepared, m.Prepared]
    assert kinds[-1] is m.RunDone and set(kinds[3:-1]) == {m.ProgressReport}
    assert events[0].info == {"zoo": ["fake-net"], "datasets": ["mnist"], "cuda": False}
    assert events[1].job_id == 5 and events[2].job_id == -1  # -1: prepared by the run
    points = [p for e in events[3:-1] for p in e.progress.points]
    assert [p["iteration"] for p in points] == list(range(7))  # every point, 0..max_iter
    # the fake relaxes as objective_k = RATE^k
    assert np.allclose([p["objective"] for p in points], RATE ** np.arange(7))
    done = events[-1].outcome
    assert done.run_id == 8 and done.iterations == 6 and done.stop_reason == "max_iterations"
    assert all(e.ch == 0 for e in events)  # the driver knows no channel
    for e in events:  # what really crosses the pipe pickles
        assert _same(e, pickle.loads(pickle.dumps(e)))


def test_run_driver_reports_a_bad_request_as_failed() -> None:
    events = _drive([("prepare", (2, dict(REQUEST, network="x.bad")))])
    assert [type(e) for e in events] == [m.Failed]
    assert events[0].job_id == 2 and events[0].error.kind == "prepare"
    assert events[0].error.is_user_error and "x.bad" in events[0].error.message


class _Conn:
    """A pipe end that pickles what is sent (as multiprocessing does) and keeps it."""

    def __init__(self) -> None:
        self.sent: queue.Queue = queue.Queue()

    def send(self, msg: Any) -> None:
        self.sent.put(pickle.loads(pickle.dumps(msg)))


def test_child_channel_stamps_its_number_and_closes(monkeypatch) -> None:
    from lbi_gui import engine as bridge
    from lbi_gui.engine import child

    fake = make_fake_engine()
    monkeypatch.setattr(bridge, "ENGINE_FACTORY", lambda: fake)
    conn = _Conn()
    chan = child._Channel(7, child._Sender(conn))
    chan.submit(m.Boot(7))
    chan.submit(m.Prepare(7, 1, dict(REQUEST)))
    got = [conn.sent.get(timeout=20) for _ in range(2)]  # close() would cancel queued jobs
    chan.close()
    chan.thread.join(10)
    got.append(conn.sent.get(timeout=5))
    assert [type(g) for g in got] == [m.Booted, m.Prepared, m.Closed]
    assert all(g.ch == 7 for g in got)
    with pytest.raises(m.UnknownMessageError):
        chan.control(m.Ping(1))  # a heartbeat is the listener's business, not a channel's


def test_an_unpicklable_payload_becomes_a_failure_of_the_same_job() -> None:
    from lbi_gui.engine import child

    conn = _Conn()
    info = dataclasses.replace(_info(), card={"f": threading.Lock()})  # cannot pickle
    child._Sender(conn)(m.Prepared(5, info, ch=3))
    sent = conn.sent.get_nowait()
    assert isinstance(sent, m.Failed) and sent.job_id == 5 and sent.ch == 3
    assert sent.error.kind == "prepare" and "pickle" in sent.error.message


def test_an_unpicklable_boot_answer_fails_the_boot() -> None:
    from lbi_gui.engine import child

    conn = _Conn()
    child._Sender(conn)(m.Booted({"zoo": [threading.Lock()]}, ch=4))
    sent = conn.sent.get_nowait()
    assert isinstance(sent, m.Failed) and sent.error.kind == "boot" and sent.ch == 4
