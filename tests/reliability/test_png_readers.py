"""16-bit colour PNGs decoded exactly and fast; PNG chunks bounded before anything is parsed.

The decoder's unfiltering is checked against rows filtered forwards in plain Python (every
filter type, mixed in one image); the hostile files (a large Paeth image, gigabytes of
trailing bytes or of a private chunk, all sparse on disk) end in a correct result or one line,
under 1 GiB at ``--memory-limit 300M``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lbi_engine.data._png16 import MAX_ANCILLARY_CHUNK, deep_colour_png
from lbi_engine.data.files import read_image
from lbi_engine.errors import DataFileError
from tests.reliability import png_files as pf

GiB = 2**30


@pytest.mark.parametrize("channels", [3, 4])
def test_every_row_filter_mixed_in_one_image_decodes_exactly(tmp_path: Path,
                                                             channels: int) -> None:
    rng = np.random.default_rng(channels)
    image = rng.integers(0, 65536, size=(23, 17, channels), dtype=np.uint16)
    image[5:9] = 65535  # flat rows: ties in Paeth's choice
    image[12] = 0
    kinds = [int(k) for k in rng.integers(0, 5, size=23)]
    path = pf.png16(tmp_path / "mixed.png", image, kinds, idat_parts=7)
    got = deep_colour_png(path)
    assert got is not None and got.shape == image.shape
    assert np.array_equal(np.rint(got * 65535).astype(np.uint16), image)


@pytest.mark.parametrize("kind", [0, 1, 2, 3, 4])
def test_each_row_filter_alone_decodes_exactly(tmp_path: Path, kind: int) -> None:
    rng = np.random.default_rng(kind)
    image = rng.integers(0, 65536, size=(9, 11, 3), dtype=np.uint16)
    path = pf.png16(tmp_path / f"f{kind}.png", image, [kind] * 9)
    assert np.array_equal(np.rint(deep_colour_png(path) * 65535).astype(np.uint16), image)


def test_an_unknown_filter_and_a_lying_chunk_are_refused(tmp_path: Path) -> None:
    image = np.zeros((4, 4, 3), np.uint16)
    bad = pf.png16(tmp_path / "bad.png", image, [0, 0, 0, 0])
    data = bytearray(bad.read_bytes())
    # a chunk after IHDR claiming 2 GiB-1 bytes (the file holds far less)
    at = 8 + 25
    data[at:at + 4] = (2**31 - 1).to_bytes(4, "big")
    bad.write_bytes(bytes(data))
    with pytest.raises(DataFileError, match="more than the file holds"):
        read_image(bad)


def test_a_large_ancillary_chunk_is_refused_before_pillow_reads_it(tmp_path: Path) -> None:
    path = pf.sparse_private_chunk_png(tmp_path / "private.png", 9)
    assert path.stat().st_blocks * 512 < 2**20  # sparse
    with pytest.raises(DataFileError, match=f"at most {MAX_ANCILLARY_CHUNK:,} a chunk"):
        read_image(path)


@pytest.mark.timeout(300)
def test_hostile_pngs_end_in_a_result_or_one_line_under_a_gib(tmp_path: Path, bounded,
                                                              kit) -> None:
    """1700 x 1700 Paeth (91 s in the per-pixel loop) decodes; 1.5 GiB of trailing bytes are
    never read; a 1 GiB private chunk is refused."""
    yy, xx = np.mgrid[0:1700, 0:1700]
    image = np.stack([(xx * 38) % 65536, (yy * 38) % 65536, (xx + yy) * 19 % 65536],
                     axis=-1).astype(np.uint16)
    cases = {
        "paeth": pf.png16(tmp_path / "paeth.png", image),
        "trailing": pf.png16(tmp_path / "trailing.png", image[:28, :28],
                             trailing=3 * 2**29),
        "private": pf.sparse_private_chunk_png(tmp_path / "private.png", 1024),
    }
    for name, path in cases.items():
        assert path.stat().st_blocks * 512 < 32 * 2**20, name  # small on disk
        outcome = bounded.run("invert", "--network", kit.card, "--image", path,
                              "--resize", "--max-iter", "1", "--out", tmp_path / f"o-{name}",
                              "--memory-limit", "300M", "--quiet")
        if name == "private":
            assert outcome.is_one_line_refusal(), outcome
            assert "prVt" in outcome.err and "private.png" in outcome.err
        else:
            assert outcome.code == 0, (name, outcome)
        assert outcome.peak < GiB, (name, outcome.peak)
