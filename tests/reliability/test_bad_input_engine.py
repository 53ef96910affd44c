"""The bad-input corpus through the engine API: a catchable LbiError naming input, problem, fix.

After every case the same process still solves a good problem (nothing is left half-loaded,
no global state is poisoned).
"""

from __future__ import annotations

import math
import os
import shutil
import warnings
from pathlib import Path

import pytest
import torch

from lbi_engine import api
from lbi_engine.errors import LbiError
from tests.reliability import corpus
from tests.reliability.kit import Kit


def _request(data: dict) -> api.InversionRequest:
    return api.InversionRequest.from_dict({"format_version": api.FORMAT_VERSION, **data})


def _solve_good(kit: Kit) -> None:
    prepared, final, records = api.run_to_end(_request(kit.base_request()))
    assert final.final and final.iteration == 5
    assert math.isfinite(float(final.objective[0]))
    assert torch.isfinite(final.x).all()


def test_corpus_is_large_and_unique() -> None:
    assert len(corpus.CASES) >= 30
    assert len(set(corpus.CASE_IDS)) == len(corpus.CASES)
    errors = [c for c in corpus.CASES if c.error is not None]
    assert len(errors) >= 30
    for case in errors:
        assert issubclass(case.error, LbiError), case.id
        assert case.words, case.id


@pytest.mark.parametrize("case", corpus.CASES, ids=corpus.CASE_IDS)
def test_engine_refuses_clearly_then_keeps_working(case: corpus.Case, kit: Kit, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    request = corpus.build(case, tmp_path, kit, monkeypatch)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if case.error is None:
            prepared, final, _ = api.run_to_end(_request(request))
            assert final.final and torch.isfinite(final.x).all()
            assert math.isfinite(float(final.objective[0]))
        else:
            with pytest.raises(case.error) as info:
                api.run_to_end(_request(request))
            assert isinstance(info.value, LbiError)
            message = str(info.value)
            assert not corpus.message_ok(message, case.words), (message, case.words)
            assert "Traceback" not in message and len(message) < 2000
    messages = [str(w.message) for w in caught]
    for word in case.warns:
        assert any(word.lower() in m.lower() for m in messages), (word, messages)
    assert not (tmp_path / corpus.MARKER).exists(), "a pickle ran code without opt-in"
    monkeypatch.undo()
    _solve_good(kit)


def test_negative_data_is_clipped_into_the_relu_domain(kit: Kit, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    request = corpus.build(corpus.BY_ID["data-negative-relu"], tmp_path, kit, monkeypatch)
    with pytest.warns(UserWarning, match="clipped"):
        prepared = api.prepare(_request(request))
    y = prepared.problem.y_delta
    assert float(y.min()) == 0.0  # negative entries projected onto dom Psi = [0, inf)
    raw = torch.linspace(-1, 1, 32)
    torch.testing.assert_close(y[0], raw.clamp_min(0.0))


def test_pickle_runs_only_with_explicit_opt_in(kit: Kit, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The side effect (the marker file) happens only when allow_pickle=True was given."""
    from lbi_engine.errors import ModelFileError, UnsafeFileError
    from lbi_engine.models.zoo import load_network

    request = corpus.build(corpus.BY_ID["pickle-runs-code-zip"], tmp_path, kit, monkeypatch)
    marker = tmp_path / corpus.MARKER
    for _ in range(2):  # refusing twice changes nothing
        with pytest.raises(UnsafeFileError):
            load_network(request["network"])
        assert not marker.exists()
    # opt-in: the file is unpickled (its code runs) and then refused as not-a-network
    with pytest.raises(ModelFileError):
        load_network(request["network"], allow_pickle=True)
    assert marker.exists()


def test_good_files_load_from_non_utf8_paths(kit: Kit, tmp_path: Path) -> None:
    """Linux file names are bytes; names that are not UTF-8 must work for every format."""
    folder = os.fsencode(str(tmp_path))
    sources = {"ts.pt": kit.torchscript, "net.onnx": kit.onnx, "state.pt": kit.state_dict,
               "state.json": kit.state_dict.with_suffix(".json"), "w.safetensors": kit.safetensors,
               "w.json": kit.safetensors.with_suffix(".json"), "card.json": kit.card}
    paths = {}
    for name, src in sources.items():
        raw = folder + b"/\xff\xfe_" + name.encode()
        shutil.copyfile(src, raw)
        paths[name] = os.fsdecode(raw)
    assert "\udcff" in paths["ts.pt"]
    for name in ("ts.pt", "net.onnx", "state.pt", "w.safetensors", "card.json"):
        shape = (1, 28, 28) if name in ("ts.pt", "net.onnx") else None
        request = kit.base_request(network=paths[name], input_shape=shape, max_iter=3,
                                   allow_pickle=name == "ts.pt")  # consent for TorchScript
        _, final, _ = api.run_to_end(_request(request))
        assert final.iteration == 3 and torch.isfinite(final.x).all(), name
    # and a non-UTF-8 data file
    import numpy as np

    raw = folder + b"/\xff_truth.npy"
    np.save(os.fsdecode(raw), np.linspace(0, 1, 784, dtype=np.float32).reshape(28, 28))
    _, final, _ = api.run_to_end(_request(kit.base_request(truth=os.fsdecode(raw), max_iter=2)))
    assert final.iteration == 2


def test_absurd_shapes_are_refused_before_allocating(kit: Kit) -> None:
    """A shape of 10^15 values would need petabytes; the refusal comes from the size check."""
    from lbi_engine.errors import InputError
    from lbi_engine.models.network import MAX_INPUT_VALUES, LiftedNetwork
    from tests.reliability.kit import tiny_module

    for shape in [(100000, 100000, 100000), (MAX_INPUT_VALUES + 1,), (1, 4097, 4097)]:
        with pytest.raises(InputError, match="too large"):
            LiftedNetwork.from_module(tiny_module(), shape)
    with pytest.raises(InputError, match="too large"):
        LiftedNetwork.from_torchscript(kit.torchscript, (100000, 100000, 100000),
                                       allow_code=True)
