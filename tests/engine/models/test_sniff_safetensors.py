"""A safetensors file is recognised whatever its header length (found by scripts/check-lowest:
with safetensors 0.4 a state dict's header was 128 bytes long, so the file began with 0x80 like
a pickle and was refused as one)."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import save_file

from lbi_engine.models.model_files import sniff_model_format


def test_safetensors_is_recognised_for_every_header_length(tmp_path: Path) -> None:
    first_bytes = set()
    for pad in range(0, 400, 3):  # metadata padding moves the header length through 88..~500
        path = tmp_path / f"w{pad}.bin"  # the content decides, not the name
        save_file({"w": torch.zeros(2, 3)}, path, metadata={"pad": "x" * pad})
        first_bytes.add(path.read_bytes()[0])
        assert sniff_model_format(path) == "safetensors", pad
    assert 0x80 in first_bytes  # the length that looks like a pickle was among them


def test_a_pickle_is_still_a_pickle(tmp_path: Path) -> None:
    path = tmp_path / "legacy.bin"
    torch.save({"w": torch.zeros(2)}, path, _use_new_zipfile_serialization=False)
    assert path.read_bytes()[:1] == b"\x80"
    assert sniff_model_format(path) == "torch-legacy"
