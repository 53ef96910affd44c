"""Lift a module whose forward is a graph (residual additions, channel concatenation).

A chain is lifted by :class:`lbi_engine.models.layer_lifting.ModuleWalker`; when its torch.fx
walk meets a node that combines or reuses tensors it raises :class:`NotAChain`, and this
room traces the whole module with torch.fx and builds the lifted DAG of MATH.md §5.6:

* every value of the traced forward is, symbolically, a sum of affine images of lifted
  states, sum_k A_k x_{j_k} + b (a ``_Sum``): an affine layer composes into its one term;
* a proximal activation turns the sum into a new lifted layer with those inputs, so the ReLU
  after a residual addition is one layer x = ReLU(W2 x_mid + b2 + S x_in);
* ``a + b`` joins the two sums; ``torch.cat(.., dim=1)`` places each sum's terms in its
  channel slice (:class:`lbi_engine.operators.channels.ChannelSlotMap`);
* an affine layer after a sum of several terms, and a network output that is not the last
  state, first become a lifted layer with the identity activation (Psi = 0), so that each
  map is applied once (MobileNetV2's addition without activation, a Fire module's concat).
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import Tensor, fx, nn

from lbi_engine.errors import UnsupportedLayerError
from lbi_engine.models._decomposed_activations import (
    PRODUCT_FIX,
    fx_gate,
    product_why,
    refuse_gated_product,
)
from lbi_engine.models.fx_chain import (
    NotAChain,
    _fetch_attr,
    _is_helper,
    _LeafTracer,
    _module_for,
    _refuse,
)
from lbi_engine.models.layer_lifting import lift_module, refuse
from lbi_engine.operators import AffineMap, IdentityMap
from lbi_engine.operators.channels import ChannelSlotMap
from lbi_engine.operators.compose import compose

#: One lifted layer as ``LiftedLayer``'s fields (affine, activation, source, inputs, extra):
#: models.network builds the objects (it imports this room, not the other way round).
LayerFields = tuple[AffineMap, Any, str, tuple[int, ...], tuple[AffineMap, ...]]

_ADD = {operator.add, operator.iadd, torch.add, "add", "add_"}
_CAT = {torch.cat, torch.concat, torch.concatenate}
_MUL = {operator.mul, operator.imul, torch.mul, "mul", "mul_"}

#: The most terms one lifted sum may have. Every term is a map applied (and, for a channel
#: slot, a full-size tensor made) at each solver step, so a sum's cost grows with its terms
#: times its size; a DenseNet-201 block concatenates 49 inputs. Additions over shared states
#: are merged (below), so only a wide concatenation reaches it.
MAX_SUM_TERMS = 256


@dataclass
class _Sum:
    """sum_k maps[k].apply(x_{states[k]}) (a None map: the identity), and where it came from."""

    terms: list[tuple[int, AffineMap | None]]
    source: list[str] = field(default_factory=list)


def _same_terms(a: _Sum, b: _Sum) -> bool:
    """Whether two sums read the same states through the same map objects (x + x)."""
    return len(a.terms) == len(b.terms) and all(
        j == k and m is n for (j, m), (k, n) in zip(a.terms, b.terms, strict=True))


class GraphLifter:
    """Builds the lifted layers of a traced module on a zero batch of 2 (for the shapes)."""

    def __init__(self, example: Tensor) -> None:
        self.layers: list[LayerFields] = []
        self.shapes: list[tuple[int, ...]] = [tuple(example.shape[1:])]
        self.example = example
        #: the nodes whose output is known to be >= 0 (after ReLU-like activations, or a
        #: max-pool of such): a following max-pool's zero padding is then exact
        self._nonneg: set[fx.Node] = set()
        #: the MaxPool2d layers written as ReLU layers (as the chain's ModuleWalker.rewrites)
        self.rewrites: list[dict[str, Any]] = []

    # -- the symbolic values ---------------------------------------------------------------
    def _layer(self, s: _Sum, activation: Any) -> _Sum:
        from lbi_engine.limits import LAYERS_ENV, max_layers

        if len(self.layers) >= max_layers():
            raise UnsupportedLayerError(
                f"the network lifts to more than {max_layers():,} layers (at "
                f"{', '.join(s.source[-2:]) or 'the input'}); lbi lifts at most that many (set "
                f"{LAYERS_ENV} to allow more if the file is yours)")
        maps = [m if m is not None else IdentityMap(self.shapes[j]) for j, m in s.terms]
        self.layers.append((maps[0], activation, ", ".join(s.source) or "identity",
                            tuple(j for j, _ in s.terms), tuple(maps[1:])))
        self.shapes.append(maps[0].out_shape)
        return _Sum([(len(self.layers), None)])

    def _identity_layer(self, s: _Sum) -> _Sum:
        from lbi_engine.activations import make_activation

        return self._layer(s, make_activation("identity"))

    def _affine(self, s: _Sum, amap: AffineMap, label: str) -> _Sum:
        if len(s.terms) > 1:
            s = self._identity_layer(s)
        (j, m), = s.terms
        return _Sum([(j, amap if m is None else compose([m, amap]))], [*s.source, label])

    def _cat(self, parts: list[_Sum], channels: list[int]) -> _Sum:
        total, offset = sum(channels), 0
        terms: list[tuple[int, AffineMap | None]] = []
        source: list[str] = []
        for s, c in zip(parts, channels, strict=True):
            for j, m in s.terms:
                shape = m.out_shape if m is not None else self.shapes[j]
                slot = ChannelSlotMap(shape, total, offset)
                terms.append((j, slot if m is None else compose([m, slot])))
            source += s.source
            offset += c
        return _Sum(terms, list(dict.fromkeys([*source, "cat"])))

    def _join(self, first: fx.Node, second: fx.Node, sym: dict[fx.Node, _Sum],
              label: str) -> _Sum:
        """a + b. Terms that read the same state through the same map are merged into one
        scaled term (a value added to itself); where the two sums still read a common state
        through different maps (a diamond), each sum of several terms first becomes a
        lifted layer of its own (kept as that node's value, so a node is made a layer once),
        and repeated diamonds stay linear in size instead of reaching 2^depth terms."""
        a, b = sym[first], sym[second]
        shared = {j for j, _ in a.terms} & {j for j, _ in b.terms}
        if shared and not _same_terms(a, b):
            if len(a.terms) > 1:
                sym[first] = self._identity_layer(a)
            if len(sym[second].terms) > 1:
                sym[second] = self._identity_layer(sym[second])
            a, b = sym[first], sym[second]
        return _Sum(self._merged([*a.terms, *b.terms]),
                    list(dict.fromkeys([*a.source, *b.source, label])))

    def _merged(self, terms: list[tuple[int, AffineMap | None]]
                ) -> list[tuple[int, AffineMap | None]]:
        """Equal terms (one state, one map object) as one term scaled by their count."""
        from lbi_engine.operators.scaled import scaled

        counts: dict[tuple[int, int], int] = {}
        first: dict[tuple[int, int], tuple[int, AffineMap | None]] = {}
        for j, m in terms:
            key = (j, id(m))
            counts[key] = counts.get(key, 0) + 1
            first.setdefault(key, (j, m))
        out: list[tuple[int, AffineMap | None]] = []
        for key, (j, m) in first.items():
            n = counts[key]
            if n == 1:
                out.append((j, m))
            else:
                out.append((j, scaled(m if m is not None else IdentityMap(self.shapes[j]),
                                      float(n), float(n))))
        return out

    def _check_terms(self, s: _Sum, node: fx.Node, where: str, position: int) -> _Sum:
        if len(s.terms) > MAX_SUM_TERMS:
            _refuse(node, where, position, f"it sums or concatenates {len(s.terms):,} inputs "
                    f"(at most {MAX_SUM_TERMS} are lifted: each is applied, at full size, at "
                    "every solver step)", "Concatenate fewer tensors at a time, or fewer "
                    "channels.")
        return s

    # -- the walk ----------------------------------------------------------------------------
    def lift(self, module: nn.Module, where: str) -> list[LayerFields]:
        try:
            gm = fx.GraphModule(module, _LeafTracer().trace(module))
        except Exception as exc:  # fx raises many types for untraceable code
            raise UnsupportedLayerError(
                f"Module '{where}' ({type(module).__name__}) combines tensors and torch.fx "
                f"cannot trace its forward ({type(exc).__name__}: {exc}).") from exc
        env: dict[fx.Node, Any] = {}
        sym: dict[fx.Node, _Sum] = {}
        for position, node in enumerate(gm.graph.nodes):
            if node.op == "placeholder":
                if sym:
                    _refuse(node, where, position, "the module takes more than one input",
                            "Only single-input networks can be lifted.")
                env[node], sym[node] = self.example, _Sum([(0, None)])
            elif node.op == "get_attr":
                env[node] = _fetch_attr(gm, node.target)
            elif node.op == "output":
                out = node.args[0]
                if not isinstance(out, fx.Node) or out not in sym:
                    _refuse(node, where, position, "the module does not return one tensor",
                            "Return a single tensor.")
                return self._finish(sym[out])
            elif _is_helper(node, env):
                args = fx.node.map_arg(node.args, lambda n: env[n])
                kwargs = fx.node.map_arg(node.kwargs, lambda n: env[n])
                env[node] = getattr(args[0], node.target)(*args[1:], **kwargs) \
                    if node.op == "call_method" else node.target(*args, **kwargs)
            else:
                self._node(node, gm, env, sym, where, position)
        raise UnsupportedLayerError(f"Module '{where}' has no output node.")

    def _node(self, node: fx.Node, gm: fx.GraphModule, env: dict[fx.Node, Any],
              sym: dict[fx.Node, _Sum], where: str, position: int) -> None:
        tensors = [n for n in node.all_input_nodes if n in sym]
        label = str(node.target) if node.op == "call_module" else node.name
        if node.op == "call_function" and node.target in _CAT:
            return self._cat_node(node, env, sym, where, position)
        if len(tensors) > 1:
            if node.target not in _ADD or len(tensors) != 2 or node.kwargs.get("alpha", 1) != 1:
                if node.target in _MUL and len(tensors) == 2:
                    _refuse_gated(node, gm, tensors, f"Node '{node.name}' in '{where}'")
                    _refuse(node, where, position, product_why([t.name for t in tensors]),
                            f"{PRODUCT_FIX}.")
                _refuse(node, where, position, "it combines several tensors in a way other "
                        "than a sum a + b or a channel concatenation",
                        "Write the combination as an addition or torch.cat(.., dim=1).")
            first, second = (cast(fx.Node, n) for n in node.args[:2])
            env[node] = env[first] + env[second]
            sym[node] = self._check_terms(self._join(first, second, sym, label), node, where,
                                          position)
            return
        if not tensors:
            _refuse(node, where, position, "it does not use the network's input",
                    "Only operations on the data path can be lifted.")
        chain = tensors[0]
        sub = _module_for(node, gm, env, chain, where, position)
        if isinstance(sub, nn.AdaptiveMaxPool2d) and env[chain].dim() == 4:
            from lbi_engine.models.maxpool_relu import as_max_pool

            sub = as_max_pool(sub, (int(env[chain].shape[2]), int(env[chain].shape[3])))
        from lbi_engine.models.maxpool_relu import REWRITE_MAXPOOL

        pooled = isinstance(sub, nn.MaxPool2d) and REWRITE_MAXPOOL.get()
        if isinstance(sub, nn.MaxPool2d) and pooled:
            from lbi_engine.models.maxpool_relu import (
                maxpool_as_relu,
                rewrite_record,
                why_not_rewritable,
            )

            x = env[chain]
            why = why_not_rewritable(sub, chain in self._nonneg)
            if why is not None or x.dim() != 4:
                refuse(label, sub, position, "its exact ReLU rewrite does not apply: "
                       f"{why or 'it needs (C, H, W) samples'}", "Put it after a ReLU, or use "
                       "padding=0 and ceil_mode=False, or nn.AvgPool2d (affine).")
            from lbi_engine.models.footprint import check_rewrite_memory

            check_rewrite_memory(sub, tuple(x.shape[1:]), label, x.element_size())
            rewritten = maxpool_as_relu(sub, int(x.shape[1]), nonneg_input=chain in self._nonneg,
                                        in_hw=(int(x.shape[2]), int(x.shape[3])))
            steps = list(rewritten.to(x.dtype).named_children())
            self.rewrites.append(rewrite_record(sub, label, tuple(x.shape[1:])))
        else:
            steps = [("", sub)]
        x, s = env[chain], sym[chain]
        for cname, step in steps:
            name = f"{label}.relu{cname}" if cname else label
            lifted = lift_module(step, tuple(x.shape[1:]), name, position)
            with torch.no_grad():
                y = step(x)
            if not isinstance(y, Tensor) or y.shape[0] != x.shape[0]:
                refuse(name, step, position, "its output is not one tensor with the batch "
                       "dimension first", "Use layers that map (B, ...) to (B, ...).")
            if isinstance(lifted, AffineMap):
                if len(s.terms) > 1 and s is sym[chain]:  # one layer for every reader of it
                    s = sym[chain] = self._identity_layer(s)
                if lifted.dtype not in (None, x.dtype):
                    lifted = lifted.to(dtype=x.dtype)
                s = self._affine(s, lifted, f"{name}:{type(step).__name__}")
            else:
                s.source.append(f"{name}:{type(step).__name__}")
                s = self._layer(s, lifted)
            x = y
        if pooled:
            with torch.no_grad():
                want = sub(env[chain])
            if tuple(x.shape) != tuple(want.shape) or not torch.allclose(x, want, atol=1e-5,
                                                                           rtol=1e-4):
                refuse(label, sub, position, "its exact ReLU rewrite does not reproduce it on "
                       "this input", "Report this layer configuration; nn.AvgPool2d works.")
        # a ReLU-like activation (range [0, ...)) or a max of such values: >= 0
        lower = getattr(lifted, "lower", None)
        if (pooled and chain in self._nonneg) or (
                not isinstance(lifted, AffineMap) and lower is not None and lower >= 0):
            self._nonneg.add(node)
        env[node], sym[node] = x, s

    def _cat_node(self, node: fx.Node, env: dict[fx.Node, Any], sym: dict[fx.Node, _Sum],
                  where: str, position: int) -> None:
        items = node.args[0] if node.args else node.kwargs.get("tensors")
        dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim", 0)
        if not isinstance(items, (list, tuple)) or not all(
                isinstance(n, fx.Node) and n in sym for n in items):
            _refuse(node, where, position, "it concatenates something other than data tensors",
                    "Concatenate outputs of layers only.")
        values = [env[n] for n in items]
        rank = values[0].dim()
        if not isinstance(dim, int) or dim % rank != 1:
            _refuse(node, where, position, f"it concatenates along dim {dim}; lbi lifts the "
                    "concatenation of channels (dim=1) only", "Use torch.cat(.., dim=1).")
        parts = [sym[n] for n in items]
        self._check_terms(_Sum([t for s in parts for t in s.terms]), node, where, position)
        env[node] = torch.cat(values, dim=1)
        sym[node] = self._cat(parts, [int(v.shape[1]) for v in values])

    def _finish(self, s: _Sum) -> list[LayerFields]:
        if s.terms != [(len(self.layers), None)] or not self.layers:
            self._identity_layer(s)
        return self.layers


def _refuse_gated(node: fx.Node, gm: fx.GraphModule, tensors: list[fx.Node], where: str
                  ) -> None:
    """x * sigmoid(x) and its kind: refused as the activation it is (SiLU, ...), not as a
    combination of tensors that a rewrite as a sum could fix."""
    for x, gate in (tensors, tensors[::-1]):
        replay = fx_gate(x, gate, gm)
        if replay is not None:
            refuse_gated_product(replay, where)


def lift_graph(module: nn.Module, example: Tensor,
               where: str) -> tuple[list[LayerFields], list[dict[str, Any]]]:
    """The lifted layers (a DAG) of ``module`` traced with torch.fx on ``example`` (a zero
    batch of 2), and the max-pools rewritten as ReLU layers on the way; UnsupportedLayerError
    naming the node that cannot be lifted."""
    lifter = GraphLifter(example)
    return lifter.lift(module, where), lifter.rewrites


__all__ = ["NotAChain", "lift_graph"]
