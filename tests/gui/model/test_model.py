"""The window's application state without any widget or Qt event loop (no qtbot here).

Runs: adding, removing, notes and tags, filtering, sorting, CSV, saved/unsaved bookkeeping;
the selection; a session saved by one model and opened by another.
"""

from __future__ import annotations

import csv
import io
import math
from typing import Any

import numpy as np
import pytest

from lbi_engine.errors import LbiError
from lbi_engine.results.run_metrics import RunMetrics
from lbi_gui.model import AppModel, CurveStore, EventEmitter, RunList, RunResult, Selection
from lbi_gui.model.run_list import COLUMNS, cell_text, matches, sort_key
from lbi_gui.model.selection import sample_label
from lbi_gui.params import default_request


def _run(run_id: int, *, method: str = "joint", alpha: Any = 0.01, psnr: float | None = 20.0,
         notes: str = "", **request: Any) -> RunResult:
    curves = CurveStore()
    curves.extend([{"iteration": k, "objective": 1.0 / (k + 1), "psnr": 10.0 + k,
                    "elapsed": 0.1 * k, "bregman": [0.5 / (k + 1)]} for k in range(4)])
    req = default_request(method=method, alpha=alpha, **request)
    x = np.full((28, 28), run_id / 10, np.float32)
    return RunResult(run_id=run_id, request=req, stop_reason="max_iterations", iterations=3,
                     elapsed=0.3, metrics=RunMetrics(psnr=psnr, objective=0.25),
                     x_raw=x[None], x_display=x, curves=curves, notes=notes)


class Recorder:
    """Subscribes to every event of a group and keeps (event name, args)."""

    def __init__(self, events: Any) -> None:
        self.log: list[tuple[str, tuple]] = []
        for event in events:
            event.connect(lambda *args, _n=event.name: self.log.append((_n, args)))


# ---- events ----------------------------------------------------------------------------------
def test_event_emitter_calls_in_order_once_and_survives_disconnect_during_emit() -> None:
    ev, seen = EventEmitter("e"), []

    def first(x: int) -> None:
        seen.append(("first", x))
        ev.disconnect(second)  # the running emit still reaches second (it copied the list)

    def second(x: int) -> None:
        seen.append(("second", x))

    ev.connect(first)
    ev.connect(second)
    ev.connect(first)  # connecting twice subscribes once
    assert len(ev) == 2
    ev.emit(1)
    ev.emit(2)
    assert seen == [("first", 1), ("second", 1), ("first", 2)]


# ---- adding and removing ---------------------------------------------------------------------
def test_add_remove_and_their_events() -> None:
    runs = RunList()
    rec = Recorder(runs.events)
    a, b, c = _run(1), _run(2), _run(3)
    for r in (a, b, c):
        runs.add(r)
    assert runs.ids() == [1, 2, 3] and len(runs) == 3 and runs.get(2) is b
    assert runs.remove([2, 99]) == [b]
    assert runs.ids() == [1, 3] and runs.get(2) is None
    assert runs.remove([99]) == []  # nothing removed: no event
    assert [name for name, _ in rec.log] == ["added"] * 3 + ["removed"]
    assert rec.log[-1][1] == ([b],)
    with pytest.raises(ValueError, match="#1"):
        runs.add(_run(1))  # ids are unique
    assert runs.ids() == [1, 3]


def test_runs_property_is_a_copy_the_list_cannot_be_changed_behind_its_back() -> None:
    runs = RunList([_run(1)])
    runs.runs.append(_run(2))
    assert runs.ids() == [1]


def test_saved_and_unsaved_runs() -> None:
    runs = RunList()
    runs.replace_all([_run(1), _run(2)], saved=True)
    assert runs.unsaved() == []
    runs.add(_run(3))
    assert [r.run_id for r in runs.unsaved()] == [3]
    runs.set_note(1, "#check")  # an edited note is not in the saved file yet
    assert [r.run_id for r in runs.unsaved()] == [1, 3]
    runs.mark_saved()
    assert runs.unsaved() == []
    runs.remove([2])
    assert runs.saved_ids == {1, 3}


def test_replace_all_refuses_duplicate_ids_and_changes_nothing() -> None:
    runs = RunList([_run(1)])
    with pytest.raises(ValueError):
        runs.replace_all([_run(5), _run(5)])
    assert runs.ids() == [1]


# ---- notes and tags --------------------------------------------------------------------------
def test_notes_are_one_line_and_tags_are_their_hash_words() -> None:
    runs = RunList([_run(1), _run(2, notes="#baseline")])
    rec = Recorder(runs.events)
    assert runs.set_note(1, "  #Baseline,  good\n#tv-check. #  ")
    run = runs.get(1)
    assert run.notes == "#Baseline, good #tv-check. #"
    assert run.tags == ["#Baseline", "#tv-check"]  # punctuation dropped; a lone '#' is none
    assert not runs.set_note(1, "#Baseline, good   #tv-check. #")  # same note: no event
    assert not runs.set_note(42, "x")  # no such run
    assert rec.log == [("note_changed", (run,))]
    assert runs.tags() == ["#Baseline", "#baseline", "#tv-check"]
    assert [r.run_id for r in runs.with_tag("baseline")] == [2]
    assert [r.run_id for r in runs.with_tag("#tv-check")] == [1]


# ---- filtering ---------------------------------------------------------------------------------
def test_filter_keeps_runs_with_every_word_in_some_cell_case_insensitively() -> None:
    runs = RunList([_run(1, method="joint", notes="#baseline"),
                    _run(2, method="joint"),
                    _run(3, method="one-layer", notes="#baseline")])
    assert [r.run_id for r in runs.filtered("")] == [1, 2, 3]
    assert [r.run_id for r in runs.filtered("JOINT")] == [1, 2]
    assert [r.run_id for r in runs.filtered("#baseline joint")] == [1]
    assert [r.run_id for r in runs.filtered("joint nonsense")] == []


def test_filter_matches_what_the_table_shows() -> None:
    run = _run(1, alpha=0.0123456)
    assert cell_text(0.0123456) == "0.01235"
    assert matches(run, "0.01235")  # the cell reads 0.01235 …
    assert not matches(run, "0.0123456")  # … so the full value is not in it
    assert matches(_run(2, psnr=None), "—")  # a missing metric reads "—"


# ---- sorting -----------------------------------------------------------------------------------
def test_sort_numbers_as_numbers_missing_values_last_ties_in_run_order() -> None:
    runs = RunList([_run(1, psnr=9.5), _run(2, psnr=None), _run(3, psnr=10.25),
                    _run(4, psnr=9.5), _run(5, psnr=math.nan)])
    # as text "10.25" < "9.5"; as numbers 9.5 < 10.25. NaN and None are not numbers: they
    # follow, by their cell texts ("nan" < "—")
    assert [r.run_id for r in runs.sorted("PSNR")] == [1, 4, 3, 5, 2]
    assert [r.run_id for r in runs.sorted("PSNR", descending=True)] == [2, 5, 3, 1, 4]
    assert sort_key(True) == (1, 0.0, "True")  # a bool is not a number here
    with pytest.raises(KeyError, match="no column"):
        runs.sorted("psnr (dB)")


def test_sort_text_columns_by_their_text() -> None:
    runs = RunList([_run(1, method="one-layer"), _run(2, method="joint"),
                    _run(3, method="joint-pdhg")])
    assert [r.run_id for r in runs.sorted("method")] == [2, 3, 1]


# ---- CSV ---------------------------------------------------------------------------------------
def test_csv_has_every_column_and_follows_the_given_order() -> None:
    runs = RunList([_run(1, psnr=9.5, notes="#a, b"), _run(2, psnr=None)])
    rows = list(csv.reader(io.StringIO(runs.csv([2, 1, 77]))))
    assert rows[0] == COLUMNS
    assert [row[0] for row in rows[1:]] == ["2", "1"]  # unknown ids are skipped
    by = dict(zip(COLUMNS, rows[2], strict=True))
    assert float(by["PSNR"]) == 9.5 and by["notes"] == "#a, b"
    assert [row[0] for row in csv.reader(io.StringIO(runs.csv()))][1:] == ["1", "2"]


# ---- selection ---------------------------------------------------------------------------------
def test_selection_reports_exactly_the_changed_keys() -> None:
    sel = Selection({"network": "mnist-mlp", "method": "joint", "noise_std": 0.01,
                     "dataset": "mnist", "split": "val", "index": 3})
    rec = Recorder(sel.events)
    assert sel.update({"method": "joint"}) == set()  # no change: no event
    assert sel.update({"method": "one-layer", "noise_std": 0.02}) == {"method", "noise_std"}
    assert sel.method == "one-layer" and sel.noise_std == 0.02 and sel.network == "mnist-mlp"
    old, new, keys = rec.log[-1][1]
    assert old["method"] == "joint" and new["method"] == "one-layer"
    assert keys == {"method", "noise_std"}
    assert sel.replace({"network": "cnn"}) >= {"network", "method", "dataset"}  # dropped keys count
    assert len(rec.log) == 2


def test_sample_label_names_the_sample() -> None:
    assert sample_label({"dataset": "mnist", "split": "val", "index": 7}) == "mnist/val/7"
    assert sample_label({"image": "/data/img/cat.png", "dataset": "mnist"}) == "cat.png"
    assert sample_label({"data": "C:\\y\\meas.npy"}) == "y: meas.npy"
    sel = Selection({"dataset": "mnist", "split": "train", "index": 0, "truth": None})
    assert sel.sample["truth"] is None and sel.sample_label == "mnist/train/0"


# ---- sessions ----------------------------------------------------------------------------------
def test_session_round_trip_through_two_models(tmp_path) -> None:
    model = AppModel(default_request(alpha=0.05, method="joint"))
    model.runs.add(_run(1, notes="#keep this"))
    model.runs.add(_run(2, method="one-layer", psnr=None))
    curves = model.runs.get(1).curves
    shown = np.linspace(0, 1, 28 * 28, dtype=np.float32).reshape(28, 28)
    path = tmp_path / "s.lbisession"
    model.save(path, gui={"levels": [0.0, 0.8]}, curves=curves, shown=shown)
    assert model.runs.unsaved() == [] and model.session_path == str(path)

    other = AppModel(default_request())
    rec = Recorder(other.runs.events)
    state = other.open(path)
    assert rec.log and rec.log[0][0] == "reset"
    assert other.runs.ids() == [1, 2] and other.runs.unsaved() == []
    assert other.session_path == str(path)
    assert other.selection.request["alpha"] == 0.05
    assert state.gui["levels"] == [0.0, 0.8] and np.array_equal(state.shown, shown)
    a, b = model.runs.get(1), other.runs.get(1)
    assert b.notes == "#keep this" and b.tags == ["#keep"]
    assert np.array_equal(a.x_display, b.x_display) and b.metrics.psnr == 20.0
    assert np.allclose(b.curves.arrays()["objective"], [1, 1 / 2, 1 / 3, 1 / 4])
    assert other.runs.get(2).metrics.psnr is None
    assert np.array_equal(state.curves.arrays()["psnr"], curves.arrays()["psnr"])


def test_a_damaged_session_changes_nothing(tmp_path) -> None:
    model = AppModel(default_request(alpha=0.3))
    model.runs.add(_run(4))
    bad = tmp_path / "bad.lbisession"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(LbiError, match="not a readable lbi session"):
        model.open(bad)
    assert model.runs.ids() == [4] and model.selection.request["alpha"] == 0.3
    assert model.session_path is None and [r.run_id for r in model.runs.unsaved()] == [4]


def test_session_state_without_curves_stores_none() -> None:
    model = AppModel(default_request())
    state = model.session_state(curves=CurveStore(), request={"alpha": 2.0})
    assert state.curves is None and state.request == {"alpha": 2.0} and state.runs == []


# ---- run control -------------------------------------------------------------------------------
def test_classify_change_follows_the_run_rules() -> None:
    from lbi_gui.model.run_control import classify_change

    base = default_request(alpha=0.01, method="joint", max_iter=100)
    assert classify_change(base, dict(base), running=True) == "none"
    # a new network while running: stop, then prepare the new problem
    assert classify_change(base, dict(base, network="other"), running=True) == "stop"
    # α while running: warm restart; with max_iter too, still a restart
    assert classify_change(base, dict(base, alpha=0.02), running=True) == "restart"
    assert classify_change(base, dict(base, alpha=0.02, max_iter=50), running=True) == "restart"
    # only the budget while running: the solve goes on as it is
    assert classify_change(base, dict(base, max_iter=50), running=True) == "none"
    # idle: a new noise level or network is prepared for display; α alone is not
    assert classify_change(base, dict(base, noise_std=0.123), running=False) == "prepare"
    assert classify_change(base, dict(base, network="other"), running=False) == "prepare"
    assert classify_change(base, dict(base, alpha=0.02), running=False) == "none"
    assert classify_change(base, dict(base, noise_std=0.123), running=True) == "restart"


def test_speed_meter_measures_over_windows() -> None:
    from lbi_gui.model.run_control import SpeedMeter

    meter = SpeedMeter(window_s=0.2)
    assert meter.update(10, 0.5) == pytest.approx(20.0)  # first point: k / t
    assert meter.update(20, 0.6) == pytest.approx(20.0)  # within the window: unchanged
    assert meter.update(110, 1.5) == pytest.approx(100 / 1.0)  # (110-10)/(1.5-0.5)
    meter.reset()
    assert meter.rate == 0.0 and meter.update(0, 0.0) == 0.0


def test_run_queue_numbers_methods_and_collects_errors() -> None:
    from lbi_gui.model.run_control import RunQueue

    q = RunQueue()
    assert q.next() is None and q.finish() is None  # nothing queued, nothing to report
    q.start({"alpha": 0.1, "method": "x"}, ["joint", "landweber", "one-layer"])
    assert q.active and q.total == 3
    number, request = q.next()
    assert (number, request) == (1, {"alpha": 0.1, "method": "joint"})
    assert q.finish() is None  # two are still pending
    q.errors.append("landweber failed")
    assert q.next()[0] == 2
    q.clear()  # cancelled: the third never runs
    assert q.next() is None
    assert q.finish() == ["landweber failed"] and not q.active and q.errors == []


def test_same_sample_compares_network_and_sample_and_optionally_the_noise() -> None:
    from lbi_gui.model.selection import same_sample

    a = default_request(network="net", dataset="mnist", split="val", index=3, noise_std=0.01,
                        alpha=0.1)
    assert same_sample(a, dict(a, alpha=5.0, method="landweber"))  # settings do not count
    assert not same_sample(a, dict(a, index=4))
    assert not same_sample(a, dict(a, network="other"))
    assert not same_sample(a, dict(a, truth="/x/t.npy"))
    assert same_sample(a, dict(a, noise_std=0.5))
    assert not same_sample(a, dict(a, noise_std=0.5), noise=True)
    assert not same_sample(a, dict(a, seed=a.get("seed", 0) + 1), noise=True)


def test_table_says_which_regulariser_auto_ran() -> None:
    """The Runs table shows what ran, as result.json's regulariser_run says: 'auto' alone
    hides whether the learned prior or TV was used."""
    run = _run(1, regulariser="auto")
    run.metrics.regulariser_run = "gaussian + box [0, 1] (03bdc639cae0)"
    assert run.table_row()["regulariser"] == "auto: gaussian + box [0, 1]"
    named = _run(2, regulariser="tv")
    named.metrics.regulariser_run = "total variation (isotropic)"
    assert named.table_row()["regulariser"] == "tv"  # a named choice is shown as named
