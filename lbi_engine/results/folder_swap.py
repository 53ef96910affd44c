"""All-or-nothing writes of a whole result folder (and of a set of files in one folder).

Why: every single file is already written atomically (``lbi_engine.io.atomic_writer``), but a
result is several files. Overwriting them one by one means an export that dies halfway (a
full disk, Ctrl+C, a failing PNG encoder) leaves new images next to the old result.json: a
folder that describes no run at all. So a result folder is built complete in a temporary
sibling and then swapped in:

* ``.NAME.lbi-new-<random suffix>`` (sibling of NAME): the new result while it is being written;
* ``.NAME.lbi-old-<random suffix>``: the previous result for the moment of the swap.

The swap is one atomic ``renameat2(RENAME_EXCHANGE)`` on Linux, so the target is always either
the complete old or the complete new result. Where that call is missing (other systems, some
file systems) it is two renames (old aside, new in); a crash between them leaves no target but
a complete ``lbi-old`` backup, which :func:`recover_folder` (run by every export to the same
target) renames back before anything else happens. Leftover temporary folders are removed
by the next export to the same target. Two exports to the same folder at the same time are
prevented by ``lbi_engine.results.folder_lock`` (the second one is refused at once).

Entries of the old folder that the new result does not write (a user's notes, other runs in
subfolders) are carried into the new folder as hard links (copies where links are refused;
re-created folders keep their owner and mode), and whatever another program creates in the
old folder while the swap runs is moved over before the old folder is removed, so a swap
never deletes anything but the replaced result files. Where the folder cannot be
renamed away (the working directory lies inside it, as with ``lbi invert --out .``; it is a
mount point; its parent is read-only) the files are staged inside it and moved in one by
one, result.json last (removed first), so a result.json on disk still means a complete
result.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import secrets
import shutil
import stat
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from lbi_engine.io import DiskFullError, OutputExistsError, _fsync_dir, disk_full

__all__ = ["NEW_TAG", "OLD_TAG", "STAGE_PREFIX", "leftovers", "recover_folder", "staged_files",
           "staged_folder"]

NEW_TAG = "lbi-new"
OLD_TAG = "lbi-old"
#: staging folder of :func:`staged_files`, inside the target folder
STAGE_PREFIX = ".lbi-stage-"
_RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


#: the file that marks a staging folder as lbi's own: a user's folder of the same name
#: (``.lbi-stage-notes``) is never removed as a stale stage
_STAGE_MARK = ".lbi-stage-mark"
_STAGE_NAME = re.compile(re.escape(STAGE_PREFIX) + r"[0-9a-f]{8}")


def _new_stage(folder: Path) -> Path:
    """A fresh staging folder inside ``folder``, marked as lbi's own."""
    stage = folder / f"{STAGE_PREFIX}{secrets.token_hex(4)}"
    stage.mkdir()
    (stage / _STAGE_MARK).touch()
    return stage


def _remove_stale_stages(folder: Path) -> None:
    """Remove the staging folders that earlier, interrupted writes left in ``folder``: only
    real directories (never a link) of the user, named as lbi names them, holding lbi's mark."""
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    for stale in folder.glob(f"{STAGE_PREFIX}*"):
        try:
            st, mark = os.lstat(stale), os.lstat(stale / _STAGE_MARK)
        except OSError:
            continue
        if (_STAGE_NAME.fullmatch(stale.name) and stat.S_ISDIR(st.st_mode)
                and stat.S_ISREG(mark.st_mode) and uid in (None, st.st_uid)):
            shutil.rmtree(stale, ignore_errors=True)


def _sibling(target: Path, tag: str) -> Path:
    return target.parent / f".{target.name}.{tag}-{secrets.token_hex(4)}"


def leftovers(target: str | os.PathLike[str]) -> list[Path]:
    """Temporary (lbi-new) and backup (lbi-old) folders that exports to ``target`` left.

    Only real directories owned by the user count: the names sit beside ``--out``, often in
    a folder others can write to, and recovery renames a backup into the target. A symlink
    planted under a backup's name (pointing at someone's other folder) would otherwise
    become the output folder, and its files would be overwritten; another user's directory
    is not lbi's to rename or delete either. Such entries are left alone.
    """
    t = Path(target)
    if not t.parent.is_dir():
        return []
    pattern = re.compile(rf"^\.{re.escape(t.name)}\.({NEW_TAG}|{OLD_TAG})-[0-9a-f]{{8}}$")
    return sorted(p for p in t.parent.iterdir() if pattern.match(p.name) and _own_folder(p))


def _own_folder(path: Path) -> bool:
    """Whether ``path`` itself (never a symlink's target) is a directory the user owns."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    owner_ok = not hasattr(os, "geteuid") or st.st_uid == os.geteuid()
    return stat.S_ISDIR(st.st_mode) and owner_ok


def recover_folder(target: str | os.PathLike[str]) -> None:
    """Undo what an interrupted swap left: restore the backup when the target is missing
    (the crash fell between the two renames), then remove every other leftover."""
    t = Path(target)
    found = leftovers(t)
    backups = [p for p in found if f".{OLD_TAG}-" in p.name]
    if backups and not os.path.lexists(t):
        newest = max(backups, key=lambda p: os.lstat(p).st_mtime)
        if _own_folder(newest):  # checked again just before the rename
            os.rename(newest, t)
            found.remove(newest)
    for p in found:
        shutil.rmtree(p, ignore_errors=True)  # refuses a symlink swapped in meanwhile


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2); False where the system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):  # no glibc >= 2.28 (musl, old systems)
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)  # no data copied: the old folder is deleted right after
    except OSError:
        shutil.copy2(src, dst)


def _carry_over(old: Path, new: Path, keep: Callable[[str], bool]) -> None:
    """Bring the old folder's entries that ``keep`` accepts (and the new one lacks) along."""
    for entry in old.iterdir():
        dst = new / entry.name
        if not keep(entry.name) or os.path.lexists(dst):
            continue
        if entry.is_symlink():
            os.symlink(os.readlink(entry), dst)
        elif entry.is_dir():
            shutil.copytree(entry, dst, symlinks=True, copy_function=_link_or_copy)
            _copy_owners(entry, dst)
        else:
            _link_or_copy(str(entry), str(dst))
    with contextlib.suppress(OSError):
        shutil.copymode(old, new)
    _copy_owner(old, new)


def _copy_owner(src: Path, dst: Path) -> None:
    """Give a re-created folder its original owner and group (where the system lets us)."""
    with contextlib.suppress(OSError, AttributeError):
        st = os.stat(src, follow_symlinks=False)
        if (st.st_uid, st.st_gid) != (os.stat(dst).st_uid, os.stat(dst).st_gid):
            os.chown(dst, st.st_uid, st.st_gid, follow_symlinks=False)


def _copy_owners(src: Path, dst: Path) -> None:
    """:func:`_copy_owner` for a copied tree's folders (files are hard links: same inode)."""
    _copy_owner(src, dst)
    for root, dirs, _files in os.walk(src):
        for d in dirs:
            rel = Path(root, d).relative_to(src)
            if not Path(root, d).is_symlink():
                _copy_owner(Path(root, d), dst / rel)


def _rescue(old: Path, new: Path, keep: Callable[[str], bool], top: bool = True) -> None:
    """Move into ``new`` what appeared in ``old`` after it was carried over (another program
    wrote there during the swap), so that removing ``old`` deletes only lbi's own files."""
    for entry in list(old.iterdir()):
        if top and not keep(entry.name):
            continue  # a file of the replaced result
        dst = new / entry.name
        if not os.path.lexists(dst):
            with contextlib.suppress(OSError):
                os.rename(entry, dst)
        elif entry.is_dir() and not entry.is_symlink() and dst.is_dir() \
                and not dst.is_symlink():
            _rescue(entry, dst, keep, top=False)


def _swap_in(staging: Path, target: Path, keep: Callable[[str], bool] = lambda n: True) -> None:
    """Make ``staging`` the ``target`` folder; the old target (if any) is removed, after
    anything in it that lbi did not write has been moved into the new one."""
    if not target.exists():
        os.rename(staging, target)
        _fsync_dir(target.parent)
        return
    backup = _sibling(target, OLD_TAG)
    if _exchange(staging, target):
        os.rename(staging, backup)  # staging now holds the old result: name it as such
    else:
        os.rename(target, backup)
        try:
            os.rename(staging, target)
        except BaseException:
            os.rename(backup, target)
            raise
    _fsync_dir(target.parent)
    _rescue(backup, target, keep)
    shutil.rmtree(backup, ignore_errors=True)


def _swappable(folder: Path) -> bool:
    """Whether ``folder`` (an existing directory) can be renamed away and replaced.

    Not when the working directory is inside it (this process and a user's shell would be
    left in a deleted directory), when it is a mount point (a container volume: rename gives
    EBUSY, and a sibling is on another file system), or when its parent is not writable.
    """
    real = folder.resolve()
    with contextlib.suppress(OSError):
        cwd = Path.cwd().resolve()
        if cwd == real or real in cwd.parents:
            return False
    return not os.path.ismount(real) and os.access(real.parent, os.W_OK | os.X_OK)


def _commit_in_place(staging: Path, target: Path, keep: Callable[[str], bool],
                     last: str | None) -> None:
    """Fallback when the target folder cannot be swapped: replace file by file, with ``last``
    removed first and written last, so that its presence still means "complete"."""
    if last is not None:
        with contextlib.suppress(FileNotFoundError):
            (target / last).unlink()
    staged = sorted(p.name for p in staging.iterdir() if p.name != _STAGE_MARK)
    for name in staged:
        if name != last:
            os.replace(staging / name, target / name)
    for entry in target.iterdir():  # the replaced result's files the new one does not have
        if not keep(entry.name) and entry.name not in staged and entry.is_file():
            entry.unlink()
    if last in staged:
        os.replace(staging / last, target / last)
    _fsync_dir(target)


@contextlib.contextmanager
def staged_folder(target: str | os.PathLike[str],
                  keep: Callable[[str], bool] = lambda name: True,
                  last: str | None = None) -> Iterator[Path]:
    """Yield an empty temporary folder; when the block ends normally it replaces ``target``.

    ``keep(name)`` says which entries of an existing ``target`` the new folder inherits
    (hard links); the result files being replaced must answer False. If the block raises,
    the temporary folder is removed and ``target`` is untouched. A symlink ``target`` keeps
    its link: the folder it points to is the one replaced. Where the folder cannot be
    swapped (see ``_swappable``) the files are staged inside it and moved in one by one;
    ``last`` names the file whose presence means "complete" (result.json) for that case.
    """
    t = Path(target)
    if t.is_symlink():
        t = t.resolve()
    if t.exists() and not t.is_dir():
        raise OutputExistsError(f"{t} is a file, not a folder; give a folder for the results")
    in_place = t.is_dir() and not _swappable(t)
    if in_place:
        _remove_stale_stages(t)
        staging = _new_stage(t)
    else:
        t.parent.mkdir(parents=True, exist_ok=True)
        recover_folder(t)
        staging = _sibling(t, NEW_TAG)
        staging.mkdir()
    try:
        yield staging
        if in_place:
            _commit_in_place(staging, t, keep, last)
            shutil.rmtree(staging, ignore_errors=True)
            return
        if t.is_dir():
            _carry_over(t, staging, keep)
        _swap_in(staging, t, keep)
    except BaseException as exc:
        shutil.rmtree(staging, ignore_errors=True)
        if disk_full(exc):
            where = getattr(exc, "path", None) or getattr(exc, "filename", None) or "a file"
            why = getattr(exc.__cause__ or exc, "strerror", None) or "No space left on device"
            raise DiskFullError(f"{t}: the disk filled while the result was written ({why}: "
                                f"{Path(str(where)).name}); the previous result in {t} is "
                                "intact: free some space and run again, or choose another "
                                "--out", getattr(exc, "path", None)) from exc
        raise


@contextlib.contextmanager
def staged_files(targets: Iterable[str | os.PathLike[str]]) -> Iterator[dict[Path, Path]]:
    """Yield {target: where to write it}; when the block ends normally, every written file
    replaces its target (atomic renames, in the given order); if it raises, none does.

    For a set of files in a folder that also holds other things (the GUI's export into a
    user's folder), where swapping the whole folder is not an option. Only the commit (a few
    renames, no writing) could still be cut by a hard crash; everything slow or fallible
    (rendering, encoding, a full disk) happens before it. Stale staging folders of earlier,
    interrupted exports are removed first.
    """
    order = [Path(t) for t in targets]
    stages: dict[Path, Path] = {}
    for folder in dict.fromkeys(t.parent for t in order):
        _remove_stale_stages(folder)
        stages[folder] = _new_stage(folder)
    try:
        mapping = {t: stages[t.parent] / t.name for t in order}
        yield mapping
        for t, staged in mapping.items():
            if staged.exists():  # a writer may skip a format (no plots to export)
                os.replace(staged, t)
        for folder in stages:
            _fsync_dir(folder)
    finally:
        for stage in stages.values():
            shutil.rmtree(stage, ignore_errors=True)
