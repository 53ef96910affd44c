"""Turn a Markdown page's code blocks into one Python program, run it as a reader would.

Python blocks run verbatim in one namespace, in page order. In bash blocks every line is a
command: ``lbi ...`` runs through the CLI's entry point (``lbi_engine.cli.main``, exit code 0
required); ``lbi-gui ...`` is parsed by the window's own argument parser and the request it
makes is validated, without opening a window (tests/gui drives the window itself). Lines of
other commands are refused, so a page cannot gain a command that no test runs. ``text``
blocks are output the page quotes, not run.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^```(\w+)\n(.*?)^```", re.M | re.S)

#: Changes one command's arguments into a quicker variant (the test says why).
Quick = Callable[[list[str]], list[str]]

_PRELUDE = """\
import warnings
warnings.simplefilter("ignore")  # exporters' and libraries' notices are not the page's output
from lbi_engine.cli import main as _lbi


def _lbi_gui(args):
    from lbi_gui.app import build_parser, request_from_args
    from lbi_engine.request import InversionRequest

    parsed = build_parser().parse_args(args)
    InversionRequest(**request_from_args(parsed)).validate(check_device=False)
    print("lbi-gui arguments valid:", args)
"""


def blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block, in page order."""
    return FENCE.findall(text)


def commands(body: str) -> list[list[str]]:
    """The commands of a bash block, comments dropped."""
    out = []
    for line in body.strip().splitlines():
        args = shlex.split(line, comments=True)
        if args:
            out.append(args)
    return out


def script(text: str, quick: Quick = lambda args: args) -> str:
    """One Python program running the page's python and bash blocks in order."""
    parts = [_PRELUDE]
    for lang, body in blocks(text):
        if lang == "python":
            parts.append(body)
        elif lang == "bash":
            for args in commands(body):
                if args[0] == "lbi":
                    run = quick(args)[1:]
                    parts.append(f"assert _lbi({run!r}) == 0, {' '.join(args)!r}\n")
                elif args[0] == "lbi-gui":
                    parts.append(f"_lbi_gui({args[1:]!r})\n")
                else:
                    raise AssertionError(f"a command no test runs: {' '.join(args)}")
        elif lang != "text":
            raise AssertionError(f"a ```{lang} block: use python, bash or text")
    return "\n".join(parts)


def run(program: str, cwd: Path, timeout: int = 600) -> str:
    """Runs ``program`` in ``cwd`` with this checkout importable; returns its stdout."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, "-c", program], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=env)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-4000:])
    return done.stdout
