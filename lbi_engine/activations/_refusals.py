"""Why an activation cannot be lifted, and what to use instead (MATH.md §2.1, §2.5).

A scalar activation is a proximal map iff it is nondecreasing and 1-Lipschitz; the numbers
below are the dense-grid measurements of MATH.md §2.5. Kept in one table so that the torch and
ONNX mappings give the same message for the same activation.
"""

from __future__ import annotations

from typing import Any, NoReturn

from lbi_engine.errors import UnsupportedLayerError

_NOT_PROX = "so it is not the proximal map of a convex function (MATH.md §2.5)"
_NOT_IMPLEMENTED = "but lbi does not implement its psi"
#: What a refused network can use instead: every activation lbi lifts, as a user names it.
LIFTED_ACTIVATIONS = ("ReLU, LeakyReLU/PReLU (0 <= a <= 1), ELU (alpha <= 1), Sigmoid, Tanh, "
                      "Softplus, Softsign, Softshrink, Hardtanh/ReLU6/Clip, Hardsigmoid, "
                      "Softmax, and max-pooling (by its exact ReLU rewrite)")

# key -> (reason, nearest supported alternative); both may hold {placeholders}.
REFUSALS: dict[str, tuple[str, str]] = {
    "gelu": (f"GELU is not monotone (minimum -0.170 at z = -0.75) and its slope reaches "
             f"1.129 > 1, {_NOT_PROX}",
             "ReLU, softplus or ELU(alpha <= 1), then fine-tune the network"),
    "silu": (f"SiLU/Swish z*sigmoid(z) is not monotone (minimum -0.278 at z = -1.28) and its "
             f"slope reaches 1.0998 > 1, {_NOT_PROX}",
             "ReLU or softplus, then fine-tune the network"),
    "mish": (f"Mish is not monotone (minimum -0.309) and its slope reaches 1.089 > 1, "
             f"{_NOT_PROX}",
             "softplus or ReLU, then fine-tune the network"),
    "hardswish": (f"Hardswish is not monotone and its slope reaches 1.5 > 1, {_NOT_PROX}",
                  "ReLU6 (clip to [0, 6]), ReLU or Hardsigmoid"),
    "selu": (f"SELU has slope lambda = 1.0507 > 1 for z > 0 and up to lambda*alpha = 1.758 just "
             f"below 0, so it is not 1-Lipschitz, {_NOT_PROX}",
             "ELU with alpha <= 1, e.g. nn.ELU(alpha=1.0)"),
    "elu_alpha_high": (f"ELU with alpha = {{alpha}} > 1 has slope alpha*e^z up to {{alpha}} > 1 "
                       f"just below 0, so it is not 1-Lipschitz, {_NOT_PROX}",
                       "ELU with 0 < alpha <= 1"),
    "elu_alpha_negative": (f"ELU with alpha = {{alpha}} < 0 is not monotone, {_NOT_PROX}",
                           "ELU with 0 < alpha <= 1, or ReLU"),
    "leaky_slope_high": (f"leaky ReLU with slope a = {{a}} > 1 is steeper than 1 for z < 0, so "
                         f"it is not 1-Lipschitz, {_NOT_PROX}",
                         "LeakyReLU with 0 < a <= 1, or ReLU"),
    "leaky_slope_negative": (f"leaky ReLU with slope a = {{a}} < 0 is not monotone (a = -1 is "
                             f"|z|), {_NOT_PROX}",
                             "LeakyReLU with 0 < a <= 1, or ReLU"),
    "hardshrink": (f"Hardshrink is discontinuous (it jumps by lambda at |z| = lambda): it is "
                   f"the prox of a nonconvex penalty, {_NOT_PROX}",
                   "Softshrink (soft_shrink) with the same lambda"),
    "threshold": (f"Threshold(threshold={{threshold}}, value={{value}}) is discontinuous at "
                  f"z = threshold because value != threshold, {_NOT_PROX}",
                  "Threshold(t, t) (= clip to [t, inf)) or ReLU"),
    "thresholded_relu": (f"ThresholdedRelu is discontinuous (it jumps from 0 to alpha at "
                         f"z = alpha), {_NOT_PROX}", "Relu"),
    "hardmax": (f"Hardmax (one-hot of the argmax) is discontinuous, {_NOT_PROX}", "Softmax"),
    "abs": (f"|z| is not monotone, {_NOT_PROX}", "ReLU"),
    "softmin": (f"Softmin(z) = softmax(-z) is decreasing in its input (minus the gradient of a "
                f"convex function), {_NOT_PROX}",
                "Softmax, with the sign folded into the preceding linear layer (negate its "
                "weight and bias)"),
    "glu": ("GLU halves the feature dimension (a * sigmoid(b)), so it does not map a space to "
            "itself and has no proximal representation",
            "a ReLU or sigmoid layer of the same width"),
    "prelu_channels": ("PReLU with {n} learnable slopes (one per channel) is not supported: "
                       "lbi's leaky_relu has a single slope",
                       "PReLU(num_parameters=1) or LeakyReLU with 0 <= a <= 1"),
    "celu": (f"CELU with alpha = {{alpha}} != 1 is a proximal map (slope e^(z/alpha) <= 1), "
             f"{_NOT_IMPLEMENTED}", "CELU(alpha=1) (= ELU(alpha=1)) or ELU with alpha <= 1"),
    "tanhshrink": (f"Tanhshrink z - tanh(z) is a proximal map, but its psi is not elementary "
                   f"and {_NOT_IMPLEMENTED.removeprefix('but ')}",
                   "softsign, tanh or Softshrink"),
    "logsigmoid": (f"LogSigmoid is a proximal map (monotone, slope < 1), {_NOT_IMPLEMENTED}",
                   "softplus (LogSigmoid(z) = -softplus(-z)) or Sigmoid"),
    "logsoftmax": (f"LogSoftmax is not one of lbi's activations ({_NOT_IMPLEMENTED})",
                   "Softmax, whose Bregman loss is the KL divergence (cross-entropy)"),
    "softplus_beta": ("Softplus with beta = {beta} <= 0 is not supported",
                      "Softplus with beta > 0"),
    "softmax_implicit_dim": ("nn.Softmax without dim uses PyTorch's deprecated implicit "
                             "dimension, so the simplex it maps onto is not known",
                             "set the dimension explicitly, e.g. nn.Softmax(dim=1)"),
    "softmax_batch_dim": ("a softmax over dim 0 (the batch) couples the samples",
                          "a softmax over dim=1 (features/channels) or dim=-1"),
    "onnx_hard_sigmoid": ("HardSigmoid(alpha={alpha}, beta={beta}) is a proximal map when "
                          "0 < alpha <= 1, but lbi implements only PyTorch's alpha = 1/6, "
                          "beta = 0.5",
                          "export from torch.nn.Hardsigmoid (alpha = 1/6, beta = 0.5)"),
    "onnx_shrink": (f"Shrink(bias={{bias}}, lambd={{lambd}}) with bias != lambd is "
                    f"discontinuous at |z| = lambd (bias = 0 is hard shrinkage), {_NOT_PROX}",
                    "Shrink with bias = lambd (soft shrinkage)"),
    "onnx_softmax_coerced": ("Softmax(axis={axis}) at opset {opset} < 13 flattens every "
                             "dimension from axis on into one softmax, which lbi does not "
                             "support for this input rank",
                             "re-export with opset >= 13, or with axis = the last dimension"),
}


def refusal_message(what: str, key: str, **values: Any) -> str:
    """'<what> cannot be lifted: <reason>. Nearest supported alternative: <alt>. Activations
    lbi lifts: <list>.'"""
    reason, alternative = REFUSALS[key]
    return (f"{what} cannot be lifted: {reason.format(**values)}. "
            f"Nearest supported alternative: {alternative.format(**values)}. "
            f"Activations lbi lifts: {LIFTED_ACTIVATIONS}.")


def refuse(what: str, key: str, **values: Any) -> NoReturn:
    """Raise UnsupportedLayerError with the table's reason and alternative."""
    raise UnsupportedLayerError(refusal_message(what, key, **values))
