"""Layer-wise inversion of the zoo's CNN autoencoder at the defaults, as a user runs it.

Validation digits (the prior is fitted on the training split); nothing here is tuned on them.
"""

from __future__ import annotations

import pytest

from lbi_engine.api import InversionRequest, run_to_end


def _psnr(method: str, index: int, std: float, bundle: object) -> tuple[float, object]:
    request = InversionRequest(network="mnist-cnn-ae", regulariser="tv",
                               split="val", index=index, noise_std=std,
                               method=method)
    _, last, _ = run_to_end(request, bundle)
    return float(last.psnr[0]), last


def test_layerwise_beats_15_db_on_a_cnn_digit_at_the_defaults() -> None:
    from lbi_engine.models.zoo import load_zoo

    psnr, last = _psnr("layerwise", 7, 0.05, load_zoo("mnist-cnn-ae"))
    assert psnr > 15.0
    assert [s["stop_reasons"] for s in last.extras["stages"]] == [["tolerance"]] * 3
    assert last.stop_reasons == ["tolerance"]


@pytest.mark.slow
@pytest.mark.parametrize("std", [0.05, 0.2])
def test_layerwise_is_within_3_db_of_joint_on_validation_digits(std: float) -> None:
    from lbi_engine.models.zoo import load_zoo

    bundle = load_zoo("mnist-cnn-ae")
    digits = (11, 222, 433, 644, 855)
    layer = [_psnr("layerwise", i, std, bundle)[0] for i in digits]
    joint = [_psnr("joint", i, std, bundle)[0] for i in digits]
    mean_layer, mean_joint = sum(layer) / len(layer), sum(joint) / len(joint)
    assert mean_layer > 15.0
    assert mean_layer > mean_joint - 3.0, (layer, joint)
