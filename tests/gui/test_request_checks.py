"""The GUI's request checks (run before a session touches any widget) agree with the engine."""

from __future__ import annotations

import subprocess
import sys

import pytest

from lbi_gui.params import DEFAULT_REQUEST, REQUEST_TYPES, default_request, request_problems


def test_the_choices_name_exactly_the_engines_methods_and_step_rules() -> None:
    from lbi_engine.settings.solver import METHOD_NAMES, STEP_RULES
    from lbi_gui.params import METHOD_LABELS, STEP_MODES

    assert sorted(METHOD_LABELS) == sorted(METHOD_NAMES)
    assert [name for name, _ in STEP_MODES] == list(STEP_RULES)
    assert set(REQUEST_TYPES) == set(DEFAULT_REQUEST)


def test_checks_run_without_torch_even_for_a_gpu_request() -> None:
    """The session check asks no GPU question: that would import torch in the GUI process."""
    code = ("import sys; from lbi_gui.params import default_request, request_problems; "
            "print(request_problems(default_request(device='cuda')), "
            "request_problems(default_request(method='magic')) != [], 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.stdout.split() == ["[]", "True", "False"], out.stderr


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


@pytest.mark.parametrize("change", [
    {"alpha": "auto", "alpha_rule": "guess"}, {"alpha": "auto", "noise_level": -0.1},
    {"image": "/a.png", "truth": "/b.npy"}, {"options": {"n_inner": 0}}, {"tol_mode": "often"},
    {"alpha": 1e-40}, {"dtype": "float16"},
])
def test_the_gui_refuses_with_the_engines_own_message(change: dict) -> None:
    """Checks the GUI's copy never had: the one schema gives them to the window too."""
    from lbi_engine.errors import InputError
    from lbi_engine.request import FORMAT_VERSION, InversionRequest

    with pytest.raises(InputError) as refused:
        InversionRequest.from_dict({"format_version": FORMAT_VERSION,
                                    **default_request(**change)})
    assert request_problems(default_request(**change)) == [str(refused.value)]
