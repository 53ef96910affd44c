"""Property tests over what files and command lines can say: cards, records, CLI values.

The property everywhere: whatever the input, lbi either accepts it (and then it satisfies
its invariants) or raises its own one-line error (LbiError / an argparse type error) — never
another exception, and never consent to run code taken from a file.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbi_engine.cli import _common as c
from lbi_engine.errors import LbiError
from lbi_engine.request import CONSENT_FIELDS, InversionRequest, strip_file_consent

JSON = st.recursive(st.none() | st.booleans() | st.integers(-10**13, 10**13)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
                    lambda kids: st.lists(kids, max_size=4)
                    | st.dictionaries(st.text(max_size=8), kids, max_size=4), max_leaves=12)
FIELDS = [f for f in InversionRequest().to_dict() if f not in ("format_version", "kind")]
FAST = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@FAST
@given(changes=st.dictionaries(st.sampled_from(FIELDS + ["allow_code", "bogus"]), JSON,
                               max_size=4))
def test_records_parse_to_a_valid_request_or_one_lbi_error(changes: dict) -> None:
    data = {**InversionRequest().to_dict(), **changes}
    clean, warning = strip_file_consent(data, "record")
    assert not set(CONSENT_FIELDS) & set(clean)
    assert (warning is not None) == any(changes.get(k) is True for k in CONSENT_FIELDS)
    try:
        request = InversionRequest.from_dict(clean)
    except LbiError as exc:
        assert "\n" not in str(exc).strip() or len(str(exc)) < 2000
        return
    assert request.allow_code is False  # a file never grants consent
    # alpha is a finite number or "auto" (chosen from the data at run time)
    assert request.alpha == "auto" or math.isfinite(request.alpha)
    assert request.max_iter >= 1


LAYER_TYPES = ["Linear", "Conv2d", "ConvTranspose2d", "AvgPool2d", "Flatten", "ReLU",
               "BatchNorm2d", "Softmax", "__import__", "os.system"]
SIZES = st.one_of(st.integers(-3, 40), st.sampled_from([0, 2**31, 10**12]),
                  st.floats(-1, 1e13), st.text(max_size=4),
                  st.lists(st.integers(-2, 9), min_size=0, max_size=3))
LAYER = st.fixed_dictionaries(
    {"type": st.sampled_from(LAYER_TYPES)},
    optional={k: SIZES for k in ("in_features", "out_features", "in_channels", "out_channels",
                                 "kernel_size", "stride", "padding", "dilation", "groups",
                                 "output_padding", "num_features", "dim", "start_dim")})


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layers=st.lists(LAYER, min_size=1, max_size=4),
       shape=st.lists(st.integers(-1, 40), min_size=1, max_size=3))
def test_cards_build_a_network_or_refuse_with_one_lbi_error(layers: list, shape: list,
                                                            tmp_path_factory) -> None:
    from lbi_engine.models.zoo import bundle_from_card

    folder = tmp_path_factory.mktemp("card")
    path = folder / "c.json"
    path.write_text(json.dumps({"name": "c", "format_version": 1, "input_shape": shape,
                                "architecture": {"layers": layers},
                                "weights": {"source": "seeded-init", "seed": 0}}))
    try:
        bundle = bundle_from_card(path)
    except LbiError as exc:
        assert str(path) in str(exc) or "input_shape" in str(exc) or "shape" in str(exc)
        return
    assert all(s >= 1 for s in bundle.encoder.input_shape)


ARG_TYPES = [c.positive_float, c.nonnegative_float, c.any_float, c.positive_int,
             c.nonnegative_int, c.shape, c.float_list, c.int_list, c.key_value, c.memory_size]


@FAST
@given(kind=st.sampled_from(ARG_TYPES),
       text=st.one_of(st.text(max_size=20),
                      st.from_regex(r"-?[0-9.e,x:log lin-]{0,24}", fullmatch=True)))
def test_cli_values_parse_or_give_an_argparse_message(kind, text: str) -> None:
    try:
        value = kind(text)
    except argparse.ArgumentTypeError as exc:
        assert str(exc)
        return
    if kind is c.shape:
        assert value and all(isinstance(d, int) and d >= 1 for d in value)
    elif kind in (c.float_list, c.int_list):
        assert 1 <= len(value) <= c.MAX_LIST
    elif kind in (c.positive_float, c.positive_int):
        assert value > 0
    elif kind is c.memory_size:
        assert value >= 1


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(flag=st.sampled_from(["--alpha", "--input-shape", "--max-iter", "--noise-std",
                             "--option", "--memory-limit", "--layer-alphas", "--tol"]),
       value=st.one_of(st.text(min_size=1, max_size=12).filter(lambda s: not s.startswith("-")),
                       st.sampled_from(["1e-320", "1,,28", "n_inner=1e12", "nan", "-0",
                                        "inner_max_iter=-1", "0", "1e400", "1Q"])))
def test_invert_command_lines_end_in_0_or_2_never_a_traceback(flag: str, value: str, cli,
                                                              kit, tmp_path_factory) -> None:
    out = tmp_path_factory.mktemp("o") / "run"
    code, _, stderr = cli("invert", "--network", str(kit.card), "--sample", "0",
                          "--max-iter", "2", flag, value, "--out", str(out), "--quiet")
    assert code in (0, 2), stderr
    assert "Traceback" not in stderr
    if code == 2:
        errors = [ln for ln in stderr.splitlines() if not ln.startswith("lbi: warning:")]
        assert len(errors) == 1, stderr


@pytest.mark.parametrize("text", ["8G", "512M", "1.5GiB", "2000000000", "64k"])
def test_memory_sizes_parse(text: str) -> None:
    from lbi_engine.limits import parse_size

    assert parse_size(text) == {"8G": 8 * 2**30, "512M": 512 * 2**20,
                                "1.5GiB": int(1.5 * 2**30), "2000000000": 2_000_000_000,
                                "64k": 64 * 2**10}[text]


def test_memory_limit_follows_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from lbi_engine.limits import MemoryLimitError, check_bytes, memory_limit

    monkeypatch.setenv("LBI_MEMORY_LIMIT", "1M")
    assert memory_limit() == 2**20
    check_bytes(2**20, "x", "y")  # at the limit: fine
    with pytest.raises(MemoryLimitError, match=r"1\.0 MiB.*LBI_MEMORY_LIMIT"):
        check_bytes(2**20 + 1, "thing", "make it smaller")
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "lots")
    with pytest.raises(LbiError, match="LBI_MEMORY_LIMIT=lots"):
        memory_limit()


def test_footprint_counts_weights_and_activations() -> None:
    """An independent count: Conv2d(1, 2, 3, padding=1) on 1x8x8 -> 2x8x8, then Flatten,
    Linear(128, 4): weights 2*9+2 + 128*4+4, activations 64 (input) + 128 + 128 + 4."""
    from torch import nn

    from lbi_engine.models.footprint import meta_footprint

    net = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.Flatten(), nn.Linear(128, 4))
    fp = meta_footprint(net, (1, 8, 8), "net")
    assert fp.weights == 20 + 516 and fp.activations == 64 + 128 + 128 + 4
    assert fp.itemsize == 4


def test_estimate_is_refused_before_building(monkeypatch: pytest.MonkeyPatch,
                                             tmp_path: Path) -> None:
    """A card over the limit is refused from its meta-device estimate: the refusal comes
    before torch allocates (build_module is never reached)."""
    from lbi_engine.limits import MemoryLimitError
    from lbi_engine.models import zoo
    from tests.reliability import hostile_files as hf

    real = zoo.build_module
    built: list[bool] = []

    def spy(layers, where="card"):
        import torch

        built.append(torch.empty(0).device.type != "meta")
        return real(layers, where)

    monkeypatch.setattr(zoo, "build_module", spy)
    monkeypatch.setenv("LBI_MEMORY_LIMIT", "64M")
    path = hf.card(tmp_path, "wide", [{"type": "Flatten"},
                                      {"type": "Linear", "in_features": 784,
                                       "out_features": 20000}])
    with pytest.raises(MemoryLimitError, match=r"wide\.json.*64\.0 MiB"):
        zoo.bundle_from_card(path)
    assert built == [False]  # only the meta-device probe was built
