"""The extras are named by what they give, and the test extra holds them all, pinned."""

from __future__ import annotations

import re
import tomllib

from packaging.requirements import Requirement

from tests.docs import _blocks


def _extras() -> dict[str, list[Requirement]]:
    project = tomllib.loads((_blocks.ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return {name: [Requirement(r) for r in reqs]
            for name, reqs in project["project"]["optional-dependencies"].items()}


def _pins() -> dict[str, str]:
    pins = {}
    for line in (_blocks.ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[re.sub(r"[-_.]+", "-", name).lower()] = version.strip()
    return pins


def test_export_and_docs_extras_give_what_their_names_say() -> None:
    extras = _extras()
    assert [r.name for r in extras["export"]] == ["onnxscript"]
    assert {r.name.lower() for r in extras["docs"]} == {"sphinx", "myst-parser"}


def test_the_test_extra_includes_export_cluster_and_docs_at_pinned_versions() -> None:
    extras, pins = _extras(), _pins()
    in_test = {str(r) for r in extras["test"]}
    for name in ("export", "cluster", "docs"):
        for req in extras[name]:
            assert str(req) in in_test, (name, str(req))
            key = req.name.lower().replace("_", "-")
            assert key in pins, f"{req.name} is not pinned in constraints.txt"
            assert req.specifier.contains(pins[key]), (str(req), pins[key])
