"""LiftedNetwork: a feed-forward network seen as L lifted layers x_l = sigma_l(W_l x_{l-1} + b_l).

More generally (residual additions, channel concatenation: MATH.md §5.6) a layer's
pre-activation may combine several earlier states, x_l = sigma_l(sum_{j in in(l)} A_{l,j} x_j
+ b_l) with in(l) a subset of {0, .., l-1} (x_0 the input): ``LiftedLayer.inputs`` names them
and ``LiftedLayer.extra`` holds the maps of all but the first (``affine`` maps the first; the
biases of all maps add). A layer without ``inputs`` takes the previous state, so a chain is
the special case and keeps its objects and numbers.

Grouping rule (MATH.md §5.1): every run of affine layers followed by one proximal activation
is one lifted layer, its affine part the composition of the run. A trailing run of affine
layers gets the identity activation (Psi = 0). Two activations in a row: the second one gets
an identity affine map of its own, so each lifted layer still has exactly one sigma (the same
applies to a network that starts with an activation). Consequently ``forward`` equals the
original module's forward and ``forward_states`` are the post-activation states the solvers
treat as unknowns x_1, ..., x_L.

The checks around lifting (finite weights, the lifted forward against the original:
:func:`verify_against`, re-exported here) are in ``_lifting_checks``.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor, nn

from lbi_engine.errors import InputError, ShapeMismatchError, UnsupportedLayerError
from lbi_engine.limits import MAX_INPUT_VALUES as MAX_INPUT_VALUES  # re-export (old home)
from lbi_engine.limits import _check_shape
from lbi_engine.models._lifting_checks import _check_finite_weights
from lbi_engine.models._lifting_checks import verify_against as verify_against  # re-export
from lbi_engine.models.importers import torchscript_sequential
from lbi_engine.models.onnx_import import onnx_sequential
from lbi_engine.models.pt2_import import pt2_sequential
from lbi_engine.operators import AffineMap, IdentityMap
from lbi_engine.operators.compose import compose

if TYPE_CHECKING:
    from lbi_engine.activations import ProximalActivation


@dataclass
class LiftedLayer:
    """One lifted layer: x_out = activation.sigma(affine.apply(x_in)), or in a graph
    x_out = activation.sigma(affine.apply(x_{inputs[0]}) + sum_k extra[k].apply(x_{inputs[k+1]}))
    with states numbered 0 (the network input) .. L (layer l's output is state l + 1)."""

    affine: AffineMap
    activation: ProximalActivation
    source: str  # the original layers it came from, e.g. "0:Conv2d, 1:ReLU"
    inputs: tuple[int, ...] | None = None  # None: the previous state (a chain layer)
    extra: tuple[AffineMap, ...] = ()  # the maps of inputs[1:]


def check_input_shape(input_shape: Any, what: str = "input_shape") -> tuple[int, ...]:
    """A sample shape as a tuple of positive ints within MAX_INPUT_VALUES; InputError else."""
    return _check_shape(input_shape, what)


def group_layers(entries: Sequence[Any]) -> list[LiftedLayer]:
    """Runs of affine entries + one activation -> LiftedLayer (see the module docstring)."""
    from lbi_engine.activations import make_activation

    layers: list[LiftedLayer] = []
    run: list[Any] = []
    for e in entries:
        if isinstance(e.lifted, AffineMap):
            run.append(e)
            continue
        affine = compose([r.lifted for r in run]) if run else IdentityMap(e.in_shape)
        source = ", ".join(f"{r.name}:{type(r.module).__name__}" for r in [*run, e])
        layers.append(LiftedLayer(affine, e.lifted, source))
        run = []
    if run or not layers:
        if run:
            affine = compose([r.lifted for r in run])
            source = ", ".join(f"{r.name}:{type(r.module).__name__}" for r in run)
        else:  # a network without any layer: identity
            shape = entries[0].in_shape if entries else None
            if shape is None:
                raise UnsupportedLayerError("The network has no layers; nothing to lift.")
            affine, source = IdentityMap(shape), "identity"
        layers.append(LiftedLayer(affine, make_activation("identity"), source))
    return layers


def sum_of_terms(terms: Sequence[tuple[int, Any]], states: Sequence[Tensor]) -> Tensor:
    """sum_j A_j.apply(x_j) over a layer's terms [(state j, map A_j), ...] (a fresh tensor
    unless the layer has one term whose map returns its input)."""
    z: Tensor | None = None
    for j, amap in terms:
        part = amap.apply(states[j])
        z = part if z is None else z + part
    assert z is not None  # every layer has a term
    return z


class LiftedNetwork:
    """A chain of LiftedLayer objects with the original network's forward.

    Build it with :meth:`from_module`, :meth:`from_onnx`, :meth:`from_pt2` or
    :meth:`from_torchscript`.
    """

    def __init__(self, layers: Sequence[LiftedLayer], input_shape: Sequence[int],
                 name: str = "network") -> None:
        if not layers:
            raise InputError("LiftedNetwork needs at least one layer.")
        self.layers = list(layers)
        self.name = name
        #: what lifting rewrote to make the network liftable (MaxPool2d as ReLU layers): one
        #: dict per rewritten layer (layer, geometry, lifted_layers_added)
        self.rewrites: list[dict[str, Any]] = []
        #: the module lbi translated a file's graph into (ONNX, .pt2) before lifting it: the
        #: same forward map with max-pools as max-pools, so cheaper to evaluate than the
        #: rewritten layers; only lbi's own translation, never a user's or a file's code
        self.reference: nn.Module | None = None
        self.input_shape = _check_shape(input_shape)
        self.is_chain = all(lay.inputs in (None, (i,)) and not lay.extra
                            for i, lay in enumerate(self.layers))
        if not self.is_chain:
            self.output_shape = self._check_graph()
            return
        shape = self.input_shape
        for i, layer in enumerate(self.layers):
            if layer.affine.in_shape != shape:
                raise ShapeMismatchError(f"Layer {i} ({layer.source}) expects samples of shape "
                                         f"{layer.affine.in_shape} but receives {shape}.")
            shape = layer.affine.out_shape
        self.output_shape = shape

    # --- the graph (MATH.md §5.6) -----------------------------------------------------------
    def terms(self, index: int) -> list[tuple[int, AffineMap]]:
        """[(state j, A_{l,j}), ...] of layer ``index``: its pre-activation is the sum of
        A.apply(x_j) (states: 0 the input, i + 1 the output of layer i)."""
        layer = self.layers[index]
        inputs = layer.inputs if layer.inputs is not None else (index,)
        return list(zip(inputs, (layer.affine, *layer.extra), strict=True))

    def consumers(self, state: int) -> list[tuple[int, AffineMap]]:
        """[(layer l, A_{l,state}), ...]: every term in which state ``state`` is an input."""
        return [(i, amap) for i in range(len(self.layers)) for j, amap in self.terms(i)
                if j == state]

    def pre_activation_of(self, index: int, states: Sequence[Tensor]) -> Tensor:
        """z_l = sum_j A_{l,j} x_j + b_l from ``states`` = [x_0, x_1, ...] (at least l + 1)."""
        return sum_of_terms(self.terms(index), states)

    def _check_graph(self) -> tuple[int, ...]:
        """Shapes and order of a graph network; its output shape."""
        shapes = [self.input_shape]
        for i, layer in enumerate(self.layers):
            if layer.inputs is not None and len(layer.inputs) != 1 + len(layer.extra):
                raise InputError(f"Layer {i} ({layer.source}) names {len(layer.inputs)} inputs "
                                 f"but has {1 + len(layer.extra)} maps; give one map per input.")
            out = layer.affine.out_shape
            for j, amap in self.terms(i):
                if not 0 <= j <= i:
                    raise InputError(f"Layer {i} ({layer.source}) takes state {j}; a layer may "
                                     f"only take the input (0) or earlier layers' outputs "
                                     f"(1..{i}): order the layers topologically.")
                if amap.in_shape != shapes[j] or amap.out_shape != out:
                    raise ShapeMismatchError(
                        f"Layer {i} ({layer.source}) maps state {j} of shape {shapes[j]} "
                        f"with a map {amap.in_shape} -> {amap.out_shape}; expected "
                        f"{shapes[j]} -> {out}.")
            shapes.append(out)
        return shapes[-1]

    # --- evaluation ------------------------------------------------------------------------
    def _check_input(self, x: Tensor) -> None:
        if not isinstance(x, Tensor) or tuple(x.shape[1:]) != self.input_shape:
            got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
            raise ShapeMismatchError(
                f"Input to network '{self.name}' has shape {got}; expected (B, "
                f"{', '.join(map(str, self.input_shape))}) with a leading batch dimension "
                "(use x.unsqueeze(0) for one sample).")

    def forward(self, x: Tensor) -> Tensor:
        """sigma_L(W_L ... sigma_1(W_1 x + b_1) ... + b_L): the original module's forward."""
        self._check_input(x)
        if not self.is_chain:
            return self._graph_states(x)[-1]
        for layer in self.layers:
            x = layer.activation.sigma(layer.affine.apply(x))
        return x

    def _graph_states(self, x: Tensor) -> list[Tensor]:
        states = [x]
        for i, layer in enumerate(self.layers):
            states.append(layer.activation.sigma(self.pre_activation_of(i, states)))
        return states[1:]

    __call__ = forward

    def forward_states(self, x: Tensor) -> list[Tensor]:
        """[x_1, ..., x_L], the post-activation state of every lifted layer."""
        self._check_input(x)
        if not self.is_chain:
            return self._graph_states(x)
        states = []
        for layer in self.layers:
            x = layer.activation.sigma(layer.affine.apply(x))
            states.append(x)
        return states

    def pre_activation(self, l: int, x_prev: Tensor) -> Tensor:  # paper notation
        """z_l = W_l x_{l-1} + b_l for the 0-based layer index l."""
        if not -len(self.layers) <= l < len(self.layers):
            raise InputError(f"layer index {l} is out of range for '{self.name}' with "
                             f"{len(self.layers)} layers (0-based).")
        if not self.is_chain and len(self.terms(l)) > 1:
            raise InputError(f"layer {l} of '{self.name}' takes the states "
                             f"{[j for j, _ in self.terms(l)]}, not one previous state; use "
                             "pre_activation_of(l, states).")
        return self.layers[l].affine.apply(x_prev)

    # --- bookkeeping -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.layers)

    @property
    def dtype(self) -> torch.dtype:
        """The dtype of the layers' weights (float32 for a network without any)."""
        return next((lay.affine.dtype for lay in self.layers if lay.affine.dtype), torch.float32)

    @property
    def device(self) -> torch.device:
        """The device of the layers' weights (the CPU for a network without any)."""
        dev = next((lay.affine.device for lay in self.layers if lay.affine.device), None)
        return dev or torch.device("cpu")

    def to(self, device: torch.device | str | None = None,
           dtype: torch.dtype | None = None) -> LiftedNetwork:
        """A new network with every affine map moved/cast (activations hold no tensors)."""
        layers = [LiftedLayer(lay.affine.to(device=device, dtype=dtype), lay.activation,
                              lay.source, lay.inputs,
                              tuple(m.to(device=device, dtype=dtype) for m in lay.extra))
                  for lay in self.layers]
        out = LiftedNetwork(layers, self.input_shape, self.name)
        out.rewrites = [dict(r) for r in self.rewrites]
        if self.reference is not None:
            out.reference = copy.deepcopy(self.reference).to(device=device, dtype=dtype)
        return out

    def rewrite_note(self) -> str | None:
        """One line saying what lifting rewrote (None when nothing): for the CLI and window."""
        if not self.rewrites:
            return None
        added = sum(int(r["lifted_layers_added"]) for r in self.rewrites)
        names = ", ".join(f"'{r['layer']}'" + (" (rows, then columns)" if r.get("form") ==
                                               "rows, then columns" else "")
                          for r in self.rewrites)
        return (f"max-pooling rewritten exactly as ReLU layers ({names}): {added} lifted "
                f"layer(s) added, {len(self.layers)} in all")

    def summary(self) -> list[dict]:
        """One dict per lifted layer: index, kind, description, shapes, activation, norm."""
        out = []
        for i, lay in enumerate(self.layers):
            act = lay.activation
            out.append({"index": i, "kind": lay.affine.kind, "description": lay.affine.describe(),
                        "in_shape": lay.affine.in_shape, "out_shape": lay.affine.out_shape,
                        "activation": getattr(act, "name", type(act).__name__),
                        "activation_spec": act.spec() if hasattr(act, "spec") else None,
                        "norm": lay.affine.norm(), "norm_method": lay.affine.norm_method,
                        "source": lay.source})
            if not self.is_chain:  # what each node merges (states: 0 input, i + 1 layer i)
                out[-1]["inputs"] = [j for j, _ in self.terms(i)]
        return out

    def __repr__(self) -> str:
        body = "\n".join(f"  [{i}] {lay.affine.describe()} -> "
                         f"{getattr(lay.activation, 'name', '?')}"
                         + ("" if self.is_chain else
                            f"  (from states {[j for j, _ in self.terms(i)]})")
                         for i, lay in enumerate(self.layers))
        return f"LiftedNetwork '{self.name}' {self.input_shape} -> {self.output_shape}\n{body}"

    # --- construction ----------------------------------------------------------------------
    @classmethod
    def from_module(cls, module: nn.Module, input_shape: Sequence[int], name: str | None = None,
                    verify: bool = True) -> LiftedNetwork:
        """Lift an nn.Module for samples of shape ``input_shape`` (no batch dim).

        nn.Sequential (nested) is walked directly; any other module is traced with torch.fx
        and must be a plain chain. Weights are copied (later training of ``module`` does not
        change the lifted network). With ``verify`` the lifted forward is compared with
        ``module(x)`` on a random batch; a mismatch raises UnsupportedLayerError.
        Raises UnsupportedLayerError naming the first layer that cannot be lifted.
        """
        from lbi_engine.models.layer_lifting import ModuleWalker

        if not isinstance(module, nn.Module):
            raise InputError(f"from_module needs a torch.nn.Module, got {type(module).__name__}.")
        shape = _check_shape(input_shape)
        from lbi_engine.models.footprint import check_network_memory

        # sizes before any real tensor; a layer that does not fit the shape is named below
        check_network_memory(module, shape, f"network '{name or type(module).__name__}'",
                             shape_errors=False)
        _check_finite_weights(module, name or type(module).__name__)
        ref: Tensor | None = next(iter(module.parameters()), None)
        if ref is None:
            ref = next(iter(module.buffers()), None)
        dtype = ref.dtype if ref is not None and ref.is_floating_point() else torch.float32
        device = ref.device if ref is not None else torch.device("cpu")
        from lbi_engine.models.graph_lifting import NotAChain, lift_graph

        walker = ModuleWalker(torch.zeros(2, *shape, dtype=dtype, device=device))
        try:
            walker.walk(module)
        except NotAChain:  # residual additions or concatenation: lift the graph (§5.6)
            fields, rewrites = lift_graph(module, torch.zeros(2, *shape, dtype=dtype,
                                                          device=device),
                                          name or type(module).__name__)
            net = cls([LiftedLayer(*f) for f in fields], shape, name or type(module).__name__)
            net.rewrites = rewrites
            if verify:
                verify_against(net, module, what=f"module '{net.name}'")
            return net
        if not walker.entries:
            layers = [LiftedLayer(IdentityMap(shape), _identity(), "identity")]
        else:
            layers = group_layers(walker.entries)
        net = cls(layers, shape, name or type(module).__name__)
        net.rewrites = list(walker.rewrites)
        if verify:
            verify_against(net, module, what=f"module '{net.name}'")
        return net

    @classmethod
    def from_torchscript(cls, path: str | Path, input_shape: Sequence[int] | None = None,
                         name: str | None = None, *, allow_code: bool = False,
                         allow_pickle: bool = False) -> LiftedNetwork:
        """Lift a TorchScript archive (torch.jit.save).

        Loading TorchScript runs code stored in the file, so it needs ``allow_code=True``
        (alias ``allow_pickle``), the caller's consent for this call; UnsafeFileError
        otherwise. The file's own forward is never run (see lbi_engine.models.importers).
        """
        return load_torchscript_module(path, input_shape, name,
                                       allow_code=allow_code or allow_pickle)[0]

    @classmethod
    def from_onnx(cls, path: str | Path, input_shape: Sequence[int] | None = None,
                  name: str | None = None) -> LiftedNetwork:
        """Lift an ONNX model (parsed with the onnx package; no runtime needed)."""
        seq, shape = onnx_sequential(path, input_shape)
        return _with_reference(cls.from_module(seq, shape, name=name or Path(path).stem), seq)

    @classmethod
    def from_pt2(cls, path: str | Path, input_shape: Sequence[int] | None = None,
                 name: str | None = None) -> LiftedNetwork:
        """Lift a torch.export archive (torch.export.save) by reading its graph and weights;
        the program is never loaded or run (see :mod:`lbi_engine.models.pt2_import`)."""
        seq, shape = pt2_sequential(path, input_shape)
        p = Path(path)
        try:
            return _with_reference(cls.from_module(seq, shape, name=name or p.stem), seq)
        except UnsupportedLayerError as exc:
            raise UnsupportedLayerError(f"torch.export program {p.name!r}: {exc}") from exc


def _with_reference(net: LiftedNetwork, module: nn.Module) -> LiftedNetwork:
    """``net`` holding lbi's translation of the file it was lifted from (frozen, eval mode;
    from_module verified their forwards agree)."""
    net.reference = module.eval().requires_grad_(False)
    return net


def _identity() -> Any:
    from lbi_engine.activations import make_activation

    return make_activation("identity")


def load_torchscript_module(path: str | Path, input_shape: Sequence[int] | None = None,
                            name: str | None = None, *, allow_code: bool = False
                            ) -> tuple[LiftedNetwork, nn.Module]:
    """(LiftedNetwork, the nn.Sequential lbi rebuilt) from a TorchScript archive.

    Without ``allow_code`` the file is refused (:class:`UnsafeFileError`) before torch reads
    it (see :func:`lbi_engine.models.importers.torchscript_sequential`).
    """
    module, shape = torchscript_sequential(path, input_shape, allow_code=allow_code)
    # verified against the module lbi built from allow-listed layer types, never sm.forward
    net = LiftedNetwork.from_module(module, shape, name=name or Path(path).expanduser().stem,
                                    verify=True)
    return net, module
