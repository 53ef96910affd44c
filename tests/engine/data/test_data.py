"""Bundled MNIST subset, cartoons, preprocessing and the user-file readers (lbi_engine.data)."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lbi_engine.data import (
    Preprocessing,
    as_batch,
    dataset_size,
    get_sample,
    list_datasets,
    list_splits,
    load_array,
    load_idx,
    load_image,
    load_mnist,
    load_torchvision_folder,
    resources_dir,
)
from lbi_engine.data.cartoons import cartoon
from lbi_engine.errors import DataFileError, InputError, ShapeMismatchError

ROOT = Path(__file__).resolve().parents[3]
NPZ = ROOT / "resources" / "datasets" / "mnist_5k.npz"


def _script():
    spec = importlib.util.spec_from_file_location("make_mnist_npz",
                                                  ROOT / "scripts" / "make_mnist_npz.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# --- bundled MNIST ---------------------------------------------------------------------------

def test_mnist_splits_shapes_balance_and_range():
    counts = {"train": 4000, "val": 1000, "all": 5000}
    for split, n in counts.items():
        x, y = load_mnist(split)
        assert x.shape == (n, 1, 28, 28) and x.dtype == torch.float32
        assert y.shape == (n,) and y.dtype == torch.int64
        assert float(x.min()) == 0.0 and float(x.max()) == 1.0
        assert torch.bincount(y, minlength=10).tolist() == [n // 10] * 10
        assert dataset_size("mnist", split) == n
    raw = np.load(NPZ, allow_pickle=False)
    assert raw["images"].dtype == np.uint8 and raw["images"].shape == (5000, 28, 28)
    tr, va = raw["train_idx"], raw["val_idx"]
    assert np.intersect1d(tr, va).size == 0
    assert np.array_equal(np.union1d(tr, va), np.arange(5000))
    # every image is exactly k/255: the float conversion lost nothing
    x, _ = load_mnist("val")
    assert torch.equal(torch.round(x * 255) / 255, x)


def test_mnist_train_mean_is_the_documented_centring_offset():
    x, _ = load_mnist("train")
    # MATH.md §9.2: about 0.1307 on the full MNIST training set
    assert abs(float(x.double().mean()) - 0.13143) < 5e-5


def test_get_sample_matches_load_mnist():
    x, _ = load_mnist("val")
    for i in (0, 517, 999):
        s = get_sample("mnist", "val", i)
        assert s.shape == (1, 1, 28, 28) and torch.equal(s[0], x[i])
    with pytest.raises(InputError, match="0..999"):
        get_sample("mnist", "val", 1000)
    with pytest.raises(InputError, match="split"):
        get_sample("mnist", "test", 0)
    with pytest.raises(InputError, match="dataset"):
        get_sample("cifar", "train", 0)
    assert list_datasets() == ["mnist", "natural", "cartoon"]
    assert list_splits("cartoon") == ["disc", "squares", "rectangles", "mixtures"]


def test_npz_script_is_deterministic_and_reproduces_the_bundled_file():
    mod = _script()
    raw = np.load(NPZ, allow_pickle=False)
    tr, va = mod.stratified_split(raw["labels"])
    assert np.array_equal(tr, raw["train_idx"]) and np.array_equal(va, raw["val_idx"])
    arrays = {k: raw[k] for k in ("images", "labels", "train_idx", "val_idx")}
    # the bundled file was written by another process: equal bytes show the output is stable
    rebuilt = mod.npz_bytes(arrays)
    assert hashlib.sha256(rebuilt).hexdigest() == hashlib.sha256(NPZ.read_bytes()).hexdigest()
    with zipfile.ZipFile(NPZ) as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    prov = (ROOT / "resources" / "datasets" / "PROVENANCE.md").read_text()
    assert hashlib.sha256(NPZ.read_bytes()).hexdigest() in prov
    assert re.search(r"846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d", prov)


def test_resources_dir_env_override(tmp_path, monkeypatch):
    monkeypatch.setenv("LBI_RESOURCES", str(tmp_path))
    assert resources_dir() == tmp_path
    monkeypatch.setenv("LBI_RESOURCES", str(tmp_path / "nope"))
    with pytest.raises(DataFileError, match="LBI_RESOURCES"):
        resources_dir()
    monkeypatch.delenv("LBI_RESOURCES")
    assert resources_dir() == ROOT / "resources"


# --- preprocessing ---------------------------------------------------------------------------

def test_preprocessing_roundtrip_and_validation():
    p = Preprocessing(offset=0.13, scale=0.3)
    x = torch.rand(2, 1, 4, 4, dtype=torch.float64)
    assert torch.allclose(p.apply(x), (x - 0.13) / 0.3)
    assert torch.allclose(p.undo(p.apply(x)), x, atol=1e-15)
    assert Preprocessing.from_dict(p.to_dict()) == p
    assert Preprocessing.from_dict(None).is_identity
    with pytest.raises(InputError, match="scale"):
        Preprocessing(scale=0.0)


# --- cartoons --------------------------------------------------------------------------------

def test_paper_disc_numbers():
    x = cartoon("disc").astype(np.float64)
    assert x.shape == (64, 64) and x.sum() == 788
    assert abs(np.linalg.norm(x) - 28.071) < 1e-3
    tv_aniso = np.abs(np.diff(x, axis=0)).sum() + np.abs(np.diff(x, axis=1)).sum()
    assert tv_aniso == 128.0  # MATH.md §9.1
    assert np.array_equal(x, x[::-1]) and np.array_equal(x, x.T)
    s = get_sample("cartoon", "disc", 0)
    assert s.shape == (1, 1, 64, 64) and float(s.sum()) == 788.0


@pytest.mark.parametrize("kind", ["squares", "rectangles", "mixtures"])
def test_cartoons_are_seeded_piecewise_constant(kind):
    a, b, c = cartoon(kind, 3), cartoon(kind, 3), cartoon(kind, 4)
    assert np.array_equal(a, b) and not np.array_equal(a, c)
    assert a.dtype == np.float32 and a.min() == 0.0 and 0.25 <= a.max() <= 1.0
    assert 2 <= np.unique(a).size <= 7  # background + at most 6 grey levels
    # piecewise constant: few jumps compared with the number of pixels
    jumps = (np.diff(a, axis=0) != 0).sum() + (np.diff(a, axis=1) != 0).sum()
    assert jumps < 0.25 * a.size
    assert cartoon(kind, 3, size=28).shape == (28, 28)
    assert get_sample("cartoon", kind, 3, size=28).shape == (1, 1, 28, 28)


def _full_boxes(img: np.ndarray) -> list[tuple[int, int]]:
    """(height, width) of every grey level whose region fills its bounding box."""
    out = []
    for level in np.unique(img)[1:]:
        m = img == level
        rows, cols = np.flatnonzero(m.any(1)), np.flatnonzero(m.any(0))
        h, w = rows[-1] - rows[0] + 1, cols[-1] - cols[0] + 1
        if m.sum() == h * w:
            out.append((int(h), int(w)))
    return out


@pytest.mark.parametrize("seed", range(5))
def test_square_and_rectangle_families_draw_boxes(seed):
    # the last shape drawn is never occluded, so at least one level is a complete box
    assert any(h == w for h, w in _full_boxes(cartoon("squares", seed)))
    assert _full_boxes(cartoon("rectangles", seed))
    with pytest.raises(InputError, match="kind"):
        cartoon("stars")


# --- images ----------------------------------------------------------------------------------

def test_load_image_8_and_16_bit_png(tmp_path):
    rng = np.random.default_rng(0)
    a8 = rng.integers(0, 256, (9, 7), dtype=np.uint8)
    Image.fromarray(a8).save(tmp_path / "a.png")
    x = load_image(tmp_path / "a.png")
    assert x.shape == (1, 1, 9, 7) and x.dtype == torch.float32
    assert torch.equal(x[0, 0], torch.from_numpy(a8.astype(np.float32) / 255))
    a16 = rng.integers(0, 65536, (5, 6)).astype(np.uint16)
    Image.fromarray(a16).save(tmp_path / "b.png")
    y = load_image(tmp_path / "b.png")
    assert torch.allclose(y[0, 0].double(), torch.from_numpy(a16 / 65535.0), atol=1e-7)


def test_load_image_float_tiff_rgb_and_resize(tmp_path):
    f = np.linspace(0, 1, 20, dtype=np.float32).reshape(4, 5)
    Image.fromarray(f).save(tmp_path / "f.tif")
    assert torch.allclose(load_image(tmp_path / "f.tif")[0, 0], torch.from_numpy(f))
    Image.fromarray(f * 10 - 3).save(tmp_path / "g.tif")  # outside [0, 1]: min-max scaled
    g = load_image(tmp_path / "g.tif")[0, 0]
    assert torch.allclose(g, torch.from_numpy(f), atol=1e-6)
    rgb = np.zeros((4, 4, 3), np.uint8)
    rgb[..., 0] = 255
    Image.fromarray(rgb).save(tmp_path / "r.png")
    assert torch.allclose(load_image(tmp_path / "r.png"), torch.full((1, 1, 4, 4), 0.299))
    col = load_image(tmp_path / "r.png", grayscale=False)
    assert col.shape == (1, 3, 4, 4)
    assert float(col[0, 0].min()) == 1.0 and float(col[0, 1:].max()) == 0
    Image.fromarray(np.full((40, 30), 128, np.uint8)).save(tmp_path / "c.jpg")
    small = load_image(tmp_path / "c.jpg", size=(10, 12))
    assert small.shape == (1, 1, 10, 12)
    assert torch.allclose(small, torch.full_like(small, 128 / 255), atol=2 / 255)


def test_load_image_bad_files_name_the_file(tmp_path):
    good = tmp_path / "good.png"
    Image.fromarray(np.zeros((32, 32), np.uint8) + 7).save(good)
    cut = tmp_path / "cut.png"
    cut.write_bytes(good.read_bytes()[:60])
    with pytest.raises(DataFileError, match="cut.png.*(truncated|corrupt)"):
        load_image(cut)
    txt = tmp_path / "notes.png"
    txt.write_text("hello")
    with pytest.raises(DataFileError, match="notes.png is not an image"):
        load_image(txt)
    with pytest.raises(DataFileError, match="missing.png does not exist"):
        load_image(tmp_path / "missing.png")
    (tmp_path / "empty.png").write_bytes(b"")
    with pytest.raises(DataFileError, match="empty.png is empty"):
        load_image(tmp_path / "empty.png")


# --- arrays, IDX, torchvision folders --------------------------------------------------------

def test_load_array(tmp_path):
    a = np.arange(12, dtype=np.uint8).reshape(3, 4)
    np.save(tmp_path / "a.npy", a)
    assert torch.equal(load_array(tmp_path / "a.npy"), torch.from_numpy(a / np.float32(255)))
    d = np.random.default_rng(1).standard_normal((2, 3))
    np.save(tmp_path / "d.npy", d)
    assert torch.equal(load_array(tmp_path / "d.npy"), torch.from_numpy(d))
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(DataFileError, match="o.npy.*pickle"):
        load_array(tmp_path / "o.npy")
    (tmp_path / "t.npy").write_bytes((tmp_path / "d.npy").read_bytes()[:100])
    with pytest.raises(DataFileError, match="t.npy"):
        load_array(tmp_path / "t.npy")


def _idx_bytes(arr: np.ndarray, code: int = 0x08) -> bytes:
    head = bytes([0, 0, code, arr.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in arr.shape)
    return head + arr.tobytes()


def test_load_idx_plain_and_gzip(tmp_path):
    imgs = np.random.default_rng(2).integers(0, 256, (3, 28, 28), dtype=np.uint8)
    (tmp_path / "i.idx").write_bytes(_idx_bytes(imgs))
    (tmp_path / "i.gz").write_bytes(gzip.compress(_idx_bytes(imgs)))
    for name in ("i.idx", "i.gz"):
        x = load_idx(tmp_path / name)
        assert x.shape == (3, 1, 28, 28)
        assert torch.equal(x[:, 0], torch.from_numpy(imgs.astype(np.float32) / 255))
    f = np.arange(6, dtype=">f4").reshape(2, 3)
    (tmp_path / "f.idx").write_bytes(_idx_bytes(f, 0x0D))
    assert np.array_equal(load_idx(tmp_path / "f.idx", raw=True), f.astype(np.float32))
    (tmp_path / "short.idx").write_bytes(_idx_bytes(imgs)[:-5])
    with pytest.raises(DataFileError, match="short.idx.*truncated"):
        load_idx(tmp_path / "short.idx")
    (tmp_path / "bad.idx").write_bytes(b"\x89PNG....")
    with pytest.raises(DataFileError, match="bad.idx is not an IDX file"):
        load_idx(tmp_path / "bad.idx")


def test_load_torchvision_folder(tmp_path):
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    imgs = np.random.default_rng(3).integers(0, 256, (4, 28, 28), dtype=np.uint8)
    labels = np.array([3, 1, 4, 1], np.uint8)
    (raw / "t10k-images-idx3-ubyte.gz").write_bytes(gzip.compress(_idx_bytes(imgs)))
    (raw / "t10k-labels-idx1-ubyte").write_bytes(_idx_bytes(labels))
    x, y = load_torchvision_folder(tmp_path, "FashionMNIST", train=False)
    assert x.shape == (4, 1, 28, 28) and y.tolist() == [3, 1, 4, 1]
    with pytest.raises(DataFileError, match="never downloads"):
        load_torchvision_folder(tmp_path, "MNIST", train=True)
    with pytest.raises(InputError, match="CIFAR"):
        load_torchvision_folder(tmp_path, "CIFAR10")


def test_as_batch():
    assert as_batch(torch.zeros(28, 28), (1, 28, 28)).shape == (1, 1, 28, 28)
    assert as_batch(torch.zeros(5, 784), (1, 28, 28)).shape == (5, 1, 28, 28)
    assert as_batch(torch.zeros(2, 1, 28, 28), (784,)).shape == (2, 784)
    with pytest.raises(ShapeMismatchError, match="784"):
        as_batch(torch.zeros(3, 30, 30), (1, 28, 28))

