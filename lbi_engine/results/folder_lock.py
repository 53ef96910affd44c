"""One writer per output folder, and an output folder that is checked before the work starts.

Why a lock: two runs writing to the same ``--out`` would each swap in their own result, and
both exit 0 while only one result (or a mix) survives. The lock is an advisory ``flock`` on a
sibling file ``.NAME.lbi-lock`` (not inside the folder, because the folder itself is renamed
when a result is swapped in); it holds the holder's pid, host, command and start time, so a
second run can say who has it. The kernel drops the lock when its holder dies, so a killed
run never leaves the folder locked; the lock file of a finished run is removed.

Why so careful with that file: it sits beside ``--out``, often in a folder other people can
write to, and lbi truncates, writes and deletes it. A symlink (or a hard link) planted under
its name would make lbi overwrite whatever file it points to, and a dangling symlink would
create its target. So the lock is opened with ``O_NOFOLLOW`` (a symlink is never followed,
dangling or not), ``O_NONBLOCK`` (a FIFO never blocks the open) and ``O_CLOEXEC``, and what
was opened must be a regular file with one link, owned by the user; anything else is
refused with one line before a byte is written. It is removed only if the name still names
the file lbi holds.

Why a check up front: an unwritable folder (or a path such as ``sub/inner/..``) used to be
found only after a long solve. :func:`prepare_output_folder` normalises the path and proves
that it can be written by creating (and removing) a probe file, before anything is computed.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from lbi_engine.errors import LbiError

__all__ = ["FolderLockedError", "OutputFolderError", "lock_path", "output_folder_lock",
           "prepare_output_folder"]

LOCK_SUFFIX = ".lbi-lock"
_HELD: dict[str, int] = {}  # lock path -> depth, for re-entrant use within one process
_HELD_GUARD = threading.Lock()


class FolderLockedError(LbiError):
    """Another lbi process is writing to the same output folder."""


class OutputFolderError(LbiError):
    """The output folder cannot be created or written."""


def prepare_output_folder(out: str | os.PathLike[str], flag: str = "--out") -> Path:
    """The absolute, normalised folder path, after proving it can be written.

    ``sub/inner/..`` becomes ``sub``; a file where the folder should be, a read-only place or
    a missing permission raises OutputFolderError naming the path and the fix. Nothing is
    created except missing parent folders' probe (removed again).
    """
    raw = os.fspath(out)
    if not raw.strip():
        raise OutputFolderError(f"{flag} is empty; give a folder for the results")
    target = Path(os.path.realpath(os.path.expanduser(raw)))
    if target.exists() and not target.is_dir():
        raise OutputFolderError(f"{flag} {raw}: {target} is a file, not a folder; give a folder "
                                "for the results")
    probe_dir = target
    while not probe_dir.exists():  # nearest existing ancestor: where folders will be created
        probe_dir = probe_dir.parent
    if not probe_dir.is_dir():
        raise OutputFolderError(f"{flag} {raw}: {probe_dir} is a file, so the folder {target} "
                                "cannot be created; choose another path")
    try:
        with tempfile.TemporaryFile(dir=probe_dir, prefix=".lbi-probe-"):
            pass
    except OSError as exc:
        raise OutputFolderError(f"{flag} {raw}: cannot write in {probe_dir} "
                                f"({exc.strerror or exc}); choose a folder you can write to or "
                                "fix its permissions") from exc
    return target


def lock_path(target: Path) -> Path:
    return target.parent / f".{target.name}{LOCK_SUFFIX}"


def _describe(fd: int) -> str:
    try:  # from the descriptor already checked, and at most 4 KiB: never a planted path
        info = json.loads(os.pread(fd, 4096, 0).decode("utf-8"))
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info["started"])))
        return (f"lbi process {int(info['pid'])} on {info['host']} (started {started}: "
                f"{info['command']})")
    except (OSError, ValueError, KeyError, TypeError):
        return "another lbi process"


@contextlib.contextmanager
def output_folder_lock(target: str | os.PathLike[str], flag: str = "--out") -> Iterator[Path]:
    """Hold the lock of output folder ``target`` for the block; FolderLockedError at once if
    another process holds it. Re-entrant within one process (the CLI locks for the whole run,
    the export inside it locks again)."""
    t = Path(os.path.realpath(os.fspath(target)))
    path = lock_path(t)
    key = str(path)
    with _HELD_GUARD:
        if key in _HELD:
            _HELD[key] += 1
            reentrant = True
        else:
            reentrant = False
    if reentrant:
        try:
            yield t
        finally:
            with _HELD_GUARD:
                _HELD[key] -= 1
        return
    try:
        import fcntl
    except ImportError:  # Windows: no flock; the folder swap still keeps results whole
        yield t
        return
    t.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = _open_lock_file(path, flag, target)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _describe(fd)
            os.close(fd)
            raise FolderLockedError(
                f"{flag} {target}: the folder is being written by {holder}; wait "
                f"until it finishes or choose another folder (if no lbi runs, remove {path})"
            ) from None
        # the file may have been removed by its previous holder between open and flock
        if _names_file(path, fd):
            break
        os.close(fd)
    try:
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                "command": " ".join(os.path.basename(a) if i == 0 else a
                                    for i, a in enumerate(sys.argv))[:300]}
        os.ftruncate(fd, 0)
        os.write(fd, json.dumps(info).encode())
        with _HELD_GUARD:
            _HELD[key] = 1
        yield t
    finally:
        with _HELD_GUARD:
            _HELD.pop(key, None)
        with contextlib.suppress(OSError):
            if _names_file(path, fd):  # never whatever was renamed onto the name meanwhile
                os.unlink(path)  # while still holding it: a waiting run then locks a fresh file
        os.close(fd)


def _names_file(path: Path, fd: int) -> bool:
    """Whether ``path`` itself (not a symlink's target) is the file open as ``fd``."""
    try:
        st, held = os.lstat(path), os.fstat(fd)
    except FileNotFoundError:
        return False
    return (st.st_ino, st.st_dev) == (held.st_ino, held.st_dev)


def _open_lock_file(path: Path, flag: str, target: object) -> int:
    """Open (or create) the lock file without following a symlink, blocking on a FIFO or
    accepting anything but the user's own regular, singly linked file: OutputFolderError."""
    flags = (os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
             | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0))
    fix = ("lbi writes and removes that file, so it must be lbi's own; if you did not put "
           "it there, someone else may have: check it, remove it, or choose another folder")
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as exc:
        if os.path.islink(path):
            raise OutputFolderError(f"{flag} {target}: the lock file {path} is a symbolic "
                                    f"link; {fix}") from None
        raise OutputFolderError(f"{flag} {target}: cannot open the lock file {path} "
                                f"({exc.strerror or exc}); {fix}") from None
    try:
        st = os.fstat(fd)
        problem = (None if stat.S_ISREG(st.st_mode) else "is not a regular file")
        if problem is None and hasattr(os, "geteuid") and st.st_uid != os.geteuid():
            problem = f"belongs to another user (uid {st.st_uid})"
        if problem is None and st.st_nlink != 1:
            problem = "has other hard links to it"
    except OSError as exc:
        problem = f"cannot be checked ({exc.strerror or exc})"
    if problem is not None:
        os.close(fd)
        raise OutputFolderError(f"{flag} {target}: the lock file {path} {problem}; {fix}")
    return fd
