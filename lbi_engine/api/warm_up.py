"""The slow one-time work of a run, done before its first iteration (see ``warm_up``)."""

from __future__ import annotations

from typing import Any

import torch


def warm_up(network: Any, method: str, device: torch.device, dtype: torch.dtype) -> Any:
    """The network on ``device``/``dtype``, with the slow one-time work of a run done now.

    Why: a run is cancellable only between iterations, so anything slow before or in its
    first iterations delays Stop (the GUI promises < 200 ms). Done here instead: operator
    norms (step sizes; ~0.2 s for the circle perceptron, ~1 s for the CNN's convolutions),
    cached on the bundle's layers so they survive ``.to()`` and later runs; the first call of
    each convolution kernel and of autograd through the network (~0.1-0.8 s per process:
    torch imports sympy on the first ``autograd.grad`` with ``grad_outputs``);
    scikit-image (SSIM) and torch.optim's import of torch._dynamo (~3 s per process).
    """
    for layer in network.layers:
        layer.affine.norm()
        for amap in getattr(layer, "extra", ()):  # the other inputs' maps of a graph
            amap.norm()
    encoder = network.to(device=device, dtype=dtype)
    x = torch.zeros((1, *encoder.input_shape), device=device, dtype=dtype)
    with torch.no_grad():
        if not getattr(encoder, "is_chain", True):  # a graph (MATH.md §5.6)
            states = [x, *encoder.forward_states(x)]
            for index in range(len(encoder.layers)):
                for j, amap in encoder.terms(index):
                    amap.adjoint(amap.apply(states[j]))
        h = x
        for layer in encoder.layers if getattr(encoder, "is_chain", True) else ():
            z = layer.affine.apply(h)
            layer.affine.adjoint(z)
            h = layer.activation.sigma(z)
    if method in ("landweber", "backprop"):
        with torch.enable_grad():  # with grad_outputs, as Landweber does: that imports sympy
            out = encoder.forward(x.requires_grad_(True))
            torch.autograd.grad(out, x, grad_outputs=torch.ones_like(out))
    if method == "backprop":
        torch.optim.Adam([torch.zeros(1, requires_grad=True)])
    try:  # skimage loads lazily: only touching the function imports it
        from skimage.metrics import structural_similarity  # noqa: F401
    except ImportError:  # SSIM then reports its own error where it is used
        pass
    return encoder
