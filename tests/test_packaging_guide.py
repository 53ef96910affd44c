"""Help → User guide works from an installed wheel, not only from a checkout (issue #20).

setup.py copies docs/USER_GUIDE.md into the package ``lbi_resources`` (as docs/USER_GUIDE.md)
when it builds; :func:`lbi_gui.dialogs.user_guide.guide_path` finds it there. The wheel is
built from the tracked files (as a clean clone has them), unpacked outside the checkout and
asked for its guide in a fresh interpreter.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "USER_GUIDE.md"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is needed to list the tracked files")
    tmp = tmp_path_factory.mktemp("guide-wheel")
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.splitlines()
    src = tmp / "src"
    for name in files:
        if (ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, src / name)
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                           "--no-build-isolation", "-w", str(tmp / "dist"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return next((tmp / "dist").glob("lbi-*.whl"))


def test_the_wheel_carries_the_user_guide(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        shipped = zf.read("lbi_resources/docs/USER_GUIDE.md")
    assert shipped == GUIDE.read_bytes()


def test_an_installed_wheel_finds_its_guide(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
    code = ("import lbi_gui.dialogs.user_guide as g; print(g.__file__); "
            "print(g.guide_path())")
    env = {**os.environ, "PYTHONPATH": str(site), "QT_QPA_PLATFORM": "offscreen"}
    env.pop("LBI_RESOURCES", None)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    module, guide = out.stdout.strip().splitlines()[-2:]
    assert Path(module).is_relative_to(site)  # the installed code, not the checkout's
    assert Path(guide) == site / "lbi_resources" / "docs" / "USER_GUIDE.md"
    assert Path(guide).read_bytes() == GUIDE.read_bytes()


def test_sdists_carry_the_guide_for_the_wheels_built_from_them() -> None:
    lines = (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines()
    assert "include docs/USER_GUIDE.md" in lines
