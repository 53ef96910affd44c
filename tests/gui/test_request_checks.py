"""The GUI's request checks (run before a session touches any widget) agree with the engine."""

from __future__ import annotations

import typing

import pytest

from lbi_gui.params import DEFAULT_REQUEST, REQUEST_TYPES, default_request, request_problems


def test_request_types_mirror_the_engine_annotations() -> None:
    from lbi_engine.api import InversionRequest

    hints = typing.get_type_hints(InversionRequest)
    assert set(REQUEST_TYPES) == set(hints) == set(DEFAULT_REQUEST)
    for key, hint in hints.items():
        assert str(REQUEST_TYPES[key]) == str(hint), key


def test_defaults_have_no_problems() -> None:
    assert request_problems(default_request()) == []
    assert request_problems(default_request(input_shape=[1, 28, 28], layer_alphas=[0.01, 0.02],
                                            time_budget=5, threads=None)) == []


@pytest.mark.parametrize(("change", "word"), [
    ({"alpha": "abc"}, "alpha='abc'"), ({"index": "x"}, "index"), ({"noise_std": None}, "noise"),
    ({"max_iter": 1.5}, "max_iter"), ({"resize": 1}, "resize"), ({"alpha": -1.0}, "alpha"),
    ({"alpha": float("nan")}, "alpha"), ({"max_iter": 0}, "max_iter"), ({"index": -3}, "index"),
    ({"threads": 0}, "threads"), ({"input_shape": [1, 0, 28]}, "input_shape"),
    ({"method": "magic"}, "method"), ({"steps": "fast"}, "steps"),
    ({"layer_alphas": [0.1, "a"]}, "layer_alphas"), ({"time_budget": 0}, "time_budget"),
])
def test_each_bad_value_is_named(change: dict, word: str) -> None:
    problems = request_problems(default_request(**change))
    assert len(problems) == 1 and word in problems[0], problems


def test_engine_refuses_what_the_gui_refuses() -> None:
    """Every value refused here is one the engine's InversionRequest.from_dict refuses too."""
    from lbi_engine.api import FORMAT_VERSION, InversionRequest
    from lbi_engine.errors import InputError

    for change in ({"alpha": "abc"}, {"noise_std": None}, {"alpha": -1.0}, {"max_iter": 0},
                   {"method": "magic"}, {"steps": "fast"}, {"threads": 0}):
        with pytest.raises(InputError):
            InversionRequest.from_dict({"format_version": FORMAT_VERSION,
                                        **default_request(**change)})
