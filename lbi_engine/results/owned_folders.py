"""Folders that a command makes under ``--out``: real folders of the user, never a link.

``--out`` itself is normalised once (:func:`lbi_engine.results.folder_lock.prepare_output_folder`),
but a command may derive more folders below it (``lbi reproduce all`` writes one per
experiment). Someone who can write into ``--out`` (a shared scratch folder, a result copied
from elsewhere) could plant a symbolic link under such a name, and every file of that part
would land in the link's target. So each derived folder is created with ``mkdir`` (which
never follows a link), then checked with ``lstat`` (never a link's target): it must be a
real directory owned by the user. Anything else is refused with one line before a byte is
written into it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from lbi_engine.results.folder_lock import OutputFolderError

__all__ = ["derived_folder", "owned_folder"]


def owned_folder(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """``path`` as a real folder owned by the user, created if missing (its parents too).

    A symbolic link (dangling or not), a file or another user's folder at ``path`` raises
    OutputFolderError naming the path and what to do.
    """
    p = Path(path)
    if not p.parent.is_dir():
        p.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.mkdir(p)
    except FileExistsError:
        pass
    except OSError as exc:
        raise OutputFolderError(f"{flag}: cannot create the folder {p} "
                                f"({exc.strerror or exc}); choose a folder you can write to") \
            from None
    st = os.lstat(p)
    fix = ("lbi writes its files into that folder; if you did not put it there, someone else "
           "may have: check it, remove it, or choose another --out")
    if stat.S_ISLNK(st.st_mode):
        raise OutputFolderError(f"{flag}: {p} is a symbolic link to {os.readlink(p)!r}, not a "
                                f"folder; {fix}")
    if not stat.S_ISDIR(st.st_mode):
        raise OutputFolderError(f"{flag}: {p} exists and is not a folder; {fix}")
    if hasattr(os, "geteuid") and st.st_uid != os.geteuid():
        raise OutputFolderError(f"{flag}: the folder {p} belongs to another user "
                                f"(uid {st.st_uid}); {fix}")
    return p


def derived_folder(base: str | os.PathLike[str], name: str, flag: str = "--out") -> Path:
    """The folder ``base/name`` that a command derives under ``--out``, as :func:`owned_folder`.

    ``name`` is one path component chosen by lbi (an experiment's name), never a path."""
    if name in ("", ".", "..") or "/" in name or (os.sep in name) or (os.altsep or "/") in name:
        raise ValueError(f"derived folder name {name!r} must be one path component")
    return owned_folder(Path(base) / name, flag)
