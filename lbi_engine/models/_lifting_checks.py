"""The checks :meth:`lbi_engine.models.network.LiftedNetwork.from_module` makes around
lifting: finite weights before (a NaN is named by its parameter), and after, the lifted
forward against the original module's forward on a seeded batch (a forward that does more
than run its layers is refused)."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from lbi_engine.errors import InputError, UnsupportedLayerError
from lbi_engine.protocols import Network

# The lifted forward is checked against the module's own forward at build time (cheap, one
# batch of 3); a larger relative deviation means the module does something its layers hide.
_VERIFY_RTOL = {torch.float64: 1e-10, torch.float32: 1e-4}


def _check_finite_weights(module: nn.Module, name: str) -> None:
    """Refuse NaN/Inf weights by name (else the forward check reports a vague mismatch)."""
    for kind, items in (("parameter", module.named_parameters()),
                        ("buffer", module.named_buffers())):
        for pname, t in items:
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                bad = int((~torch.isfinite(t)).sum())
                raise InputError(f"network '{name}': {kind} '{pname}' {tuple(t.shape)} contains "
                                 f"{bad} NaN or infinite value(s); the weights are damaged (e.g. "
                                 "training diverged or the file was corrupted). Use weights "
                                 "without NaN/Inf.")


def verify_against(net: Network, reference: Any, what: str, seed: int = 0) -> float:
    """Max |net(x) - reference(x)| / max(1, max |reference(x)|) on a seeded random batch of 3.

    (Three, because shapes were traced with a batch of 2: a hard-coded batch size in a
    view/reshape shows up here.)

    Raises UnsupportedLayerError when it exceeds the dtype's tolerance: the reference does
    something in its forward that the lifted layers do not represent.
    """
    gen = torch.Generator().manual_seed(seed)
    dtype, device = net.dtype, net.device
    x = torch.randn(3, *net.input_shape, generator=gen, dtype=torch.float64)
    x = x.to(device=device, dtype=dtype)
    with torch.no_grad():
        got = net.forward(x)
        try:
            want = reference(x)
        except Exception as exc:  # whatever the reference raises
            raise UnsupportedLayerError(
                f"The original {what} fails on a batch of 3 samples of shape {net.input_shape} "
                f"({type(exc).__name__}: {exc}); its forward depends on the batch size (e.g. a "
                "hard-coded view(2, -1)). Use x.reshape(x.size(0), ...) or nn.Flatten().") from exc
    if not isinstance(want, Tensor) or want.shape != got.shape:
        raise UnsupportedLayerError(
            f"The lifted {what} returns shape {tuple(got.shape)} but the original returns "
            f"{tuple(want.shape) if isinstance(want, Tensor) else type(want).__name__}; its "
            "forward is not the chain of its layers. Write it as an nn.Sequential.")
    err = float((got - want).abs().max() / want.abs().max().clamp_min(1.0))
    tol = _VERIFY_RTOL.get(dtype, 1e-2)
    if not err <= tol:
        raise UnsupportedLayerError(
            f"The lifted {what} differs from the original forward (relative error {err:.2e} > "
            f"{tol:.0e}): its forward does more than run its layers in order (e.g. a functional "
            "call or skip connection that is not visible as a layer). Write it as an "
            "nn.Sequential of supported layers.")
    return err
