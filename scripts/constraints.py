#!/usr/bin/env python3
"""constraints.txt: write it from an environment, compare an environment with it, diff two.

    python scripts/constraints.py check [FILE]        exit 1 if the running interpreter's
                                                      installed versions differ from FILE
    python scripts/constraints.py freeze [HEADER]     print a constraints file for the running
                                                      interpreter's environment (stdout)
    python scripts/constraints.py diff OLD NEW        print the version changes, one per line
    python scripts/constraints.py lowest [EXTRA...]   print ``name==floor`` for every ``>=``
                                                      bound in pyproject.toml's dependencies and
                                                      the named extras (scripts/check-lowest)

Only the standard library: it runs in any venv (``.ci/run`` runs ``check`` in the cached one).
Names compare in PEP 503 form (``PySide6_Essentials`` == ``pyside6-essentials``). The project
itself and the installers (pip, setuptools, wheel) are not pinned: pip upgrades itself in CI
and the project is whatever the checkout holds.
"""

from __future__ import annotations

import importlib.metadata
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

PROJECT = "lbi"
UNPINNED = {PROJECT, "pip", "setuptools", "wheel"}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s;#]+)\s*(?:;.*)?$")


def canonical(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(text: str) -> dict[str, tuple[str, str]]:
    """``{canonical name: (name as written, version)}`` of every ``name==version`` line."""
    pins: dict[str, tuple[str, str]] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if match is None:
            raise ValueError(f"line {number}: {raw!r} is not 'name==version'")
        pins[canonical(match[1])] = (match[1], match[2])
    return pins


def installed() -> dict[str, tuple[str, str]]:
    """The running interpreter's distributions, first on sys.path wins (as for imports)."""
    found: dict[str, tuple[str, str]] = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), (name, dist.version))
    return found


def differences(pins: Mapping[str, tuple[str, str]],
                env: Mapping[str, tuple[str, str]]) -> list[str]:
    """One line per package whose installed version is not the pinned one (or is missing,
    or is installed without a pin)."""
    out = []
    for key in sorted(set(pins) | set(env)):
        if key in UNPINNED:
            continue
        if key not in env:
            out.append(f"{pins[key][0]}: pinned {pins[key][1]}, not installed")
        elif key not in pins:
            out.append(f"{env[key][0]}: installed {env[key][1]}, not in constraints")
        elif pins[key][1] != env[key][1]:
            out.append(f"{pins[key][0]}: pinned {pins[key][1]}, installed {env[key][1]}")
    return out


def render(env: Mapping[str, tuple[str, str]], header: Iterable[str]) -> str:
    lines = [f"# {h}".rstrip() for h in header]
    pins = sorted((name, version) for key, (name, version) in env.items() if key not in UNPINNED)
    lines += [f"{name}=={version}" for name, version in sorted(pins, key=lambda p: p[0].lower())]
    return "\n".join(lines) + "\n"


def version_changes(old: Mapping[str, tuple[str, str]],
                    new: Mapping[str, tuple[str, str]]) -> list[str]:
    out = []
    for key in sorted(set(old) | set(new)):
        if key not in new:
            out.append(f"- {old[key][0]} {old[key][1]}")
        elif key not in old:
            out.append(f"+ {new[key][0]} {new[key][1]}")
        elif old[key][1] != new[key][1]:
            out.append(f"  {new[key][0]} {old[key][1]} -> {new[key][1]}")
    return out


def lowest(pyproject: Path, extras: Iterable[str]) -> list[str]:
    """``name==floor`` for each requirement with a ``>=`` bound (markers and extras dropped:
    a constraint names a distribution and a version only)."""
    import tomllib

    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    floors: dict[str, str] = {}
    for requirement in requirements:
        spec = requirement.split(";", 1)[0]
        name = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec)
        floor = re.search(r">=\s*([^,\s]+)", spec)
        if name is None or floor is None:
            continue
        key = canonical(name[1])
        if key in floors and floors[key] != floor[1]:  # the stricter (later) floor holds
            floor_pair = sorted([floors[key], floor[1]], key=_version_key)
            floors[key] = floor_pair[-1]
        else:
            floors[key] = floor[1]
    return [f"{name}=={version}" for name, version in sorted(floors.items())]


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def main(argv: list[str]) -> int:
    command = argv[0] if argv else ""
    if command == "check" and len(argv) <= 2:
        path = Path(argv[1] if len(argv) == 2 else "constraints.txt")
        problems = differences(parse(path.read_text(encoding="utf-8")), installed())
        if problems:
            print(f"ERROR: the environment of {sys.executable} differs from {path}:",
                  *(f"  {p}" for p in problems), sep="\n", file=sys.stderr)
            print(f"Install with `pip install -c {path} ...`, or if the new versions are "
                  "intended, re-resolve with scripts/update-constraints.", file=sys.stderr)
            return 1
        print(f"environment matches {path} ({len(parse(path.read_text()))} pins)")
        return 0
    if command == "freeze" and len(argv) <= 2:
        header = argv[1].splitlines() if len(argv) == 2 else []
        sys.stdout.write(render(installed(), header))
        return 0
    if command == "diff" and len(argv) == 3:
        old, new = (parse(Path(p).read_text(encoding="utf-8")) for p in argv[1:])
        changes = version_changes(old, new)
        print("\n".join(changes) if changes else "no version changes")
        return 0
    if command == "lowest":
        print("\n".join(lowest(Path(__file__).resolve().parent.parent / "pyproject.toml",
                               argv[1:])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
