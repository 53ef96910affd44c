"""``lbi_engine.data`` loads and reads without torch (issue #15); its torch face returns the
very same values; the resizing of ``.npy`` images agrees with torch's antialiased bilinear."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch

from lbi_engine import data
from lbi_engine.errors import InputError

_PROBE = """
import sys, numpy as np
from lbi_engine import data
a = data.sample_array("mnist", "val", 7)
c = data.sample_array("cartoon", "squares", 2, size=32)
images, labels = data.mnist_split("val")
np.save(sys.argv[1], (np.arange(20 * 30).reshape(20, 30) % 256).astype(np.uint8))
img = data.read_image(sys.argv[1], size=(28, 28))
assert a.shape == (1, 1, 28, 28) and c.shape == (1, 1, 32, 32) and img.shape == (1, 1, 28, 28)
assert images.shape == (1000, 1, 28, 28) and labels.dtype == np.int64
print("torch" in sys.modules)
"""


def test_samples_and_files_are_read_without_importing_torch(tmp_path) -> None:
    out = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "a.npy")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(("dataset", "split", "index", "size"),
                         [("mnist", "val", 0, None), ("mnist", "train", 3999, None),
                          ("mnist", "all", 17, 28), ("cartoon", "disc", 0, None),
                          ("cartoon", "mixtures", 5, 40)])
def test_numpy_and_torch_faces_give_identical_samples(dataset, split, index, size) -> None:
    array = data.sample_array(dataset, split, index, size=size)
    tensor = data.get_sample(dataset, split, index, size=size)
    assert array.dtype == np.float32 and tensor.dtype == torch.float32
    np.testing.assert_array_equal(tensor.numpy(), array)
    assert 0.0 <= array.min() and array.max() <= 1.0 and array.max() > 0.5  # not blank


def test_mnist_split_matches_the_raw_npz_bytes() -> None:
    """Independent of the reader: the npz's uint8 pixels / 255 at the split's indices."""
    raw = np.load(data.resources_dir() / "datasets" / data.MNIST_FILE)
    images, labels = data.mnist_split("val")
    idx = raw["val_idx"]
    np.testing.assert_allclose(images[:, 0], raw["images"][idx] / 255.0, rtol=0, atol=3e-8)
    np.testing.assert_array_equal(labels, raw["labels"][idx])
    timages, tlabels = data.load_mnist("val")
    np.testing.assert_array_equal(timages.numpy(), images)
    np.testing.assert_array_equal(tlabels.numpy(), labels)


def test_bad_samples_are_refused_with_the_same_errors() -> None:
    for call in (lambda: data.sample_array("mnist", "val", 1000),
                 lambda: data.sample_array("mnist", "test", 0),
                 lambda: data.sample_array("cifar", "train", 0),
                 lambda: data.get_sample("mnist", "val", -1)):
        with pytest.raises(InputError):
            call()


@pytest.mark.parametrize(("shape", "size"), [((20, 30), (28, 28)), ((90, 90), (28, 28)),
                                             ((28, 28), 64)])
def test_npy_image_resize_agrees_with_torch_interpolate(tmp_path, shape, size) -> None:
    """The .npy image path resizes with Pillow now (it used torch before); torch's
    ``interpolate(antialias=True)`` implements the same filter, so the two agree to float32
    rounding (a few ulps of values in [0, 1])."""
    rng = np.random.default_rng(1)
    a = rng.random(shape).astype(np.float32)
    path = tmp_path / "a.npy"
    np.save(path, a)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = data.read_image(path, size=size)
    stretched = shape == (20, 30)  # 30 x 20 -> 28 x 28 changes the aspect ratio
    said = any("aspect ratio" in str(w.message) for w in caught)
    assert said == stretched, [str(w.message) for w in caught]
    hw = (size, size) if isinstance(size, int) else size
    ref = torch.nn.functional.interpolate(torch.from_numpy(a)[None, None], size=hw,
                                          mode="bilinear", antialias=True,
                                          align_corners=False).clamp(0, 1).numpy()
    assert ours.shape == ref.shape == (1, 1, *hw)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=2e-6)


def test_the_package_serves_the_tensor_readers() -> None:
    from lbi_engine.data import tensors

    assert data.load_image is tensors.load_image and data.as_batch is tensors.as_batch

