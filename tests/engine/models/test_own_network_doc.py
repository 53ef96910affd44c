"""docs/own-network.md runs as written: every code block, in order, in an empty folder.

Python blocks run in one namespace (as a reader following the page would), bash blocks are
`lbi ...` lines run through the CLI's entry point. The blocks assert agreement with the torch
module themselves; here we also check that each path printed its line.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[3] / "docs" / "own-network.md"


def _script() -> str:
    """One Python program: python blocks verbatim, bash `lbi` lines via lbi_engine.cli.main."""
    parts = ["import warnings\nwarnings.simplefilter('ignore')  # the exporters' notices\n"
             "from lbi_engine.cli import main as _lbi\n"]
    for lang, body in re.findall(r"```(python|bash)\n(.*?)```", DOC.read_text("utf-8"), re.S):
        if lang == "python":
            parts.append(body)
            continue
        for line in body.strip().splitlines():
            args = shlex.split(line.split("#")[0])
            assert args[0] == "lbi", line
            parts.append(f"assert _lbi({args[1:]!r}) == 0, {line!r}\n")
    return "\n".join(parts)


def test_own_network_doc_examples_run(tmp_path: Path) -> None:
    pytest.importorskip("onnxscript")  # torch.onnx.export's default (dynamo) exporter needs it
    repo = str(DOC.parents[1])
    done = subprocess.run([sys.executable, "-c", _script()], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600,
                          env={"PYTHONPATH": repo, "OMP_NUM_THREADS": "1", "PATH": "/usr/bin"})
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    for name in ("encoder:", "encoder_legacy:", "encoder_sd:", "encoder_whole:",
                 "encoder-from-onnx:"):
        assert name in out, out
    assert out.count("max |difference|") == 9 and "refused: " in out
    assert out.count("max-pool as ReLU layers: 4 lifted layers") == 2  # ONNX and .pt2
    assert "2 lifted layer(s) added" in out
    assert "colour reconstruction: RGB 32x32" in out
    assert re.search(r"residual card: 3 lifted layers, 1 merging", out), out
    for kind in ("residual", "depthwise", "concat"):  # graphs from both default exports
        for ext in ("onnx", "pt2"):
            assert re.search(rf"{kind}\.{ext}: \d+ lifted layers, [1-9]\d* merging", out), out
    assert (tmp_path / "mymodels" / "encoder_whole.safetensors").exists()
    # layer-wise over the residual graph, with the feature prior the page fits
    stages = json.loads((tmp_path / "run-layerwise" / "result.json").read_text())["metrics"][
        "stages"]
    assert [s["stage"] for s in stages][-2:] == ["layer 2/3 (sweep 2/2)", "layer 1/3"], stages
