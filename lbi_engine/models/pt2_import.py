"""torch.export archives (``torch.export.save`` -> ``.pt2``) -> LiftedNetwork, by reading them.

A ``.pt2`` file is a zip archive. lbi reads three kinds of members and nothing else:

* ``<root>/models/model.json``: the exported program's graph as JSON (ATen ops with their
  arguments, the signature saying which graph inputs are parameters, buffers or the user's
  input). Older archives (torch <= 2.5) hold ``serialized_exported_program.json`` instead.
* ``<root>/data/weights/model_weights_config.json`` and the raw tensor files it names
  (dtype, sizes, strides, storage offset per tensor; several tensors may share one file);
  the same for ``data/constants``. Older archives hold ``serialized_state_dict.pt``, read
  with ``torch.load(weights_only=True)``.

It never calls ``torch.export.load`` (which deserialises the program, may unpickle tensors
marked ``use_pickle``, and rebuilds guard code), never unpickles ``sample_inputs``, and never
runs the program: the graph is translated op by op against an allow-list of ATen ops
(:mod:`lbi_engine.models._pt2_ops`) into an ``nn.Sequential`` that lbi builds itself, which is then
lifted like any module.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from lbi_engine.errors import LbiError, ModelFileError
from lbi_engine.models.importers import check_model_file
from lbi_engine.models.model_files import _MODEL_JSON, _OLD_JSON
from lbi_engine.models.model_files import is_pt2_archive as is_pt2_archive  # re-exported (old home)

#: Largest graph JSON lbi parses (the graphs of liftable networks are a few kB per layer).
MAX_JSON_BYTES = 64 * 2**20
#: Largest tensor (values) lbi reads from an archive (as for a card's layers).
MAX_TENSOR_VALUES = 2**28

# torch._export.serde.schema.ScalarType codes of the dtypes a weight may have
_DTYPES = {1: torch.uint8, 2: torch.int8, 3: torch.int16, 4: torch.int32, 5: torch.int64,
           6: torch.float16, 7: torch.float32, 8: torch.float64, 12: torch.bool,
           13: torch.bfloat16}



class Pt2Archive:
    """The members of one archive that lbi reads, with size checks before each read."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self.zf = zipfile.ZipFile(path)
            self.names = self.zf.namelist()
        except (zipfile.BadZipFile, OSError) as exc:
            raise ModelFileError(f".pt2 file {str(path)!r} is not a readable zip archive "
                                 f"({exc}); it is truncated or corrupt. Save it again with "
                                 "torch.export.save.") from exc
        models = [n for n in self.names if n.endswith(_MODEL_JSON) or n.endswith(_OLD_JSON)]
        if len(models) != 1:
            raise ModelFileError(f"{str(path)!r} holds {len(models)} exported programs "
                                 f"({models[:4]}); lbi reads archives with exactly one "
                                 "(torch.export.save(program, path)).")
        self.json_name = models[0]
        self.old_format = self.json_name.endswith(_OLD_JSON)
        self.root = self.json_name[: -len(_OLD_JSON if self.old_format else _MODEL_JSON)]

    def read(self, name: str, limit: int) -> bytes:
        try:
            info = self.zf.getinfo(name)
        except KeyError as exc:
            raise ModelFileError(f".pt2 file {str(self.path)!r} lacks the member {name!r}; it "
                                 "is incomplete. Save it again with torch.export.save.") from exc
        if info.file_size > limit:
            raise ModelFileError(f".pt2 member {name!r} of {str(self.path)!r} is "
                                 f"{info.file_size:,} bytes, more than lbi reads ({limit:,}).")
        return self.zf.read(name)

    def program(self) -> dict[str, Any]:
        try:
            return json.loads(self.read(self.json_name, MAX_JSON_BYTES))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ModelFileError(f"the graph of {str(self.path)!r} ({self.json_name}) is not "
                                 f"valid JSON ({exc}); save it again.") from exc

    def tensors(self) -> dict[str, torch.Tensor]:
        """Parameters, buffers and constants by their state-dict names (fqn)."""
        if self.old_format:
            return self._old_tensors()
        entries: list[tuple[str, str, dict[str, Any]]] = []
        for sub in ("weights", "constants"):
            prefix = f"{self.root}data/{sub}/"
            configs = [n for n in self.names if n.startswith(prefix) and n.endswith(
                "_config.json")]
            for cfg_name in configs:
                cfg = json.loads(self.read(cfg_name, MAX_JSON_BYTES)).get("config", {})
                entries.extend((prefix, fqn, meta) for fqn, meta in cfg.items())
        self._check_total_memory(entries)
        return {fqn: self._raw_tensor(prefix, fqn, meta) for prefix, fqn, meta in entries}

    def _check_total_memory(self, entries: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Refuse before reading when all tensors together would not fit: each one is capped
        by MAX_TENSOR_VALUES, but many capped tensors could still exhaust memory."""
        from lbi_engine.limits import check_bytes

        total = 0
        for _, fqn, meta in entries:
            tm = meta.get("tensor_meta") if isinstance(meta, dict) else None
            if not isinstance(tm, dict) or meta.get("use_pickle"):
                continue  # _raw_tensor refuses it with its own message
            dtype = _DTYPES.get(int(tm["dtype"]))
            if dtype is None:
                continue  # the same
            sizes = [max(0, _as_int(s, fqn)) for s in tm["sizes"]]
            total += math.prod(sizes) * torch.empty((), dtype=dtype).element_size()
        # the raw bytes and the tensor cloned from them exist at once while reading
        check_bytes(2 * total, f"model file {str(self.path)!r} (its tensors unpacked)",
                    "use a smaller network")

    def _raw_tensor(self, prefix: str, fqn: str, meta: dict[str, Any]) -> torch.Tensor:
        if meta.get("use_pickle"):
            raise ModelFileError(f"tensor {fqn!r} of {str(self.path)!r} is stored as a pickle "
                                 "(a tensor subclass); lbi does not unpickle archive members. "
                                 "Export a model whose weights are plain tensors.")
        tm = meta["tensor_meta"]
        dtype = _DTYPES.get(int(tm["dtype"]))
        if dtype is None:
            raise ModelFileError(f"tensor {fqn!r} of {str(self.path)!r} has dtype code "
                                 f"{tm['dtype']}, which lbi does not read; save float weights.")
        sizes = [_as_int(s, fqn) for s in tm["sizes"]]
        strides = [_as_int(s, fqn) for s in tm["strides"]]
        offset = _as_int(tm.get("storage_offset", {"as_int": 0}), fqn)
        if math.prod(sizes) > MAX_TENSOR_VALUES or min(sizes, default=1) < 0:
            raise ModelFileError(f"tensor {fqn!r} of {str(self.path)!r} has sizes {sizes}; lbi "
                                 f"reads tensors of at most {MAX_TENSOR_VALUES:,} values.")
        item = torch.empty((), dtype=dtype).element_size()
        data = self.read(prefix + str(meta["path_name"]), MAX_TENSOR_VALUES * item)
        flat = torch.frombuffer(bytearray(data), dtype=dtype) if data else \
            torch.zeros(0, dtype=dtype)
        if math.prod(sizes) == 0:
            return torch.zeros(sizes, dtype=dtype)
        last = offset + sum((n - 1) * s for n, s in zip(sizes, strides, strict=True))
        if offset < 0 or min(strides, default=0) < 0 or last >= flat.numel():
            raise ModelFileError(f"tensor {fqn!r} of {str(self.path)!r} does not fit its data "
                                 f"file ({flat.numel()} values); the archive is corrupt.")
        return flat.as_strided(sizes, strides, offset).clone()

    def _old_tensors(self) -> dict[str, torch.Tensor]:
        out: dict[str, torch.Tensor] = {}
        for member in ("serialized_state_dict.pt", "serialized_constants.pt"):
            name = self.root + member
            if name not in self.names:
                continue
            data = self.read(name, 8 * MAX_TENSOR_VALUES)
            try:
                obj = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
            except Exception as exc:  # weights_only refuses anything but tensors
                raise ModelFileError(f"{member} in {str(self.path)!r} is not plain tensors "
                                     f"({type(exc).__name__}); lbi does not unpickle it. "
                                     "Save the program again with a current torch.") from exc
            if isinstance(obj, dict):
                out.update({str(k): v for k, v in obj.items() if isinstance(v, torch.Tensor)})
        return out


def _as_int(v: Any, fqn: str) -> int:
    if isinstance(v, dict) and "as_int" in v:
        return int(v["as_int"])
    raise ModelFileError(f"tensor {fqn!r} has a symbolic size {v}; weights must have fixed "
                         "sizes.")


def pt2_sequential(path: str | Path,
                   input_shape: Sequence[int] | None = None) -> tuple[Any, tuple[int, ...]]:
    """The nn.Sequential lbi builds from a .pt2 archive, and the sample shape it takes."""
    from lbi_engine.models._pt2_ops import GraphTranslator

    p = check_model_file(path, ".pt2")
    archive = Pt2Archive(p)
    try:
        program = archive.program()
        return GraphTranslator(program, archive.tensors(), p, input_shape).build()
    except LbiError:
        raise
    except Exception as exc:  # malformed JSON structure or tensor metadata
        raise ModelFileError(f".pt2 file {str(p)!r} is inconsistent ({type(exc).__name__}: "
                             f"{exc}); save it again with torch.export.save.") from exc
