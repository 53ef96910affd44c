"""The README is a front door: short, no benchmark figures, and every command in it runs.

The two set-up commands (install + app, install + tests) cannot run inside the suite (they
make a venv and download GBs); they are checked against each other, pyproject.toml and
.ci/run, which runs the test command verbatim (tests/test_packaging.py). Every other block
runs here, in the README's order, in an empty folder (tests/docs/_blocks.py).
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import pytest

from tests.docs import _blocks

ROOT = _blocks.ROOT
README = ROOT / "README.md"


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _section(title: str) -> str:
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", _text(), re.M | re.S)
    assert found, f"README has no '## {title}' section"
    return found.group(1)


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.lower()] = version.strip()
    return pins


def _prose(text: str) -> str:
    """The README without its code: fenced blocks and inline code spans removed."""
    return re.sub(r"`[^`]*`", "", re.sub(r"^```.*?^```", "", text, flags=re.M | re.S))


def test_readme_is_short_and_holds_no_measurements_or_history() -> None:
    text = _text()
    assert len(text.splitlines()) <= 200
    prose = _prose(text)
    # measured quality, speed and ratios live in docs/results.md and benchmarks/RESULTS.md;
    # the install size is the one number a newcomer needs before installing
    # (a ratio such as "0.3×", not a screen size such as "1280×720")
    figure = r"\d\s*(dB|ms|%)|\d×(?!\d)|\d+(\.\d+)?\s*s\b"
    assert not re.search(figure, prose), re.findall(rf".{{0,30}}({figure}).{{0,10}}", prose)
    for phrase in ("this round", "main before", "round before", "last round", "Issue #"):
        assert phrase.lower() not in text.lower()
    assert not re.search(r"#\d+\b", prose)


def test_readme_opens_with_the_screenshot_and_links_resolve() -> None:
    text = _text()
    assert text.index("docs/screenshot_1280x720.png") < text.index("## Install")
    for target in re.findall(r"\]\(([^)#]+)\)", text):
        if not target.startswith("http"):
            assert (ROOT / target).exists(), target


def test_the_two_setup_commands_install_the_app_and_the_tests() -> None:
    install = _blocks.blocks(_section("Install"))
    test = _blocks.blocks(_section("Test"))
    assert [lang for lang, _ in test] == ["bash"]
    app_cmd, test_cmd = install[0][1].strip(), test[0][1].strip()
    assert install[0][0] == "bash" and "\n" not in app_cmd and "\n" not in test_cmd
    # the same venv and pinned install, the app's start in place of the test run
    assert test_cmd.endswith('-e ".[test]" && python -m pytest -q')
    assert app_cmd == test_cmd.replace('-e ".[test]" && python -m pytest -q', "-e . && lbi-gui")
    assert "python -m pip install -c constraints.txt" in app_cmd
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["gui-scripts"]["lbi-gui"] == "lbi_gui.app:main"
    assert project["scripts"]["lbi"] == "lbi_engine.cli:main"
    # the extras the README's table names are the ones pyproject declares
    table = set(re.findall(r"^\| `(\w+)`", _section("Install"), re.M))
    table |= set(re.findall(r"`(\w+)`, `(\w+)` \|", _section("Install"))[0])
    assert table == set(project["optional-dependencies"])


def test_the_cpu_only_route_installs_the_pinned_torch_from_the_cpu_index() -> None:
    # not run here (it downloads torch); its versions must be the tested ones
    cpu = [body for lang, body in _blocks.blocks(_section("Install"))[1:] if lang == "bash"]
    assert len(cpu) == 1
    args = shlex.split(cpu[0])
    pins = _pins()
    assert args[:4] == ["python", "-m", "pip", "install"]
    assert f"torch=={pins['torch']}" in args and f"torchvision=={pins['torchvision']}" in args
    assert args[args.index("--index-url") + 1] == "https://download.pytorch.org/whl/cpu"


def _summary_numbers(text: str) -> dict[str, str]:
    head = re.search(r"^(\S+): (\w+) on (\w+), (.+?), alpha=([\d.e-]+) \(([\w-]+)\): (\d+) "
                     r"iterations \((\w+)\)", text, re.M)
    psnr = re.search(r"psnr ([\d.]+) dB", text)
    decoder = re.search(r"decoder psnr ([\d.]+) dB", text)
    assert head and psnr and decoder, text
    keys = ("network", "method", "device", "regulariser", "alpha", "rule", "iterations", "stop")
    return {**dict(zip(keys, head.groups(), strict=True)), "psnr": psnr.group(1),
            "decoder": decoder.group(1)}


def _own_network_quick(args: list[str]) -> list[str]:
    """The README's stand-in encoder is random: it never fits the noise, so its alpha search
    and final solve would run for minutes. 20 iterations per solve run the same code path."""
    if args[:2] == ["lbi", "invert"] and "encoder.onnx" in args:
        return [*args, "--max-iter", "20"]
    return args


def test_every_other_readme_block_runs_and_prints_what_the_readme_quotes(
        tmp_path: Path) -> None:
    pytest.importorskip("onnxscript")  # the own-network export (the export extra)
    from PIL import Image
    from skimage import data

    Image.fromarray(data.astronaut()).save(tmp_path / "photo.png")  # "a photograph"
    text = _text()
    runnable = text[text.index("## Quick start"):]
    out = _blocks.run(_blocks.script(runnable, _own_network_quick), tmp_path)
    # the quick start's summary, as the README quotes it: names exactly, numbers to the
    # precision float32 on another CPU reproduces (the kernels are not bit-stable)
    quoted = next(body for lang, body in _blocks.blocks(_section("Quick start"))
                  if lang == "text")
    want, got = _summary_numbers(quoted), _summary_numbers(out)
    for key in ("network", "method", "regulariser", "rule", "stop"):
        assert got[key] == want[key], (key, got, want)
    assert abs(float(got["alpha"]) / float(want["alpha"]) - 1) < 0.05
    assert abs(float(got["psnr"]) - float(want["psnr"])) < 0.2
    assert abs(float(got["decoder"]) - float(want["decoder"])) < 0.05
    assert abs(int(got["iterations"]) - int(want["iterations"])) <= 100
    for folder in ("runs/first", "runs/photo", "runs/measured"):
        assert (tmp_path / folder / "result.json").is_file(), folder
    assert "lbi-gui arguments valid" in out
    _check_python_example(out)


def _check_python_example(out: str) -> None:
    quoted = re.search(r"prints `(alpha .*?)`", _text(), flags=re.S)
    assert quoted
    want = " ".join(quoted.group(1).split())
    line = next(ln for ln in out.splitlines() if ln.startswith("alpha "))
    # alpha, rule, method and stop reason exactly; PSNRs and the iteration count to the
    # precision float32 on another CPU reproduces
    pattern = (r"alpha ([\d.]+) \(([\w-]+)\), method (\w+), PSNR ([\d.]+) dB "
               r"\(decoder ([\d.]+) dB\), (\w+) after (\d+) iterations")
    got, exp = re.fullmatch(pattern, line), re.fullmatch(pattern, want)
    assert got and exp, (line, want)
    assert got.group(2, 3, 6) == exp.group(2, 3, 6)
    assert abs(float(got.group(1)) / float(exp.group(1)) - 1) < 0.05
    assert abs(float(got.group(4)) - float(exp.group(4))) < 0.2
    assert abs(float(got.group(5)) - float(exp.group(5))) < 0.01
    assert abs(int(got.group(7)) - int(exp.group(7))) <= 100
