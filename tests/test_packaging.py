"""Checks on the release plumbing: desktop entry, icons, CI script, entry points, py.typed and
the pre-commit hooks.

These guard the files no unit test of the engine or GUI would notice breaking: a desktop
entry whose Exec/Icon do not match what pip installs, icons of the wrong size, a CI script
that drifted from the README's test command, and the PySide6 6.12.0 exclusion.
"""

from __future__ import annotations

import ast
import configparser
import importlib.util
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ICONS = ROOT / "resources" / "icons"
DESKTOP = ROOT / "packaging" / "lbi.desktop"
CI_RUN = ROOT / ".ci" / "run"


def _pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _desktop_entry() -> configparser.SectionProxy:
    # Keys are case-sensitive and values contain '%', so: no lowercasing, no interpolation.
    parser = configparser.ConfigParser(interpolation=None, strict=True)
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    parser.read_string(DESKTOP.read_text(encoding="utf-8"), source=str(DESKTOP))
    assert parser.sections()[0] == "Desktop Entry", "the first group must be [Desktop Entry]"
    return parser["Desktop Entry"]


# --- desktop entry ------------------------------------------------------------------------

def test_desktop_entry_has_required_keys() -> None:
    entry = _desktop_entry()
    assert entry["Type"] == "Application"
    assert entry["Name"] == "lbi"
    for key in ("GenericName", "Comment", "Exec", "Icon", "Categories"):
        assert entry.get(key, "").strip(), f"{key}= is missing or empty"
    assert entry["Terminal"] == "false"
    categories = entry["Categories"]
    assert categories.endswith(";"), "list values in a desktop entry end with ';'"
    assert {"Science", "Education", "Graphics"} <= set(filter(None, categories.split(";")))
    assert entry["MimeType"].endswith(";")


def test_desktop_entry_exec_matches_gui_script_and_icon_files() -> None:
    entry = _desktop_entry()
    exec_tokens = entry["Exec"].split()
    gui_scripts = _pyproject()["project"]["gui-scripts"]
    assert exec_tokens[0] in gui_scripts, (
        f"Exec= starts {exec_tokens[0]!r}, which pip does not install; "
        f"gui-scripts are {sorted(gui_scripts)}"
    )
    assert entry["TryExec"] == exec_tokens[0]
    # Only the field codes the spec defines may follow; at most one file/URL code.
    codes = [t for t in exec_tokens[1:] if t.startswith("%")]
    assert set(codes) <= {"%f", "%F", "%u", "%U", "%i", "%c", "%k"}
    assert len([c for c in codes if c.lower() in {"%f", "%u"}]) <= 1
    # Icon= is a theme name (no path, no extension) whose files we ship.
    icon = entry["Icon"]
    assert "/" not in icon and "." not in icon
    assert (ICONS / f"{icon}.svg").is_file() and (ICONS / f"{icon}.png").is_file()


def test_install_script_installs_every_icon_size_we_render() -> None:
    script = (ROOT / "packaging" / "install-desktop-entry.sh").read_text(encoding="utf-8")
    sizes = re.search(r'^sizes="([\d ]+)"', script, re.M)
    assert sizes, "install-desktop-entry.sh must list the icon sizes in sizes=\"...\""
    for s in map(int, sizes.group(1).split()):
        name = "lbi.png" if s == 256 else f"lbi-{s}.png"
        assert (ICONS / name).is_file(), f"{name} missing: run packaging/render_icons.py"


# --- icons --------------------------------------------------------------------------------

@pytest.mark.parametrize("name, size", [("lbi.png", 256), ("lbi-64.png", 64), ("lbi-32.png", 32)])
def test_icon_png_size_and_transparency(name: str, size: int) -> None:
    from PIL import Image

    with Image.open(ICONS / name) as img:
        assert img.format == "PNG"
        assert img.size == (size, size)
        rgba = img.convert("RGBA")
    # Rounded-square icon: the corner pixel is transparent, the centre opaque.
    assert rgba.getpixel((0, 0))[3] == 0
    assert rgba.getpixel((size // 2, size // 2))[3] == 255


def test_svg_is_square_256() -> None:
    import xml.etree.ElementTree as ET

    root = ET.parse(ICONS / "lbi.svg").getroot()
    assert root.tag.endswith("svg")
    assert root.get("viewBox") == "0 0 256 256"


def test_committed_pngs_match_the_svg(qapp, tmp_path: Path) -> None:
    """The PNGs were rendered from the current SVG (re-run render_icons.py after edits)."""
    import numpy as np
    from PIL import Image

    # Loaded by path: the folder is called "packaging" and must not shadow the library.
    spec = importlib.util.spec_from_file_location(
        "lbi_render_icons", ROOT / "packaging" / "render_icons.py"
    )
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    fresh = tmp_path / "lbi-64.png"
    mod.render(ICONS / "lbi.svg", 64, fresh)
    a = np.asarray(Image.open(fresh).convert("RGBA"), dtype=np.int16)
    b = np.asarray(Image.open(ICONS / "lbi-64.png").convert("RGBA"), dtype=np.int16)
    assert a.shape == b.shape == (64, 64, 4)
    # Identical renderer and input: only version-to-version antialiasing noise is allowed.
    assert np.abs(a - b).mean() < 1.0, "lbi-64.png is stale: run packaging/render_icons.py"


# --- CI script ----------------------------------------------------------------------------

def _readme_test_command() -> str:
    readme = ROOT / "README.md"
    assert readme.is_file(), (
        "README.md is missing: it must have a '## Test' section whose first fenced code line "
        "is the command .ci/run runs verbatim"
    )
    text = readme.read_text(encoding="utf-8")
    section = re.search(r"^## Test\b.*?$(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert section, "README.md has no '## Test' section"
    fence = re.search(r"^```[^\n]*\n(.*?)^```", section.group(1), re.M | re.S)
    assert fence, "the README '## Test' section has no fenced code block"
    lines = [ln.strip() for ln in fence.group(1).splitlines() if ln.strip()]
    assert lines, "the README '## Test' code block is empty"
    return lines[0]


def test_ci_runs_readme_test_command_verbatim() -> None:
    command = _readme_test_command()
    ci_lines = CI_RUN.read_text(encoding="utf-8").splitlines()
    matches = [ln for ln in ci_lines if command in ln and not ln.lstrip().startswith("#")]
    assert len(matches) == 1, f".ci/run must run the README test command once: {command!r}"


def test_ci_script_is_strict_bash() -> None:
    text = CI_RUN.read_text(encoding="utf-8")
    assert text.startswith("#!/usr/bin/env bash")
    assert "set -euo pipefail" in text
    assert "QT_QPA_PLATFORM=offscreen" in text
    assert ".complete" in text and "sha256sum pyproject.toml" in text
    assert "pip install --no-deps -e ." in text


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
@pytest.mark.parametrize(
    "script",
    [".ci/run", "packaging/build.sh", "packaging/smoke_test.sh",
     "packaging/install-desktop-entry.sh"],
)
def test_shell_scripts_parse(script: str) -> None:
    path = ROOT / script
    assert path.is_file(), f"{script} is missing"
    res = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr


def test_pyinstaller_spec_parses_and_bundles_resources() -> None:
    text = (ROOT / "packaging" / "lbi.spec").read_text(encoding="utf-8")
    ast.parse(text)
    assert '"resources"' in text, "the bundle must carry resources/ (models, data, icons)"
    for launcher in ("lbi_gui_launcher.py", "lbi_cli_launcher.py"):
        assert launcher in text, f"lbi.spec does not build {launcher}"


@pytest.mark.parametrize(
    "launcher, table, script",
    [("lbi_gui_launcher.py", "gui-scripts", "lbi-gui"), ("lbi_cli_launcher.py", "scripts", "lbi")],
)
def test_bundle_launchers_call_the_pip_entry_points(launcher: str, table: str, script: str) -> None:
    """The frozen programs start exactly where the pip-installed scripts start."""
    tree = ast.parse((ROOT / "packaging" / launcher).read_text(encoding="utf-8"))
    imported = {
        f"{node.module}:{alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert _pyproject()["project"][table][script] in imported


def test_bundle_outputs_are_ignored_by_git() -> None:
    ignored = {ln.strip() for ln in (ROOT / ".gitignore").read_text().splitlines()}
    assert {"build/", "dist/"} <= ignored


# --- pyproject ----------------------------------------------------------------------------

def test_entry_points_declared_and_present() -> None:
    project = _pyproject()["project"]
    assert project["scripts"]["lbi"] == "lbi_engine.cli:main"
    assert project["gui-scripts"]["lbi-gui"] == "lbi_gui.app:main"
    for target in (project["scripts"]["lbi"], project["gui-scripts"]["lbi-gui"]):
        module = target.split(":")[0]
        base = ROOT / Path(*module.split("."))
        assert base.with_suffix(".py").is_file() or (base / "__init__.py").is_file(), (
            f"entry point {target} names module {module}, which does not exist under {ROOT}"
        )


def test_engine_ships_its_type_information() -> None:
    """PEP 561: without py.typed in the wheel a user's mypy ignores lbi_engine's annotations
    (.ci/run checks the installed wheel has it)."""
    assert (ROOT / "lbi_engine" / "py.typed").is_file()
    assert "py.typed" in _pyproject()["tool"]["setuptools"]["package-data"]["lbi_engine"]


def test_pre_commit_runs_the_suites_static_checks_with_the_projects_tools() -> None:
    import yaml

    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    hooks = {hook["id"]: hook for repo in config["repos"] for hook in repo["hooks"]}
    assert {"ruff", "import-linter", "mypy"} <= set(hooks)
    test_extra = " ".join(_pyproject()["project"]["optional-dependencies"]["test"])
    for name, hook in hooks.items():
        assert hook["language"] == "system" and hook["entry"].startswith(".venv/bin/"), name
        assert name in test_extra, f"hook {name} runs a tool the test extra does not install"
    # import-linter and mypy check the whole package (their configs name it), not one file
    assert hooks["import-linter"]["pass_filenames"] is False
    assert hooks["mypy"]["pass_filenames"] is False


def test_pyside6_612_excluded() -> None:
    from packaging.requirements import Requirement

    reqs = [Requirement(r) for r in _pyproject()["project"]["dependencies"]]
    pyside = [r for r in reqs if r.name.lower().startswith("pyside6")]
    assert pyside, "PySide6(-Essentials) is not a dependency"
    for r in pyside:
        assert not r.specifier.contains("6.12.0"), f"{r} allows the broken PySide6 6.12.0"
        assert r.specifier.contains("6.11.3"), f"{r} excludes the known-good 6.11.3"
