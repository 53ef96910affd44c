"""Every tutorial runs as written: its python and bash blocks, in order, in an empty folder."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs import _blocks

TUTORIALS = _blocks.ROOT / "docs" / "tutorials"
PAGES = sorted(p.stem for p in TUTORIALS.glob("*.md"))


def _own_network_quick(args: list[str]) -> list[str]:
    """The random stand-in encoder never fits the noise, so its alpha search and final solve
    would run for minutes; 20 iterations per solve still write every file the page reads."""
    return [*args, "--max-iter", "20"] if args[:2] == ["lbi", "invert"] else args


QUICK = {"own-network": _own_network_quick}


def test_the_tutorials_are_the_ones_the_index_lists() -> None:
    index = (_blocks.ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    assert PAGES == sorted(re.findall(r"^tutorials/([\w-]+)$", index, re.M))
    assert {"window", "cli", "python", "own-network", "cluster"} <= set(PAGES)


@pytest.mark.parametrize("page", PAGES)
def test_tutorial_runs(page: str, tmp_path: Path) -> None:
    if page in ("own-network",):
        pytest.importorskip("onnxscript")  # the page's export needs it (the export extra)
    if page == "cluster":
        pytest.importorskip("distributed")  # the cluster extra
    text = (TUTORIALS / f"{page}.md").read_text(encoding="utf-8")
    quick = QUICK.get(page, lambda args: args)
    out = _blocks.run(_blocks.script(text, quick), tmp_path)
    checks = {
        "window": lambda: out.count("lbi-gui arguments valid") == 3,
        "cli": lambda: (tmp_path / "runs/grid/results.csv").is_file()
        and len(re.findall(r"^runs/digit3\S* .* PSNR [\d.]+ dB", out, re.M)) == 3,
        "python": lambda: re.search(r"^(tv|tv\+box) +alpha .* PSNR [\d.]+ dB$", out, re.M)
        and "tolerance" in out,
        # lbi's lifted forward equals the module's (float32)
        "own-network": lambda: float(re.findall(r"max \|difference\| (\S+)", out)[0]) < 1e-5
        and (tmp_path / "runs/measured/reconstruction.png").is_file()
        and (tmp_path / "mymodels/encoder.json").is_file(),
        "cluster": lambda: re.search(r"^4 rows; columns include \['worker', 'cell_seconds'\]",
                                     out, re.M),
    }
    assert checks[page](), out[-3000:]
