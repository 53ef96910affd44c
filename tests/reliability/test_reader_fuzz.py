"""Fuzzing the readers of files other people send: a model card and a sweep's results.csv.

The property: whatever the bytes, the reader accepts the file or raises lbi's own one-line
error (LbiError: exit 2 and one line in the CLI), never another exception (a traceback, exit
1). The default runs are small and fast; `-m slow` runs the same properties much longer.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lbi_engine.errors import LbiError
from lbi_engine.experiments.sweep import COLUMNS, read_results

FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])
LONG = settings(max_examples=1500, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

JSON = st.recursive(st.none() | st.booleans()
                    | st.integers(-2**70, 2**70) | st.floats() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=3)
                    | st.dictionaries(st.text(max_size=6), kids, max_size=3), max_leaves=8)
GOOD_CARD: dict[str, Any] = {
    "name": "fuzz", "format_version": 1, "input_shape": [1, 6, 6],
    "weights": {"source": "seeded-init", "seed": 0},
    "preprocessing": {"offset": 0.0, "scale": 1.0},
    "architecture": {"encoder_layers": 3, "layers": [
        {"type": "AvgPool2d", "kernel_size": 2, "stride": 2, "divisor_override": None},
        {"type": "Flatten", "start_dim": 1, "end_dim": -1},
        {"type": "Linear", "in_features": 9, "out_features": 4, "bias": True},
        {"type": "Hardtanh", "min_val": -1.0, "max_val": 1.0}]},
}
TOP = ["name", "format_version", "input_shape", "weights", "preprocessing", "architecture"]
LAYER_KEYS = ["kernel_size", "stride", "divisor_override", "start_dim", "end_dim",
              "in_features", "out_features", "bias", "min_val", "max_val", "type"]


def _one_line_or_loads(card_path: Path) -> None:
    from lbi_engine.models.zoo import load_network

    try:
        load_network(str(card_path))
    except LbiError as exc:
        assert "\n" not in str(exc).strip(), str(exc)


def _mutated(top: dict[str, Any], layer: int, field: dict[str, Any]) -> dict[str, Any]:
    card = json.loads(json.dumps(GOOD_CARD))
    card.update(top)
    layers = card.get("architecture", {}).get("layers") if isinstance(
        card.get("architecture"), dict) else None
    if isinstance(layers, list) and layers:
        spec = layers[layer % len(layers)]
        if isinstance(spec, dict):
            spec.update(field)
    return card


CARD_CHANGES = (st.dictionaries(st.sampled_from(TOP), JSON, max_size=2),
                st.integers(0, 3), st.dictionaries(st.sampled_from(LAYER_KEYS), JSON,
                                                   max_size=2))


def _check_card(tmp_path: Path, top: dict, layer: int, field: dict) -> None:
    path = tmp_path / "card.json"
    path.write_text(json.dumps(_mutated(top, layer, field)))
    _one_line_or_loads(path)


@FAST
@given(*CARD_CHANGES)
def test_a_mutated_card_loads_or_is_one_lbi_error(tmp_path: Path, top: dict, layer: int,
                                                   field: dict) -> None:
    _check_card(tmp_path, top, layer, field)


@FAST
@given(st.binary(max_size=300))
def test_card_bytes_load_or_are_one_lbi_error(tmp_path: Path, raw: bytes) -> None:
    path = tmp_path / "card.json"
    path.write_bytes(raw)
    _one_line_or_loads(path)


def test_the_unmutated_fuzz_card_loads(tmp_path: Path) -> None:
    _check_card(tmp_path, {}, 0, {})
    from lbi_engine.models.zoo import load_network

    assert load_network(str(tmp_path / "card.json")).encoder is not None


CELL = st.text(st.characters(codec="utf-8"), max_size=10) | st.sampled_from(
    ["=1+1", "'=x", "-1", "nan", '"', '""', "\r", "\n", "a,b"])


def _check_csv(tmp_path: Path, head: bytes, rows: list[list[str]], tail: bytes) -> None:
    import csv
    import io

    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\n").writerows([list(COLUMNS), *rows])
    path = tmp_path / "results.csv"
    path.write_bytes(head + buffer.getvalue().encode("utf-8", "surrogatepass") + tail)
    try:
        read_results(path)
    except LbiError as exc:
        assert "\n" not in str(exc).strip(), str(exc)


CSV_PARTS = (st.sampled_from([b"", b"\xef\xbb\xbf", b"x,y\n", b"\x00"]),
             st.lists(st.lists(CELL, max_size=len(COLUMNS) + 2), max_size=4),
             st.binary(max_size=40))


@FAST
@given(*CSV_PARTS)
def test_a_results_csv_reads_or_is_one_lbi_error(tmp_path: Path, head: bytes, rows: list,
                                                  tail: bytes) -> None:
    _check_csv(tmp_path, head, rows, tail)


@pytest.mark.slow
@LONG
@given(*CARD_CHANGES)
def test_long_fuzz_of_cards(tmp_path: Path, top: dict, layer: int, field: dict) -> None:
    _check_card(tmp_path, top, layer, field)


@pytest.mark.slow
@LONG
@given(*CSV_PARTS)
def test_long_fuzz_of_results_csv(tmp_path: Path, head: bytes, rows: list,
                                  tail: bytes) -> None:
    _check_csv(tmp_path, head, rows, tail)


@FAST
@given(st.binary(max_size=200) | JSON.map(lambda v: json.dumps(v).encode()))
def test_record_bytes_load_or_are_one_lbi_error(tmp_path: Path, raw: bytes) -> None:
    from lbi_engine.cli.invert import load_record
    from lbi_engine.request import InversionRequest

    path = tmp_path / "run.json"
    path.write_bytes(raw)
    try:
        data, _folder = load_record(str(path))
        InversionRequest.from_dict(data).validate(check_device=False)
    except LbiError as exc:
        assert "\n" not in str(exc).strip(), str(exc)


def test_a_record_with_a_huge_field_is_one_short_line(tmp_path: Path, cli) -> None:
    record = tmp_path / "run.json"
    record.write_text(json.dumps({"kind": "lbi-run-record", "format_version": 1,
                                  "network": "n" * 5_000_000, "index": 0}))
    code, _, err = cli("invert", "--record", record, "--out", tmp_path / "out")
    assert code == 2 and len(err.strip().splitlines()) == 1, err[:300]
    assert len(err) < 5000 and "characters left out" in err
