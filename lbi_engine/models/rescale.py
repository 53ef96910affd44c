"""The hidden-layer weight of the lifted objective, by an exact rescaling of the network.

MATH.md §5.7. For an activation whose Psi is positively homogeneous of degree 2 after its
parameters are scaled with the state (ReLU, leaky ReLU, identity; clip and soft-shrink with
their bounds/threshold times c), B_{Psi_c}(c x, c z) = c^2 B_Psi(x, z). Multiplying hidden
state l by c_l (its writing maps and bias times c_l, the maps that read it divided by c_l)
leaves the network's forward unchanged and turns the lifted objective into

    sum_l (c_l)^2 B_{Psi_l}(x_l, sum_j A_{l,j} x_j + b_l) + alpha R(x_0)

in the original variables: a per-layer weight w_l = c_l^2 on every hidden Bregman term, with
the input (c_0 = 1, the prior's variable) and the last layer (c_L = 1, the measured code)
untouched. A solver run on the rescaled network minimises that weighted objective with no
change to its steps (they are computed from the rescaled maps); the states it returns are
divided by c_l to give the network's own.

Why weight the hidden terms: on residual networks the lifted variables absorb part of the
fit that the network's forward must make (a block's input enters twice), and the lifted
solution drifts from the network's inverse. A large weight closes most of the gap to
L-BFGS on a random resnet18 slice and costs a little on a trained residual autoencoder
(docs/developer/calibration.md). Hence "auto" is 1 and the discrepancy search raises it
(``HIDDEN_WEIGHT_RAISED``) on any network (graph or chain) whose target it finds out of
reach at weight 1: the sign that the lifted states, not the input, absorb the fit (the rule's
derivation: MATH.md §5.7).
"""

from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING

from lbi_engine.errors import InputError
from lbi_engine.operators import AffineMap
from lbi_engine.operators.scaled import scaled
from lbi_engine.settings.solver import HIDDEN_WEIGHT_RANGE

if TYPE_CHECKING:
    from lbi_engine.activations import ProximalActivation
    from lbi_engine.models.network import LiftedNetwork

#: The weight the discrepancy search raises "auto" to on a network whose target it
#: found out of reach at weight 1 (lbi_engine/solvers/alpha/whole.py, MATH.md §5.7): the best
#: of a grid of weights on the random resnet18 parts of bench_graph_slices
#: (docs/developer/calibration.md).
HIDDEN_WEIGHT_RAISED = 100.0
#: problem.extras key: the weight "auto" stands for in this problem (absent: 1, the paper's)
AUTO_WEIGHT = "hidden_weight_auto"

# activation name -> parameters that scale with the state (all others: none)
_HOMOGENEOUS = {"identity": (), "relu": (), "leaky_relu": (), "clip": ("lo", "hi"),
                "soft_shrink": ("lam",)}


def resolve_hidden_weight(value: float | str, extras: dict | None = None) -> float:
    """The weight a run uses: ``"auto"`` -> 1 (the paper's objective) unless the problem's
    ``extras[AUTO_WEIGHT]`` says the alpha search raised it; a number as given (InputError
    outside ``HIDDEN_WEIGHT_RANGE``)."""
    if value == "auto":
        return float((extras or {}).get(AUTO_WEIGHT, 1.0))
    weight = float(value)
    lo, hi = HIDDEN_WEIGHT_RANGE
    if not (math.isfinite(weight) and lo <= weight <= hi):
        raise InputError(f"hidden_weight={value!r}: give 'auto' or a number in [{lo:g}, "
                         f"{hi:g}] (1 is the paper's objective).")
    return weight


def can_raise(network: LiftedNetwork) -> bool:
    """Whether "auto" may raise the weight on this network: a graph (residual additions,
    concatenation) with at least one hidden state that scales."""
    return not network.is_chain and any(c != 1.0 for c in state_scales(network, 4.0))


def can_scale(activation: ProximalActivation) -> bool:
    """Whether c sigma(z) = sigma_c(c z) with B scaling by c^2 (see the module docstring)."""
    return getattr(activation, "name", "") in _HOMOGENEOUS


def scaled_activation(activation: ProximalActivation, c: float) -> ProximalActivation:
    """sigma_c with c sigma(z) = sigma_c(c z): the same object when no parameter scales."""
    keys = _HOMOGENEOUS.get(getattr(activation, "name", ""), ())
    if c == 1.0 or not keys:
        return activation
    from lbi_engine.activations import make_activation

    spec = activation.spec()
    for key in keys:
        if spec.get(key) is not None:
            spec[key] = spec[key] * c
    return make_activation(spec)


def state_scales(network: LiftedNetwork, weight: float) -> list[float]:
    """[c_0, .., c_L] for the states (0 the input, l + 1 layer l's output): sqrt(weight) on
    every hidden state whose activation scales, 1 on the input, the output and the rest."""
    c = math.sqrt(weight)
    last = len(network.layers) - 1
    return [1.0] + [c if i < last and can_scale(layer.activation) else 1.0
                    for i, layer in enumerate(network.layers)]


_CACHE: weakref.WeakKeyDictionary[LiftedNetwork, dict[float, LiftedNetwork]] = \
    weakref.WeakKeyDictionary()


def rescaled(network: LiftedNetwork, weight: float) -> LiftedNetwork:
    """The network with its hidden states times sqrt(weight) (:func:`state_scales`): the same
    forward, hidden Bregman terms times ``weight``. Cached per network and weight (an alpha
    search solves many times on one network; the maps' norms are carried, not recomputed)."""
    if weight == 1.0:
        return network
    kept = _CACHE.setdefault(network, {})
    if weight not in kept:
        kept[weight] = _build(network, state_scales(network, weight))
    return kept[weight]


def _build(network: LiftedNetwork, scales: list[float]) -> LiftedNetwork:
    from lbi_engine.models.network import LiftedLayer, LiftedNetwork

    dtype, device = network.dtype, network.device
    layers = []
    for i, layer in enumerate(network.layers):
        out = scales[i + 1]
        maps: list[AffineMap] = [scaled(amap, out / scales[j], out).to(device=device,
                                                                         dtype=dtype)
                                 for j, amap in network.terms(i)]
        layers.append(LiftedLayer(maps[0], scaled_activation(layer.activation, out),
                                  layer.source, layer.inputs, tuple(maps[1:])))
    new = LiftedNetwork(layers, network.input_shape, network.name)
    new.rewrites = [dict(r) for r in network.rewrites]
    new.reference = network.reference  # the same forward map: the rescaling keeps it
    return new
