"""Atomic file writes (safe loading of model files: :mod:`lbi_engine.models.model_files`).

Why atomic: a crash, a full disk or a cancelled export must never leave a half-written file
where a good one used to be. Every write goes to a temporary file in the same directory, is
flushed and fsync'ed, and then renamed over the target with ``os.replace`` (atomic on POSIX
and Windows). If anything raises before the rename, the temporary file is removed and the old
file stays untouched.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from lbi_engine.errors import LbiError

if TYPE_CHECKING:  # only for annotations
    import numpy as np

__all__ = [
    "DiskFullError",
    "OutputExistsError",
    "atomic_writer",
    "atomic_write_bytes",
    "atomic_write_text",
    "atomic_save_npy",
    "safe_output_path",
]


class OutputExistsError(LbiError, FileExistsError):
    """The output file exists and the caller did not ask to overwrite it."""


class DiskFullError(LbiError, OSError):
    """The disk (or the user's quota) filled while a file was written; what it replaces is
    intact. ``path``: the file that could not be written."""

    def __init__(self, message: str, path: Path | None = None) -> None:
        super().__init__(message)
        self.path = path


def disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk or the quota is full."""
    import errno

    return isinstance(exc, DiskFullError) or (
        isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT))


# ---------------------------------------------------------------------------------------------
# atomic writes


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], mode: str = "wb",
                  encoding: str = "utf-8") -> Iterator[IO[Any]]:
    """Open a temporary file next to ``path``; on normal exit it atomically replaces ``path``.

    ``mode`` is ``"wb"`` or ``"w"`` (text, ``encoding``). On an exception inside the ``with``
    block the temporary file is deleted, ``path`` keeps its previous content, and the
    exception propagates. The temporary file lives in the target directory because
    ``os.replace`` is only atomic within one file system.
    """
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_writer mode must be 'w' or 'wb', not {mode!r}")
    target = Path(path)
    if not target.parent.is_dir():
        raise OSError(f"cannot write {target}: directory {target.parent} does not exist; "
                      "create it first")
    tmp = target.parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
    # os.open with 0o666 lets the process umask decide the permissions, like a plain open();
    # tempfile.mkstemp would leave the final file at 0600.
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        fh: IO[Any] = os.fdopen(fd, "w", encoding=encoding) if mode == "w" else os.fdopen(fd, "wb")
        with fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        if target.exists():  # keep the permissions of the file being replaced
            with contextlib.suppress(OSError):
                os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        if disk_full(exc) and not isinstance(exc, DiskFullError):
            raise DiskFullError(f"cannot write {target}: the disk is full ({exc}); "
                                f"{target.name} keeps its previous content (nothing was "
                                "replaced): free some space, or write elsewhere",
                                target) from exc
        raise
    _fsync_dir(target.parent)


def _fsync_dir(directory: Path) -> None:
    """Persist the rename itself (POSIX); silently skipped where directories cannot be opened."""
    with contextlib.suppress(OSError, AttributeError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path, "wb") as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically (see :func:`atomic_writer`)."""
    with atomic_writer(path, "w", encoding=encoding) as fh:
        fh.write(text)


def atomic_save_npy(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """``np.save`` without pickles, atomically; ``path`` is used exactly as given."""
    import numpy as np

    with atomic_writer(path, "wb") as fh:
        np.save(fh, np.asarray(array), allow_pickle=False)


def safe_output_path(path: str | os.PathLike[str], overwrite: bool) -> Path:
    """Return ``path`` as a Path, refusing to clobber an existing file unless ``overwrite``."""
    p = Path(path)
    if p.exists() and not overwrite:
        raise OutputExistsError(
            f"{p} already exists; choose another output name or allow overwriting "
            "(CLI: --overwrite)")
    if p.is_dir():
        raise OutputExistsError(f"{p} is a directory, not a file; give a file name")
    return p


# ---------------------------------------------------------------------------------------------
# model file formats

# Globals a plain tensor/state-dict pickle references; anything else (an nn.Module class,
# builtins.open, os.system, ...) means the file is a pickled program.
