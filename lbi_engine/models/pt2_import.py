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
from lbi_engine.limits import LoadBudget
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
    """The members of one archive that lbi reads, each charged to the load's budget before it
    is read (SECURITY.md, "The budget model")."""

    def __init__(self, path: Path, budget: LoadBudget | None = None) -> None:
        self.path = path
        self.budget = budget if budget is not None else LoadBudget(
            f"model file {str(path)!r}", "use a smaller network, or export it again")
        # tensor data files read so far: several tensors may share one file, read once
        self._members: dict[str, bytearray] = {}
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

    def _info(self, name: str, limit: int) -> zipfile.ZipInfo:
        try:
            info = self.zf.getinfo(name)
        except KeyError as exc:
            raise ModelFileError(f".pt2 file {str(self.path)!r} lacks the member {name!r}; it "
                                 "is incomplete. Save it again with torch.export.save.") from exc
        if info.file_size > limit:
            raise ModelFileError(f".pt2 member {name!r} of {str(self.path)!r} is "
                                 f"{info.file_size:,} bytes, more than lbi reads ({limit:,}).")
        return info

    def read(self, name: str, limit: int) -> bytearray:
        """The member's bytes, charged to the budget first, into one buffer of its declared
        size (zipfile stops a member at its declared size, so the buffer is never outgrown)."""
        info = self._info(name, limit)
        self.budget.charge(info.file_size, f"member {name!r}")
        data = bytearray(info.file_size)
        view, got = memoryview(data), 0
        with self.zf.open(info) as fh:
            while got < len(data) and (chunk := fh.read(min(1 << 20, len(data) - got))):
                view[got:got + len(chunk)] = chunk  # in steps: no second copy of the member
                got += len(chunk)
        view.release()
        return data if got == len(data) else data[:got]

    def _json(self, name: str, what: str) -> Any:
        info = self._info(name, MAX_JSON_BYTES)
        self.budget.charge_json(info.file_size, f"{what} {name!r}")
        try:
            return json.loads(self.read(name, MAX_JSON_BYTES))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise ModelFileError(f"{what} of {str(self.path)!r} ({name}) is not valid JSON "
                                 f"({str(exc)[:200]}); save it again.") from exc

    def program(self) -> dict[str, Any]:
        program = self._json(self.json_name, "the graph")
        if not isinstance(program, dict):
            raise ModelFileError(f"the graph of {str(self.path)!r} ({self.json_name}) is not a "
                                 "JSON object; save it again.")
        return program

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
                cfg = self._json(cfg_name, "the tensor list")
                cfg = cfg.get("config", {}) if isinstance(cfg, dict) else None
                if not isinstance(cfg, dict):
                    raise ModelFileError(f"the tensor list {cfg_name!r} of {str(self.path)!r} "
                                         "is not a JSON object; save it again.")
                entries.extend((prefix, fqn, meta) for fqn, meta in cfg.items())
        self._check_total_memory(entries)
        try:
            return {fqn: self._raw_tensor(prefix, fqn, meta) for prefix, fqn, meta in entries}
        finally:
            self._members.clear()  # the tensors are copies: the raw files are not kept

    def _check_total_memory(self, entries: list[tuple[str, str, dict[str, Any]]]) -> None:
        """Refuse before reading when all tensors together would not fit: each one is capped
        by MAX_TENSOR_VALUES, but many capped tensors could still exhaust memory. The raw data
        files are charged as they are read (once each, however many tensors share one)."""
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
        self.budget.charge(total, f"its {len(entries):,} tensors unpacked")

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
        if math.prod(sizes) == 0:
            return torch.zeros(sizes, dtype=dtype)
        item = torch.empty((), dtype=dtype).element_size()
        name = prefix + str(meta["path_name"])
        if name not in self._members:
            self._members[name] = self.read(name, MAX_TENSOR_VALUES * item)
        data = self._members[name]
        usable = len(data) - len(data) % item
        flat = torch.frombuffer(data, dtype=dtype, count=usable // item) if usable else \
            torch.zeros(0, dtype=dtype)
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
            # torch.load makes the tensors from the buffer: a second copy of it
            self.budget.charge(len(data), f"the tensors of {member!r}")
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
    archive = Pt2Archive(p)  # one budget for the whole load: members, JSON, tensors, layers
    try:
        program = archive.program()
        _check_node_count(program, p)  # before the tensors are read and the graph walked
        return GraphTranslator(program, archive.tensors(), p, input_shape,
                               archive.budget).build()
    except LbiError:
        raise
    except Exception as exc:  # malformed JSON structure or tensor metadata
        raise ModelFileError(f".pt2 file {str(p)!r} is inconsistent ({type(exc).__name__}: "
                             f"{exc}); save it again with torch.export.save.") from exc


def _check_node_count(program: dict[str, Any], path: Path) -> None:
    """The bound on ONNX graphs (``LBI_MAX_GRAPH_NODES``) for exported programs too: the walk
    visits every node (an ONNX graph of 20,000 nodes took 76 s)."""
    from lbi_engine.models.onnx_import import MAX_NODES_ENV, _max_graph_nodes

    nodes = program["graph_module"]["graph"]["nodes"]
    most = _max_graph_nodes()
    if isinstance(nodes, list) and len(nodes) > most:
        raise ModelFileError(f".pt2 file {str(path)!r} has {len(nodes):,} graph nodes; lbi "
                             f"lifts graphs of at most {most:,} (raise the bound with "
                             f"{MAX_NODES_ENV}={len(nodes)} if the network really is that deep)")
