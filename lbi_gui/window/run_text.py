"""The run view's texts: what was done to the data, and the concerns
about a finished result (status line, tooltip, message line)."""

from __future__ import annotations

import numpy as np

from lbi_gui.engine.messages import PreparedInfo
from lbi_gui.model.runs import RunResult


def concern_texts(result: RunResult) -> tuple[str, str, str] | None:
    """(status line, tooltip, message line) naming why ``result`` may not be what it seems,
    with the next step; None when nothing was found to doubt."""
    concerns = result.concerns
    if not concerns:
        return None
    status = f"⚠ {concerns[0].kind}: {result.stop_reason}"
    tooltip = "\n".join(f"⚠ {c.sentence()}" for c in concerns)
    message = f"Run #{result.run_id}: " + " · ".join(c.sentence() for c in concerns)
    return status, tooltip, message


def preprocessing_text(info: PreparedInfo) -> str:
    """What was done to the data before inversion, in one or two lines."""
    shape = "×".join(str(s) for s in info.input_shape)
    parts = [f"network input {shape}"]
    if info.truth is not None:
        t = np.asarray(info.truth)
        parts.append(f"ground truth {t.shape[-2]}×{t.shape[-1]}, values "
                     f"[{float(t.min()):.3g}, {float(t.max()):.3g}]")
    pre = info.preprocessing or {}
    offset, scale = float(pre.get("offset", 0.0)), float(pre.get("scale", 1.0))
    if offset or scale != 1.0:
        parts.append(f"network input = (x − {offset:.4g}) / {scale:.4g}")
    req = info.request or {}
    if req.get("data"):
        parts.append("measured y used as is (no noise added)")
    elif req.get("noise_std"):
        parts.append(f"y^δ = output + N(0, {float(req['noise_std']):.3g}²), clipped to dom Ψ")
    text = "; ".join(parts)
    return text + "".join(f"\n⚠ {note}" for note in info.warnings)
