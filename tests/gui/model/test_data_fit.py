"""The data follows the network (lbi_gui.model.data_fit): checked against the bundled
datasets' known image sizes and images written here."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from lbi_engine.errors import ShapeMismatchError
from lbi_gui.model.data_fit import fit_to_network, fitting_dataset, follow_changes, image_size


def _png(path, h: int, w: int, mode: str = "RGB") -> str:
    shape = (h, w, 3) if mode == "RGB" else (h, w)
    Image.fromarray(np.random.default_rng(0).integers(0, 255, shape, dtype=np.uint8),
                    mode).save(path)
    return str(path)


def test_a_dataset_that_does_not_fit_is_replaced_by_one_that_does() -> None:
    req = {"network": "/x/mine.onnx", "dataset": "natural", "split": "val", "index": 7}
    fitted = fit_to_network(req, (1, 28, 28))
    assert (fitted.request["dataset"], fitted.request["split"], fitted.request["index"]) == \
        ("mnist", "val", 0)
    assert "natural images are 3×32×32" in fitted.note and "mnist" in fitted.note
    assert fitted.request["network"] == "/x/mine.onnx"


def test_a_flat_input_takes_a_dataset_of_as_many_pixels() -> None:
    assert fitting_dataset((784,)) == "mnist"
    assert fitting_dataset((4096,)) == "cartoon"
    assert fitting_dataset((3 * 32 * 32,), "natural") == "natural"
    fitted = fit_to_network({"network": "n", "dataset": "mnist", "index": 3}, (784,))
    assert fitted.note is None and fitted.request["index"] == 3


def test_no_bundled_dataset_fits_is_a_shape_error_naming_both_shapes() -> None:
    with pytest.raises(ShapeMismatchError, match="3×32×32.*3×64×64.*open an image"):
        fit_to_network({"network": "mine.onnx", "dataset": "natural"}, (3, 64, 64))


def test_a_photo_of_another_size_is_resized_with_a_note(tmp_path) -> None:
    path = _png(tmp_path / "photo.png", 48, 80)
    assert image_size(path) == (48, 80)
    fitted = fit_to_network({"network": "a/mine.onnx", "image": path, "resize": False},
                            (3, 64, 64))
    assert fitted.request["resize"] is True
    assert fitted.note == "photo.png is 80×48: resized to 64×64, the input of mine.onnx."
    same = fit_to_network({"network": "n", "image": _png(tmp_path / "ok.png", 64, 64, "L"),
                           "resize": False}, (3, 64, 64))
    assert same.note is None and same.request["resize"] is False


def test_arrays_measured_codes_and_unknown_shapes_are_left_to_the_engine(tmp_path) -> None:
    for req in ({"network": "n", "truth": "t.npy"}, {"network": "n", "data": "y.npy"}):
        assert fit_to_network(req, (1, 28, 28)).request == req
    req = {"network": "n", "dataset": "natural"}
    assert fit_to_network(req, None) == fit_to_network(req, None)
    assert fit_to_network(req, None).request == req


def test_the_window_takes_only_the_fitted_fields_of_its_own_problem() -> None:
    shown = {"network": "n", "dataset": "natural", "split": "val", "index": 4,
             "image": None, "resize": False, "alpha": 0.1}
    prepared = {**shown, "dataset": "mnist", "index": 0, "alpha": 0.2}
    assert follow_changes(shown, prepared) == {"dataset": "mnist", "index": 0}
    assert follow_changes({**shown, "network": "other"}, prepared) == {}


def test_an_image_under_two_pixels_a_side_is_degenerate(tmp_path) -> None:
    from lbi_gui.model.data_fit import degenerate_image

    assert "is 1×1 pixels" in degenerate_image(_png(tmp_path / "a.png", 1, 1))
    assert "is 5×1 pixels" in degenerate_image(_png(tmp_path / "b.png", 1, 5))
    assert degenerate_image(_png(tmp_path / "c.png", 2, 2)) is None
    assert degenerate_image(str(tmp_path / "missing.png")) is None  # the reader says more
