"""The elementwise proximal activations of MATH.md §2.2 (softmax lives in _softmax).

This module gathers the kinds from their rooms: ``_piecewise`` (closed-form prox),
``_smooth`` (prox by the root solver) and ``_params`` (shared checks).

Each B_Psi is written as a sum of terms that are each >= 0 where that is possible (ReLU, leaky
ReLU, clip, soft-shrink, ELU, softsign, hard-sigmoid), or in BCE-with-logits form (sigmoid,
tanh), so that float32 does not lose the loss to cancellation of 1/2 x^2 + 1/2 z^2 - x z.
"""

from __future__ import annotations

from lbi_engine.activations._params import LN2
from lbi_engine.activations._piecewise import (
    Clip,
    HardSigmoid,
    Identity,
    LeakyReLU,
    ReLU,
    SoftShrink,
)
from lbi_engine.activations._smooth import ELU, Sigmoid, Softplus, Softsign, Tanh

# The kinds live in two rooms (closed-form prox: _piecewise; root-solved prox:
# _smooth); this module keeps every name importable from where it always was.
__all__ = [
    "LN2", "Identity", "ReLU", "LeakyReLU", "Clip", "SoftShrink", "HardSigmoid",
    "Sigmoid", "Tanh", "Softplus", "ELU", "Softsign",
]
