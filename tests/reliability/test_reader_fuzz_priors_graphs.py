"""Fuzzing the readers that round five of the hostile-file work bounded: prior files (card
values and tensor shapes), 16-bit colour PNGs (filters, chunk lengths, corrupted bytes) and
graph ONNX files (random wiring of additions, concatenations and activations).

The property, as in ``test_reader_fuzz``: the reader accepts the file or raises lbi's own
one-line error (LbiError), never another exception. The default runs are small; ``-m slow``
runs the same properties much longer.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lbi_engine.errors import LbiError
from tests.reliability import png_files as pf
from tests.reliability import test_reader_fuzz_cli as cli_fuzz

# the CLI fuzzers' settings (derandomized by default, random when slow), more examples: these
# readers run in-process, in milliseconds
FAST = settings(cli_fuzz.FAST, max_examples=25)
LONG = settings(cli_fuzz.LONG, max_examples=600)

VALUES = st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats() \
    | st.text(max_size=70) | st.lists(st.integers(-3, 3), max_size=3)
CARD_FIELDS = ["weights_sha256", "tensors_sha256", "format_version", "kind", "rank",
               "input_shape", "network"]


def _one_line(exc: LbiError) -> None:
    assert "\n" not in str(exc).strip(), str(exc)


# -- prior files ------------------------------------------------------------------------------

def _write_prior(base: Path, kind: str, tensors: dict[str, np.ndarray],
                 card: dict[str, Any]) -> None:
    from safetensors.numpy import save

    data = save({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()})
    base.with_name(base.name + ".safetensors").write_bytes(data)
    full = {"format_version": 1, "kind": kind, "tensors": base.name + ".safetensors",
            "tensors_sha256": hashlib.sha256(data).hexdigest()}
    full.update(card)
    base.with_name(base.name + ".json").write_text(json.dumps(full))


PRIOR = (st.sampled_from(["input", "feature"]), st.integers(1, 40), st.integers(0, 60),
         st.integers(0, 3), st.dictionaries(st.sampled_from(CARD_FIELDS), VALUES, max_size=3),
         st.sampled_from([1.0, 0.0, -1.0, float("nan"), float("inf")]))


def _check_prior(folder: Path, which: str, n: int, k: int, skew: int, card: dict,
                 diag: float) -> None:
    from lbi_engine.priors.feature import load_feature_priors
    from lbi_engine.priors.input import load_input_prior

    prefix = "x1." if which == "feature" else ""
    tensors = {f"{prefix}mean": np.zeros(n), f"{prefix}factor": np.ones((n + skew - 1, k)),
               f"{prefix}diag": np.full(n, diag)}
    base = folder / f"p{which}"
    _write_prior(base, f"lbi-{which}-prior", tensors, card)
    try:
        if which == "input":
            load_input_prior(base, (n,))
        else:
            load_feature_priors(base)
    except LbiError as exc:
        _one_line(exc)


@FAST
@given(*PRIOR)
def test_a_prior_file_loads_or_is_one_lbi_error(tmp_path: Path, which: str, n: int, k: int,
                                                skew: int, card: dict, diag: float) -> None:
    _check_prior(tmp_path, which, n, k, skew, card, diag)


# -- 16-bit colour PNG ------------------------------------------------------------------------

PNG = (st.integers(1, 12), st.integers(1, 12), st.sampled_from([3, 4]),
       st.lists(st.integers(0, 6), min_size=12, max_size=12),
       st.lists(st.tuples(st.integers(8, 400), st.integers(0, 255)), max_size=3),
       st.integers(1, 3), st.integers(0, 2**32 - 1) | st.none())


def _check_png(folder: Path, h: int, w: int, channels: int, kinds: list[int],
               flips: list[tuple[int, int]], parts: int, length: int | None) -> None:
    from lbi_engine.data.files import read_image

    rng = np.random.default_rng(h * 100 + w)
    image = rng.integers(0, 65536, size=(h, w, channels), dtype=np.uint16)
    path = pf.png16(folder / "f.png", image, [min(k, 4) for k in kinds[:h]],  # 5, 6: Paeth
                    before=[(b"tEXt", b"k\x00v")], idat_parts=parts)
    data = bytearray(path.read_bytes())
    for at, value in flips:  # corrupt bytes after the signature
        if at < len(data):
            data[at] = value
    if length is not None:  # the tEXt chunk's length (after IHDR) set to anything
        data[33:37] = length.to_bytes(4, "big")
    path.write_bytes(bytes(data))
    try:
        got = read_image(path, grayscale=False)
        assert got.shape[-2:] == (h, w) and np.isfinite(got).all()
    except LbiError as exc:
        _one_line(exc)


@FAST
@given(*PNG)
def test_a_16_bit_png_reads_or_is_one_lbi_error(tmp_path: Path, h: int, w: int,
                                                channels: int, kinds: list[int],
                                                flips: list, parts: int,
                                                length: int | None) -> None:
    _check_png(tmp_path, h, w, channels, kinds, flips, parts, length)


# -- graph ONNX ---------------------------------------------------------------------------------

GRAPH = st.lists(st.tuples(st.sampled_from(["Relu", "Add", "Concat", "Mul", "Sigmoid"]),
                           st.integers(0, 100), st.integers(0, 100)), min_size=1, max_size=12)


def _check_graph(folder: Path, ops: list[tuple[str, int, int]]) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    from lbi_engine.models.zoo import load_network

    values, nodes = ["x"], []
    channels = {"x": 1}
    half = numpy_helper.from_array(np.array(0.5, dtype=np.float32), "half")
    for i, (op, a, b) in enumerate(ops):
        left, right = values[a % len(values)], values[b % len(values)]
        out = f"v{i}"
        if op == "Add":
            if channels[left] != channels[right]:
                continue
            nodes.append(helper.make_node("Add", [left, right], [out], name=f"n{i}"))
            channels[out] = channels[left]
        elif op == "Concat":
            nodes.append(helper.make_node("Concat", [left, right], [out], name=f"n{i}", axis=1))
            channels[out] = channels[left] + channels[right]
        elif op == "Mul":
            nodes.append(helper.make_node("Mul", [left, "half"], [out], name=f"n{i}"))
            channels[out] = channels[left]
        else:
            nodes.append(helper.make_node(op, [left], [out], name=f"n{i}"))
            channels[out] = channels[left]
        values.append(out)
    if not nodes:
        return
    last = nodes[-1].output[0]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 6, 6])],
        [helper.make_tensor_value_info(last, TensorProto.FLOAT, ["N", channels[last], 6, 6])],
        [half])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path = folder / "g.onnx"
    onnx.save(model, str(path))
    try:
        load_network(str(path))
    except LbiError as exc:
        _one_line(exc)


@FAST
@given(GRAPH)
def test_a_graph_onnx_loads_or_is_one_lbi_error(tmp_path: Path, ops: list) -> None:
    _check_graph(tmp_path, ops)


@pytest.mark.slow
@LONG
@given(*PRIOR)
def test_long_fuzz_of_prior_files(tmp_path: Path, which: str, n: int, k: int, skew: int,
                                  card: dict, diag: float) -> None:
    _check_prior(tmp_path, which, n, k, skew, card, diag)


@pytest.mark.slow
@LONG
@given(*PNG)
def test_long_fuzz_of_16_bit_pngs(tmp_path: Path, h: int, w: int, channels: int,
                                  kinds: list[int], flips: list, parts: int,
                                  length: int | None) -> None:
    _check_png(tmp_path, h, w, channels, kinds, flips, parts, length)


@pytest.mark.slow
@LONG
@given(GRAPH)
def test_long_fuzz_of_graph_onnx(tmp_path: Path, ops: list) -> None:
    _check_graph(tmp_path, ops)
