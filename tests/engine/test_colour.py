"""Colour end to end: images read with the network's channel count, the data's shape refused
before the network is lifted, colour metrics and files.

References: the PNG's own bytes (pixel / 255 or / 65535), skimage's PSNR/SSIM with
``channel_axis``, and Pillow reading back what lbi wrote.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from PIL import Image
from torch import nn

from lbi_engine import api
from lbi_engine.data import read_image
from lbi_engine.errors import DataFileError, LbiError, ShapeMismatchError
from lbi_engine.request import InversionRequest

SIDE = 12


def _rgb(seed: int = 0, side: int = SIDE) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (side, side, 3), dtype=np.uint8)


def _save_pt2(module: nn.Module, shape: tuple[int, ...], path) -> None:
    torch.export.save(torch.export.export(module.eval(), (torch.randn(1, *shape),)), str(path))


@pytest.fixture(scope="module")
def colour_net(tmp_path_factory):
    """conv -> ReLU -> max-pool -> conv -> ReLU on (3, SIDE, SIDE), as a .pt2 archive."""
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("nets") / "colour.pt2"
    _save_pt2(nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                            nn.Conv2d(4, 4, 3, padding=1), nn.ReLU()), (3, SIDE, SIDE), path)
    return path


@pytest.fixture(scope="module")
def grey_net(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("nets") / "grey.pt2"
    _save_pt2(nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU()), (1, SIDE, SIDE), path)
    return path


# -- reading ------------------------------------------------------------------------------------
def test_read_image_takes_the_networks_channel_count(tmp_path) -> None:
    rgb = _rgb()
    Image.fromarray(rgb).save(tmp_path / "c.png")
    colour = read_image(tmp_path / "c.png", channels=3)
    np.testing.assert_allclose(colour[0], np.moveaxis(rgb, -1, 0) / 255.0, rtol=0, atol=1e-7)
    with pytest.warns(UserWarning, match="converted to grey"):
        grey = read_image(tmp_path / "c.png", channels=1)
    np.testing.assert_allclose(grey[0, 0], rgb @ np.array([0.299, 0.587, 0.114]) / 255.0,
                               atol=1e-6)
    # alpha dropped
    rgba = np.concatenate([rgb, np.full((SIDE, SIDE, 1), 17, np.uint8)], axis=2)
    Image.fromarray(rgba, "RGBA").save(tmp_path / "a.png")
    np.testing.assert_array_equal(read_image(tmp_path / "a.png", channels=3), colour)
    # a grey picture for a colour network: its value in every channel
    Image.fromarray(rgb[..., 0]).save(tmp_path / "g.png")
    three = read_image(tmp_path / "g.png", channels=3)[0]
    assert three.shape == (3, SIDE, SIDE)
    np.testing.assert_array_equal(three[0], three[2])
    # 16 bits are kept (a value an 8-bit read could not give)
    deep = (np.arange(SIDE * SIDE, dtype=np.uint16).reshape(SIDE, SIDE) * 401 + 3)
    Image.fromarray(deep).save(tmp_path / "d.png")
    np.testing.assert_allclose(read_image(tmp_path / "d.png", channels=1)[0, 0],
                               deep / 65535.0, rtol=0, atol=1e-7)


def test_other_channel_counts_are_refused_naming_both(tmp_path) -> None:
    Image.fromarray(_rgb()).save(tmp_path / "c.png")
    with pytest.raises(DataFileError, match=r"takes 2 input channels.*1 \(grey\) or 3"):
        read_image(tmp_path / "c.png", channels=2)
    np.save(tmp_path / "c.npy", np.random.default_rng(0).random((3, SIDE, SIDE)))
    with pytest.raises(DataFileError, match=r"3 channel\(s\) but the network takes 1"):
        read_image(tmp_path / "c.npy", channels=1)
    assert read_image(tmp_path / "c.npy", channels=3).shape == (1, 3, SIDE, SIDE)


# -- refused before lifting -------------------------------------------------------------------
@pytest.fixture
def no_lifting(monkeypatch):
    """Lifting fails loudly if reached: the refusals below must come before it."""
    from lbi_engine.models.network import LiftedNetwork

    def lifted(*args, **kwargs):
        raise AssertionError("the network was lifted before the data's shape was checked")

    monkeypatch.setattr(LiftedNetwork, "from_module", classmethod(lifted))


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text
    return text


def test_colour_data_for_a_grey_network_is_refused_before_lifting(tmp_path, grey_net,
                                                                  no_lifting) -> None:
    np.save(tmp_path / "c.npy", np.random.default_rng(0).random((3, SIDE, SIDE)))
    with pytest.raises(LbiError) as info:
        api.prepare(InversionRequest(network=str(grey_net), image=str(tmp_path / "c.npy")))
    text = _one_line(info.value)
    assert "3 channel" in text and "takes 1" in text
    with pytest.raises(ShapeMismatchError, match=r"3 channel\(s\) but the network takes 1"):
        api.prepare(InversionRequest(network=str(grey_net), truth=str(tmp_path / "c.npy")))


def test_a_picture_for_a_two_channel_network_is_refused_before_lifting(tmp_path,
                                                                      no_lifting) -> None:
    torch.manual_seed(0)
    two = tmp_path / "two.pt2"
    _save_pt2(nn.Sequential(nn.Conv2d(2, 2, 3), nn.ReLU()), (2, SIDE, SIDE), two)
    Image.fromarray(_rgb()).save(tmp_path / "c.png")
    with pytest.raises(DataFileError) as info:
        api.prepare(InversionRequest(network=str(two), image=str(tmp_path / "c.png")))
    assert "takes 2 input channels" in _one_line(info.value)


def test_a_picture_of_the_wrong_size_is_refused_before_lifting(tmp_path, colour_net,
                                                               no_lifting) -> None:
    Image.fromarray(_rgb(side=SIDE + 4)).save(tmp_path / "big.png")
    with pytest.raises(ShapeMismatchError, match="resize"):
        api.prepare(InversionRequest(network=str(colour_net), image=str(tmp_path / "big.png")))


def test_declared_shapes_of_every_format(tmp_path, colour_net) -> None:
    from lbi_engine.models.declared import declared_input_shape

    onnx = pytest.importorskip("onnx")
    del onnx
    module = nn.Sequential(nn.Conv2d(3, 2, 3), nn.ReLU()).eval()
    with _quiet():
        torch.onnx.export(module, (torch.randn(1, 3, 9, 7),), str(tmp_path / "f.onnx"),
                          dynamo=False)
    assert declared_input_shape(tmp_path / "f.onnx") == (3, 9, 7)
    assert declared_input_shape(colour_net) == (3, SIDE, SIDE)
    assert declared_input_shape("mnist_ae") in (None, (1, 28, 28))
    assert declared_input_shape(tmp_path / "missing.onnx") is None
    assert declared_input_shape(colour_net, (3, SIDE, SIDE)) == (3, SIDE, SIDE)
    with pytest.raises(LbiError, match="contradicts"):  # a given shape never silently wins
        declared_input_shape(colour_net, (3, 5, 5))


def _quiet():
    import contextlib
    import io
    import warnings

    stack = contextlib.ExitStack()
    stack.enter_context(warnings.catch_warnings())
    warnings.simplefilter("ignore")
    stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
    return stack


# -- a colour run -------------------------------------------------------------------------------
def test_a_colour_picture_inverts_with_colour_metrics_and_files(tmp_path, colour_net) -> None:
    from skimage.metrics import peak_signal_noise_ratio, structural_similarity

    from lbi_engine.results.exports import export_run

    rgb = _rgb(3)
    Image.fromarray(rgb).save(tmp_path / "c.png")
    request = InversionRequest(network=str(colour_net), image=str(tmp_path / "c.png"),
                               noise_std=0.01, alpha=0.01, max_iter=30)
    prepared = api.prepare(request)
    assert prepared.truth_image.shape == (3, SIDE, SIDE)
    np.testing.assert_allclose(prepared.truth_image, np.moveaxis(rgb, -1, 0) / 255.0, atol=1e-6)
    final = list(api.iterate(prepared))[-1]
    metrics = api.final_metrics(prepared, final)
    x = np.asarray(final.x[0], dtype=np.float64)
    truth = prepared.truth_image.astype(np.float64)
    assert metrics.psnr == pytest.approx(peak_signal_noise_ratio(truth, x, data_range=1.0),
                                         rel=1e-5)
    assert metrics.ssim == pytest.approx(structural_similarity(
        truth, x, data_range=1.0, channel_axis=0, gaussian_weights=True, sigma=1.5,
        use_sample_covariance=False, win_size=11), rel=1e-5)
    written = export_run(prepared, final, None, tmp_path / "out")
    with Image.open(written["reconstruction.png"]) as png:
        assert png.mode == "RGB" and png.size == (SIDE, SIDE)
        pixels = np.asarray(png)
    np.testing.assert_allclose(pixels / 255.0, np.clip(np.moveaxis(x, 0, -1), 0, 1),
                               atol=0.5 / 255 + 1e-6)
    import json

    document = json.loads(written["result.json"].read_text())
    assert document["network"]["input_shape"] == [3, SIDE, SIDE]
    assert document["network"]["lifted_layers_added"] == 2  # the 2x2 max-pool's two levels


# -- 16-bit colour PNG ----------------------------------------------------------------------
def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def _png16(values: np.ndarray, filters: list[int]) -> bytes:
    """A 16-bit RGB PNG written by the spec (section 9), row r with filter filters[r]: an
    encoder independent of lbi's decoder, pixel by pixel."""
    import struct
    import zlib

    h, w, c = values.shape
    rows = [values[r].astype(">u2").tobytes() for r in range(h)]
    bpp, out = 2 * c, b""
    for r, kind in enumerate(filters):
        line, above = rows[r], rows[r - 1] if r else bytes(len(rows[r]))
        enc = bytearray()
        for i, x in enumerate(line):
            a = line[i - bpp] if i >= bpp else 0
            b, cc = above[i], above[i - bpp] if i >= bpp else 0
            pred = [0, a, b, (a + b) // 2, _paeth(a, b, cc)][kind]
            enc.append((x - pred) & 255)
        out += bytes([kind]) + bytes(enc)

    def chunk(tag: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + tag + body + struct.pack(
            ">I", zlib.crc32(tag + body) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 16, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(out)) + chunk(b"IEND", b""))


def test_sixteen_bit_colour_png_keeps_its_depth(tmp_path) -> None:
    values = np.random.default_rng(4).integers(0, 65536, (5, 6, 3)).astype(np.uint16)
    path = tmp_path / "deep.png"
    path.write_bytes(_png16(values, [0, 1, 2, 3, 4]))
    got = read_image(path, channels=3)[0]
    np.testing.assert_allclose(got, np.moveaxis(values, -1, 0) / 65535.0, rtol=0, atol=1e-7)
    with Image.open(path) as im:  # Pillow's own decode agrees on the high byte
        np.testing.assert_array_equal(np.asarray(im), (values >> 8).astype(np.uint8))


# -- unsupported layers named before anything is lifted ----------------------------------------
@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_an_unsupported_layer_is_named_before_any_layer_is_lifted(tmp_path, monkeypatch,
                                                                   fmt) -> None:
    import lbi_engine.models.layer_lifting as lifting
    from lbi_engine.errors import UnsupportedLayerError
    from lbi_engine.models.zoo import load_network

    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.Conv2d(4, 4, 3), nn.GELU()).eval()
    path = tmp_path / f"gelu.{fmt}"
    if fmt == "pt2":
        _save_pt2(net, (3, SIDE, SIDE), path)
    else:
        pytest.importorskip("onnx")
        with _quiet():
            torch.onnx.export(net, (torch.randn(1, 3, SIDE, SIDE),), str(path), dynamo=False)

    def lifted(*args, **kwargs):
        raise AssertionError("a layer was lifted before the unsupported one was named")

    monkeypatch.setattr(lifting, "lift_module", lifted)
    with pytest.raises(UnsupportedLayerError, match=r"(?i)gelu.*not monotone"):
        load_network(path)
