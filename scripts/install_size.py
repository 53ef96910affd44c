#!/usr/bin/env python3
"""Disk size of lbi's installed dependency closure, per extra (docs/install.md quotes it).

    python scripts/install_size.py        run with the venv's python, after pip install

Sums the files each distribution's RECORD lists, for lbi and everything it requires
(recursively, markers evaluated for this machine). A CPU-only torch has no nvidia-*, cuda-*
or triton packages and a smaller wheel of its own, so the closure without them is an upper
bound for a CPU-only install. Only the standard library and ``packaging``.
"""

from __future__ import annotations

import importlib.metadata as md
import re

from packaging.requirements import Requirement

EXTRAS = ([], ["export"], ["cluster"], ["docs"], ["test"])


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


DISTS: dict[str, md.Distribution] = {}
for _dist in md.distributions():  # the first on sys.path wins, as for imports
    if _dist.metadata["Name"]:
        DISTS.setdefault(canonical(_dist.metadata["Name"]), _dist)


def closure(root: str, extras: list[str]) -> set[str]:
    seen: set[tuple[str, tuple[str, ...]]] = set()
    todo = [(root, tuple(extras))]
    while todo:
        name, wanted = todo.pop()
        key = canonical(name)
        if key not in DISTS or (key, wanted) in seen:
            continue
        seen.add((key, wanted))
        for text in DISTS[key].requires or []:
            req = Requirement(text)
            if any(req.marker is None or req.marker.evaluate({"extra": e})
                   for e in (wanted or ("",))):
                todo.append((req.name, tuple(sorted(req.extras))))
    return {key for key, _ in seen}


def size(keys: set[str]) -> int:
    total = 0
    for key in keys:
        for file in DISTS[key].files or []:
            try:
                total += file.locate().stat().st_size
            except OSError:
                pass
    return total


def _is_cuda(key: str) -> bool:
    return key.startswith(("nvidia-", "cuda-")) or key == "triton"


def main() -> None:
    for extras in EXTRAS:
        keys = closure("lbi", extras)
        label = f"lbi[{','.join(extras)}]" if extras else "lbi"
        cpu = {k for k in keys if not _is_cuda(k)}
        print(f"{label:14s} {len(keys):3d} packages {size(keys) / 1e9:5.2f} GB;"
              f" without the CUDA packages at most {size(cpu) / 1e9:5.2f} GB")


if __name__ == "__main__":
    main()
