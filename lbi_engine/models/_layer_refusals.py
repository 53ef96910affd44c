"""Which layers lbi refuses outright, why, and the nearest supported alternative; how every
message names a layer (:func:`layer_label`) and refuses it (:func:`refuse`). Used by
:mod:`lbi_engine.models.layer_lifting` and :mod:`lbi_engine.models.affine_layers`."""

from __future__ import annotations

from typing import NoReturn

from torch import nn

from lbi_engine.errors import UnsupportedLayerError

_MAXPOOL_HINT = ("MaxPool2d itself is lifted by its exact rewrite with ReLUs, max(a, b) = "
                 "ReLU(a - b) + ReLU(b) - ReLU(-b) (MATH.md §2.5); nearest alternatives: "
                 "nn.MaxPool2d, or nn.AvgPool2d with the same kernel and stride (affine, merged "
                 "into W).")

# (module types, why it cannot be lifted, nearest supported alternative)
_REFUSALS: list[tuple[tuple[type, ...], str, str]] = [
    ((nn.MaxPool1d, nn.MaxPool2d, nn.MaxPool3d, nn.AdaptiveMaxPool1d, nn.AdaptiveMaxPool2d,
      nn.AdaptiveMaxPool3d, nn.FractionalMaxPool2d, nn.FractionalMaxPool3d, nn.MaxUnpool2d),
     "max-pooling keeps the largest value of each window; it is neither affine nor a proximal "
     "map (it does not even map R^n to itself)"
     " (an adaptive max-pool is lifted when its output size divides its input size)",
     _MAXPOOL_HINT),
    ((nn.LPPool1d, nn.LPPool2d),
     "power-average pooling is nonlinear and not a proximal map",
     "Nearest alternative: nn.AvgPool2d."),
    ((nn.RNNBase, nn.RNNCellBase),
     "recurrent layers feed their state back into themselves, so the network is not a "
     "feed-forward chain of affine maps and proximal activations",
     "Nearest alternative: unroll a fixed number of steps into Linear + Tanh/Sigmoid layers."),
    ((nn.MultiheadAttention, nn.Transformer, nn.TransformerEncoder, nn.TransformerDecoder,
      nn.TransformerEncoderLayer, nn.TransformerDecoderLayer),
     "attention multiplies activations with each other (softmax(Q K^T) V), which is not affine, "
     "and has residual branches",
     "Nearest alternative: Linear layers with proximal activations (e.g. ReLU, Softmax)."),
    ((nn.LayerNorm, nn.GroupNorm, nn.InstanceNorm1d, nn.InstanceNorm2d, nn.InstanceNorm3d,
      nn.LocalResponseNorm, nn.RMSNorm),
     "it normalises with statistics of each input sample, so it is not an affine map",
     "Nearest alternative: BatchNorm in eval mode (model.eval()), which folds into W and b."),
    ((nn.Embedding, nn.EmbeddingBag),
     "it takes integer indices, not real vectors", "Feed one-hot vectors into nn.Linear instead."),
    ((nn.Bilinear,), "it multiplies two inputs with each other, which is not affine",
     "Nearest alternative: nn.Linear on the concatenated input."),
    ((nn.Upsample, nn.UpsamplingNearest2d, nn.UpsamplingBilinear2d, nn.PixelShuffle,
      nn.PixelUnshuffle),
     "resampling layers are not implemented as affine maps in lbi",
     "Nearest alternative: nn.ConvTranspose2d with stride equal to the scale factor."),
    ((nn.Conv1d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose3d, nn.AvgPool1d, nn.AvgPool3d,
      nn.AdaptiveAvgPool1d, nn.AdaptiveAvgPool3d),
     "only 2-D convolutions and poolings are implemented",
     "Nearest alternative: the 2-D layer (Conv2d/AvgPool2d) on (C, H, W) samples, or "
     "nn.Linear on flattened samples."),
    ((nn.ModuleList, nn.ModuleDict, nn.ParameterList, nn.ParameterDict),
     "a container without a forward cannot be called as a layer",
     "Put the layers in an nn.Sequential."),
]


def layer_label(name: str, module: nn.Module, position: int) -> str:
    """``Layer 'features.3' (MaxPool2d, position 3)``: how every message names a layer."""
    return f"Layer '{name}' ({type(module).__name__}, position {position})"


def refuse(name: str, module: nn.Module, position: int, why: str,
           alternative: str) -> NoReturn:
    raise UnsupportedLayerError(f"{layer_label(name, module, position)} cannot be lifted: "
                                f"{why}. {alternative}")


def refusal_for_type(cls: type) -> tuple[str, str] | None:
    """(why, alternative) when modules of this class are refused outright, else None."""
    for types, why, alternative in _REFUSALS:
        if issubclass(cls, types):
            return why, alternative
    return None
