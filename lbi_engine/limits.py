"""Memory budget: refuse an input *before* allocating what it would need.

Why: a tiny hostile or mistaken file (a card with 40 x Linear(16384, 16384), an 8000 x 8000
PNG, a zip bomb, a sweep grid of millions of cells) must end in one clear message, not in a
machine that swaps to a halt or a MemoryError traceback. Every loader estimates the bytes an
input needs from its header or shapes alone and calls :func:`check_bytes` first.

The limit: the one a caller gives (:func:`limited_to`: the CLI passes ``--memory-limit``
there for one command), else ``LBI_MEMORY_LIMIT`` (e.g. ``8G``, ``512M``, ``2000000000``),
otherwise 80 % of the memory available now (``MemAvailable`` on Linux, physical memory
elsewhere), or what an address-space limit (``ulimit -v``) still leaves if that is less, and
at least 256 MiB.

Only regular files are read (:func:`open_regular`, :func:`read_regular`): a FIFO would block
the open (or the read) forever, a device such as ``/dev/zero`` or a ``/proc`` file has no
size to check and never ends. Each is opened without blocking, checked on the descriptor
(so a name swapped after the check is not read), and its size is checked before a byte is
read; the read itself stops at the bound, whatever the file grows to meanwhile.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

from lbi_engine.errors import InputError, LbiError

__all__ = ["ENV_VAR", "JSON_EXPANSION", "LAYERS_ENV", "LoadBudget", "MemoryLimitError",
           "bound_from_env", "check_bytes", "format_bytes", "json_byte_limit", "max_layers",
           "limited_to", "memory_limit", "open_regular", "parse_size", "read_json",
           "read_regular"]

ENV_VAR = "LBI_MEMORY_LIMIT"
_MIN_LIMIT = 256 * 2**20
_UNITS = {"": 1, "b": 1, "k": 2**10, "kb": 2**10, "kib": 2**10, "m": 2**20, "mb": 2**20,
          "mib": 2**20, "g": 2**30, "gb": 2**30, "gib": 2**30, "t": 2**40, "tb": 2**40,
          "tib": 2**40}


class MemoryLimitError(InputError):
    """An input would need more memory than the limit allows (refused before allocating)."""


def parse_size(text: str) -> int:
    """"8G", "512M", "1.5GiB", "2000000000" -> bytes; ValueError naming the text otherwise."""
    m = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", str(text))
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in _UNITS:
        raise ValueError(f"{text!r} is not a memory size; write e.g. 8G, 512M or 2000000000")
    value = float(m.group(1)) * _UNITS[unit]
    if not 1 <= value < 2**62:
        raise ValueError(f"{text!r}: a memory size must be between 1 byte and 4 EiB")
    return int(value)


def _available() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 8 * 2**30


class _Given:
    """The limit a caller gave with :func:`limited_to` (None: none given). One value for the
    process, not per thread: a command's worker threads (a batch solved in shares) check
    against the limit the command was given."""

    limit: int | None = None


@contextmanager
def limited_to(limit: int | None) -> Iterator[None]:
    """Every check inside uses ``limit`` bytes (None changes nothing: an outer one, else the
    environment's or the default). How ``--memory-limit`` reaches the checks: passed here by
    the CLI for one command, never written to the environment."""
    if limit is not None and limit < 1:
        raise InputError(f"memory limit {limit}: give at least 1 byte")
    before = _Given.limit
    _Given.limit = before if limit is None else int(limit)
    try:
        yield
    finally:
        _Given.limit = before


def memory_limit() -> int:
    """The byte budget of one run (see the module docstring)."""
    if _Given.limit is not None:
        return _Given.limit
    text = os.environ.get(ENV_VAR, "").strip()
    if text:
        try:
            return parse_size(text)
        except ValueError as exc:
            raise InputError(f"{ENV_VAR}={text}: {exc}") from None
    limit = int(_available() * 0.8)
    room = _address_space_room()
    if room is not None:
        limit = min(limit, room)
    return max(_MIN_LIMIT, limit)


def _address_space_room() -> int | None:
    """What an RLIMIT_AS (ulimit -v) still leaves this process, or None without one."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    if soft in (resource.RLIM_INFINITY, -1) or soft <= 0:
        return None
    used = 0
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmSize:"):
                    used = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return max(0, soft - used)


#: The most layers a network may have (a card's layers, counted inside residual blocks too,
#: and the lifted layers of a graph): every layer is built, checked and stepped on, so a
#: few kilobytes of card or graph must not cost minutes before a refusal. The deepest
#: torchvision networks lift to a few hundred layers.
MAX_LAYERS = 1000
LAYERS_ENV = "LBI_MAX_LAYERS"


def max_layers() -> int:
    """``LBI_MAX_LAYERS`` if set (a whole number), else :data:`MAX_LAYERS`."""
    return bound_from_env(LAYERS_ENV, MAX_LAYERS, "layers")


def bound_from_env(name: str, default: int, unit: str,
                   error: type[LbiError] = InputError) -> int:
    """A count bound: the environment variable ``name`` if set (a whole number >= 1), else
    ``default``; ``error`` naming the variable for anything else."""
    text = os.environ.get(name, "").strip()
    try:
        return max(1, int(text)) if text else default
    except ValueError:
        raise error(f"{name}={text!r}: give a whole number of {unit}, e.g. "
                         f"{name}={default * 4}") from None


def format_bytes(n: float) -> str:
    """1536 -> '1.5 KiB'."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"  # pragma: no cover


def check_bytes(needed: float, what: str, fix: str) -> None:
    """MemoryLimitError when ``needed`` bytes exceed the limit: names input, estimate, limit."""
    limit = memory_limit()
    if needed > limit:
        raise MemoryLimitError(
            f"{what} would need about {format_bytes(needed)} of memory, more than the limit of "
            f"{format_bytes(limit)}; {fix} (or raise the limit with --memory-limit / "
            f"{ENV_VAR}, e.g. {ENV_VAR}=64G, if the machine really has that much).")


#: Python objects that ``json.loads`` makes per byte of text, at most (a list of empty
#: objects: 24.2x; SECURITY.md, "The budget model").
JSON_EXPANSION = 24


class LoadBudget:
    """What one load of one file (a model archive, an ONNX graph) holds, counted as it is read.

    Why: a check per item (each tensor, each folded constant, each JSON member below its own
    cap) lets a file made of many items that each pass exhaust memory together. Every reader
    of the load charges what it really reads or derives (bytes of members, parsed JSON,
    tensors, folded constants, projected activations) *before* allocating it; the charge that
    would take the total past the memory limit raises :class:`MemoryLimitError` naming the
    file, the item, the running total and the limit.
    """

    def __init__(self, what: str, fix: str, limit: int | None = None) -> None:
        self.what, self.fix = what, fix
        self.limit = memory_limit() if limit is None else int(limit)
        self.used = 0

    def charge(self, nbytes: float, item: str) -> None:
        """Count ``nbytes`` more for ``item``; refuse (nothing counted) past the limit."""
        nbytes = max(0, int(nbytes))
        if self.used + nbytes > self.limit:
            raise MemoryLimitError(
                f"{self.what} would need about {format_bytes(self.used + nbytes)} of memory to "
                f"load ({item}: {format_bytes(nbytes)}), more than the limit of "
                f"{format_bytes(self.limit)}; {self.fix} (or raise the limit with "
                f"--memory-limit / {ENV_VAR}, e.g. {ENV_VAR}=64G, if the machine really has "
                "that much).")
        self.used += nbytes

    def charge_json(self, nbytes: int, item: str) -> None:
        """Count the Python objects that parsing ``nbytes`` of JSON text may make."""
        self.charge(JSON_EXPANSION * nbytes, f"{item}, parsed")


#: Largest input one sample may have (16.7 M values, e.g. 4 x 2048 x 2048): the solvers keep
#: several copies of it, so a larger (usually mistyped) shape would exhaust memory.
MAX_INPUT_VALUES = 2**24


def _check_shape(input_shape: Any, what: str = "input_shape") -> tuple[int, ...]:
    if isinstance(input_shape, int):
        input_shape = (input_shape,)
    try:
        shape = tuple(int(s) for s in input_shape)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{what}={input_shape!r}: give the shape of one sample as a tuple of "
                         "positive ints, e.g. (1, 28, 28) or (784,).") from exc
    if not shape or min(shape) < 1:
        raise InputError(f"{what}={input_shape!r}: give the shape of one sample as a tuple of "
                         "positive ints, e.g. (1, 28, 28) or (784,).")
    if math.prod(shape) > MAX_INPUT_VALUES:  # refused before any tensor of that size exists
        raise InputError(f"{what}={shape} is too large: {math.prod(shape):,} values per sample; "
                         f"lbi inverts inputs of at most {MAX_INPUT_VALUES:,} values. Check the "
                         "shape (one sample, no batch dimension, e.g. 1,28,28).")
    return shape


def open_regular(path: str | os.PathLike[str], what: str, max_bytes: int | None = None,
                 error: type[Exception] = InputError) -> IO[bytes]:
    """``path`` opened for binary reading, refused (``error``, one line) unless it is a
    regular file of at most ``max_bytes`` (default: the memory limit).

    The open never blocks (``O_NONBLOCK``: a FIFO opens at once and is then refused) and the
    checks are made on the open descriptor, so what is read is what was checked.
    """
    name = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
        | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(name, flags)
    except FileNotFoundError:
        raise error(f"{what} {name} does not exist; check the path") from None
    except IsADirectoryError:
        raise error(f"{what} {name} is a folder; give the file itself") from None
    except OSError as exc:
        raise error(f"{what} {name} cannot be opened ({exc.strerror or exc}); check the path "
                    "and its permissions") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{what} {name} is a folder; give the file itself")
        if not stat.S_ISREG(st.st_mode):
            kind = ("a pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else
                    "a device" if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) else
                    "a socket" if stat.S_ISSOCK(st.st_mode) else "not a regular file")
            raise error(f"{what} {name} is {kind}, not a regular file; lbi reads only regular "
                        "files (copy the content into one)")
        if name.startswith("/proc/") or name.startswith("/sys/"):
            raise error(f"{what} {name} is a kernel file whose size is not its content; lbi "
                        "reads only regular files (copy the content into one)")
        limit = memory_limit() if max_bytes is None else max_bytes
        if st.st_size > limit:
            raise error(f"{what} {name} is {format_bytes(st.st_size)}, more than the "
                        f"{format_bytes(limit)} lbi reads for it; check that it is the right "
                        "file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], what: str, max_bytes: int | None = None,
                 error: type[Exception] = InputError) -> bytes:
    """The bytes of the regular file ``path`` (see :func:`open_regular`); never more than
    ``max_bytes`` (default: the memory limit), even if the file grows while it is read."""
    limit = memory_limit() if max_bytes is None else max_bytes
    with open_regular(path, what, limit, error) as fh:
        # read(n) allocates n bytes up front: ask for what the file holds, not the limit
        size = os.fstat(fh.fileno()).st_size
        parts = [fh.read(size + 1)]
        total = len(parts[0])
        while size < total <= limit and parts[-1]:  # it grew since fstat: go on in steps
            parts.append(fh.read(min(1 << 20, limit + 1 - total)))
            total += len(parts[-1])
    data = parts[0] if len(parts) == 1 else b"".join(parts)
    if len(data) > limit:
        raise error(f"{what} {os.fspath(path)} grew past {format_bytes(limit)} while it was "
                    "read; check that it is the right file")
    return data


def json_byte_limit() -> int:
    """Largest JSON file (card, run record, scheduler file) lbi parses: 16 MiB, or less under
    a small memory limit, because parsing builds Python objects of up to ~24x the bytes (a
    list of empty objects; SECURITY.md, "The budget model")."""
    return max(64 * 1024, min(16 * 2**20, memory_limit() // 32))


def read_json(path: str | os.PathLike[str], what: str, fix: str,
              error: type[Exception] = InputError) -> Any:
    """The parsed JSON of the regular file ``path`` (at most :func:`json_byte_limit` bytes);
    ``error`` with one line naming ``what``, the problem and ``fix`` otherwise."""
    data = read_regular(path, what, json_byte_limit(), error)
    name = os.fspath(path)
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"{what} {name} is not UTF-8 text (byte {exc.start}); {fix}") from None
    except (ValueError, RecursionError) as exc:  # RecursionError: [[[[... nested too deep
        reason = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise error(f"{what} {name} is not valid JSON ({reason}); {fix}") from None
