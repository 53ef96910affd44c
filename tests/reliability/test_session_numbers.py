"""Numbers in a session: JSON's Infinity and NaN in integer fields end in the one-line
refusal the window shows as a dialog; a session the window itself saved with a run stopped
before its first report opens again."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lbi_engine.errors import DataFileError
from lbi_engine.results.run_metrics import RunMetrics
from lbi_gui.model.runs import CurveStore, RunResult
from lbi_gui.model.session import SessionState, load_session, save_session
from lbi_gui.params import DEFAULT_REQUEST
from tests.reliability import hostile_files as hf

INF = float("inf")


def _run_meta(**changes: object) -> dict:
    meta = {"run_id": 1, "request": dict(DEFAULT_REQUEST), "stop_reason": "stopped",
            "iterations": 3, "elapsed": 1.5, "metrics": {}}
    meta.update(changes)
    return meta


@pytest.mark.parametrize(("meta", "words"), [
    ({"runs": [_run_meta(iterations=INF)]}, "runs[0].iterations=inf"),
    ({"runs": [_run_meta(run_id=float("nan"))]}, "runs[0].run_id=nan"),
    ({"runs": [_run_meta(elapsed=-INF)]}, "runs[0].elapsed=-inf"),
    ({"runs": [_run_meta(iterations=1e300)]}, "runs[0].iterations=1e+300"),
    ({"request": {**DEFAULT_REQUEST, "input_shape": [1, INF, 28]}},
     "input_shape"),
    ({"request": {**DEFAULT_REQUEST, "max_iter": INF}}, "max_iter"),
])
def test_non_finite_numbers_are_one_line_naming_the_field(tmp_path: Path, meta: dict,
                                                          words: str) -> None:
    path = hf.session(tmp_path, "s.lbisession", meta)
    with pytest.raises(DataFileError) as info:
        load_session(path)
    message = str(info.value)
    assert "\n" not in message and words in message, message


def test_a_run_stopped_before_its_first_report_reopens(tmp_path: Path) -> None:
    empty = CurveStore()
    run = RunResult(run_id=1, request=dict(DEFAULT_REQUEST), stop_reason="stopped",
                    iterations=0, elapsed=0.0, metrics=RunMetrics(),
                    x_raw=np.zeros((1, 28, 28)),
                    x_display=np.zeros((1, 28, 28)), curves=empty)
    state = SessionState(request=dict(DEFAULT_REQUEST), gui={}, runs=[run], curves=empty,
                         shown=None)
    again = load_session(save_session(tmp_path / "stopped.lbisession", state))
    assert len(again.runs) == 1 and len(again.runs[0].curves) == 0
    assert again.runs[0].iterations == 0
