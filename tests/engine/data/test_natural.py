"""The bundled colour patches: shapes, ranges, the split by photograph, and larger windows."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from lbi_engine.data import dataset_size, list_datasets, list_splits, natural_split, sample_array
from lbi_engine.data.datasets import NATURAL_FILE, _natural_arrays
from lbi_engine.data.resource_files import resources_dir
from lbi_engine.errors import InputError


def test_listed_with_its_splits_and_sizes():
    assert "natural" in list_datasets()
    assert list_splits("natural") == ["train", "val"]
    assert dataset_size("natural", "train") == 6000
    assert dataset_size("natural", "val") == 600


def test_file_is_the_one_provenance_records():
    data = (resources_dir() / "datasets" / NATURAL_FILE).read_bytes()
    provenance = (resources_dir() / "datasets" / "PROVENANCE.md").read_text(encoding="utf-8")
    assert hashlib.sha256(data).hexdigest() in provenance


def test_split_is_by_photograph():
    arr = _natural_arrays()
    train_images = set(arr["train_patches"][:, 0].tolist())
    val_images = set(arr["val_patches"][:, 0].tolist())
    assert train_images.isdisjoint(val_images)
    names = arr["names"].tolist()
    assert {names[i] for i in val_images} == {"astronaut", "chelsea"}


def test_patches_are_colour_in_range_and_not_flat():
    val = natural_split("val")
    assert val.shape == (600, 3, 32, 32) and val.dtype == np.float32
    assert 0.0 <= val.min() and val.max() <= 1.0
    assert val.std(axis=(1, 2, 3)).min() >= 0.04 - 1e-6
    # colour, not grey copied three times
    assert np.abs(val[:, 0] - val[:, 1]).mean() > 0.01


@pytest.mark.parametrize("size", [32, 64, 128])
def test_sample_windows_contain_the_patch(size):
    patch = sample_array("natural", "val", 7)
    big = sample_array("natural", "val", 7, size=size)
    assert big.shape == (1, 3, size, size)
    if size == 64:  # the stored patch lies inside the larger window at the same scale
        hits = [(t, left) for t in range(33) for left in range(33)
                if np.array_equal(big[0, :, t:t + 32, left:left + 32], patch[0])]
        assert hits


def test_bad_requests_get_one_clear_line():
    with pytest.raises(InputError, match="out of range"):
        sample_array("natural", "val", 600)
    with pytest.raises(InputError, match="sizes"):
        sample_array("natural", "val", 0, size=48)
    with pytest.raises(InputError, match="unknown"):
        natural_split("test")
