"""Networks that add or concatenate tensors, lifted as a DAG (MATH.md §5.6).

* the lifted forward equals the torch forward for torchvision's own blocks (resnet's
  BasicBlock with identity and 1x1-conv+BN shortcuts, mobilenet_v2's InvertedResidual with
  ReLU6 and depthwise convolutions, squeezenet's Fire), built from the module, from
  torch.onnx.export and from torch.export.save;
* the joint method's gradient equals autograd of the lifted objective, its step bounds
  reduce to the chain's, and at its limit every block is the exact minimiser of its convex
  block problem solved independently with cvxpy (a residual and a concatenating network);
* methods that only know chains refuse graph networks in one line.
"""

from __future__ import annotations

import contextlib
import io
import warnings

import numpy as np
import pytest
import torch
from torch import nn

from lbi_engine.errors import InputError
from lbi_engine.models.network import LiftedNetwork
from lbi_engine.problem import InversionProblem
from lbi_engine.regularisers import make_regulariser
from lbi_engine.solvers import StopRule, final, solve
from lbi_engine.solvers.joint.fista import JointFista, graph_bounds

torchvision = pytest.importorskip("torchvision")


def _randomise_bn(module: nn.Module, seed: int = 0) -> nn.Module:
    """Random running statistics and affine BN parameters, so BN folding is exercised."""
    g = torch.Generator().manual_seed(seed)
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.rand(c, generator=g) - 0.5)
            m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
            m.bias.data.copy_(torch.rand(c, generator=g) - 0.5)
    return module.eval()


def _blocks() -> dict[str, tuple[nn.Module, tuple[int, ...]]]:
    from torchvision.models.mobilenetv2 import InvertedResidual
    from torchvision.models.resnet import BasicBlock
    from torchvision.models.squeezenet import Fire

    torch.manual_seed(0)
    down = nn.Sequential(nn.Conv2d(4, 8, 1, stride=2, bias=False), nn.BatchNorm2d(8))
    return {
        "resnet-basic": (nn.Sequential(nn.Conv2d(3, 4, 3, padding=1, bias=False),
                                       nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                                       BasicBlock(4, 4), BasicBlock(4, 8, 2, down)), (3, 8, 8)),
        "mobilenet-inverted": (nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU6(),
                                             InvertedResidual(8, 8, 1, 2),
                                             InvertedResidual(8, 8, 1, 3)), (3, 8, 8)),
        "squeezenet-fire": (nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(inplace=True),
                                          Fire(8, 4, 4, 4), Fire(8, 4, 6, 6)), (3, 8, 8)),
        # resnet's stem: its padded max-pool follows a ReLU, so zero padding is exact
        "resnet-stem": (nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1, bias=False),
                                      nn.BatchNorm2d(4), nn.ReLU(inplace=True),
                                      nn.MaxPool2d(3, 2, 1), BasicBlock(4, 4)), (3, 12, 12)),
    }


def _check_forward(net: LiftedNetwork, module: nn.Module, shape: tuple[int, ...],
                   tol: float) -> None:
    x = torch.randn(4, *shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    with torch.no_grad():
        want = module.double().eval()(x)
        got = net.to(dtype=torch.float64)(x)
    assert not net.is_chain
    assert float((got - want).abs().max()) <= tol * float(want.abs().max())


@pytest.mark.parametrize("name", ["resnet-basic", "mobilenet-inverted", "squeezenet-fire",
                                  "resnet-stem"])
def test_torchvision_blocks_lift_from_the_module_with_its_forward(name):
    module, shape = _blocks()[name]
    module = _randomise_bn(module).double()
    net = LiftedNetwork.from_module(module, shape)
    _check_forward(net, module, shape, 1e-12)
    summary = net.summary()
    assert any(len(row["inputs"]) > 1 for row in summary)  # something merges
    if name == "resnet-basic":  # the ReLU after each addition is one layer with two inputs
        assert [len(row["inputs"]) for row in summary] == [1, 1, 2, 1, 2]
        assert all(row["activation"] == "relu" for row in summary)
    if name == "mobilenet-inverted":  # ReLU6 is the clip; no activation after the addition
        assert {row["activation"] for row in summary} == {"clip", "identity"}
    if name == "resnet-stem":  # MaxPool2d(3, 2, 1): four ReLU levels, listed as a rewrite
        assert [r["lifted_layers_added"] for r in net.rewrites] == [4]
        assert net.rewrites[0]["padding"] == [1, 1]


def test_a_padded_max_pool_in_a_graph_without_a_relu_before_it_is_refused_by_name():
    from torchvision.models.resnet import BasicBlock

    from lbi_engine.errors import UnsupportedLayerError

    module = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.MaxPool2d(3, 2, 1),
                           BasicBlock(4, 4)).eval()
    with pytest.raises(UnsupportedLayerError, match="padding=.*does not follow a ReLU"):
        LiftedNetwork.from_module(module, (3, 8, 8))


def _export_onnx(module: nn.Module, shape: tuple[int, ...], path) -> None:
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, (torch.randn(1, *shape),), str(path))  # the default way


@pytest.mark.parametrize("name", ["resnet-basic", "mobilenet-inverted", "squeezenet-fire",
                                  "resnet-stem"])
@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_torchvision_blocks_lift_from_default_exports(tmp_path, name, fmt):
    pytest.importorskip("onnx")
    module, shape = _blocks()[name]
    module = _randomise_bn(module).float()
    path = tmp_path / f"{name}.{fmt}"
    if fmt == "onnx":
        _export_onnx(module, shape, path)
        net = LiftedNetwork.from_onnx(path)
    else:
        torch.export.save(torch.export.export(module, (torch.randn(1, *shape),)), str(path))
        net = LiftedNetwork.from_pt2(path)
    _check_forward(net, _randomise_bn(module), shape, 1e-5)  # float32 weights in the files


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["module", "onnx", "pt2"])
def test_torchvision_slices_lift(tmp_path, fmt):
    """resnet18 stem (no maxpool) + layer1, mobilenet_v2 features[:5], squeezenet1_1 Fires."""
    models = torchvision.models
    r = models.resnet18(weights=None)
    m = models.mobilenet_v2(weights=None)
    s = models.squeezenet1_1(weights=None)
    slices = [nn.Sequential(r.conv1, r.bn1, r.relu, r.layer1), m.features[:5],
              nn.Sequential(s.features[0], s.features[1], s.features[3], s.features[4])]
    for k, module in enumerate(slices):
        module = _randomise_bn(module, k).float()
        shape = (3, 32, 32)
        if fmt == "module":
            net = LiftedNetwork.from_module(module, shape)
        elif fmt == "onnx":
            _export_onnx(module, shape, tmp_path / f"{k}.onnx")
            net = LiftedNetwork.from_onnx(tmp_path / f"{k}.onnx")
        else:
            p = tmp_path / f"{k}.pt2"
            torch.export.save(torch.export.export(module.eval(), (torch.randn(1, *shape),)),
                              str(p))
            net = LiftedNetwork.from_pt2(p)
        _check_forward(net, _randomise_bn(module, k), shape, 1e-5)


# -- the joint method on graphs ---------------------------------------------------------------
class _ResBlock(nn.Module):
    def __init__(self, n: int) -> None:
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(n, n), nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.fc2(torch.relu(self.fc1(x))) + x)


class _Branches(nn.Module):
    def __init__(self, n: int, m: int) -> None:
        super().__init__()
        self.a, self.b = nn.Linear(n, m), nn.Linear(n, m)

    def forward(self, x):
        return torch.cat([torch.relu(self.a(x)), torch.relu(self.b(x))], dim=1)


def _small(kind: str) -> LiftedNetwork:
    torch.manual_seed(1 if kind == "residual" else 2)
    middle = _ResBlock(12) if kind == "residual" else _Branches(12, 6)
    module = nn.Sequential(nn.Flatten(), nn.Linear(16, 12), nn.ReLU(), middle,
                           nn.Linear(12, 8)).double()
    with torch.no_grad():  # positive-leaning weights: most units active on [0, 1] images
        for p in module.parameters():
            p.add_(0.05)
    return LiftedNetwork.from_module(module, (1, 4, 4))


def _problem(net: LiftedNetwork, alpha: float = 0.02) -> InversionProblem:
    x = torch.zeros(1, 1, 4, 4, dtype=torch.float64)
    x[..., 1:3, 1:4] = 1.0
    y = net(x) + 0.01 * torch.randn(1, 8, generator=torch.Generator().manual_seed(0),
                                    dtype=torch.float64)
    return InversionProblem(net, y, make_regulariser("tv"), alpha, x_true=x)


@pytest.mark.parametrize("kind", ["residual", "concat"])
def test_graph_gradient_is_autograd_of_the_lifted_objective(kind):
    net = _small(kind)
    problem = _problem(net)
    g = torch.Generator().manual_seed(4)
    x0 = torch.rand(1, 1, 4, 4, generator=g, dtype=torch.float64)
    # interior points of dom Psi (x > 0), where the objective is differentiable
    xs = [x0] + [s + 0.2 + torch.rand(s.shape, generator=g, dtype=torch.float64)
                 for s in net.forward_states(x0)[:-1]]
    grad = JointFista(problem, [x.clone() for x in xs]).gradient(xs)
    leaves = [x.clone().requires_grad_(True) for x in xs]
    problem.objective_parts(leaves[0], leaves[1:])["bregman"].sum().backward()
    for mine, leaf in zip(grad, leaves, strict=True):
        assert torch.allclose(mine, leaf.grad, atol=1e-12, rtol=1e-12)


@pytest.mark.parametrize("kind", ["residual", "concat"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_graph_records_objective_is_the_problems(kind, dtype):
    """The joint method's records on a graph (the step's maps, the in-domain hidden terms,
    the forward pass from the first layer's lifted pre-activation) equal the problem's own
    objective_parts at iterates off the forward states."""
    y_delta = _problem(_small(kind)).y_delta.to(dtype)
    net = _small(kind).to(dtype=dtype)
    problem = InversionProblem(net, y_delta, make_regulariser("tv"), 0.02)
    g = torch.Generator().manual_seed(5)
    x0 = torch.rand(1, 1, 4, 4, generator=g, dtype=torch.float64).to(dtype)
    xs = [x0] + [(s + 0.3 * torch.rand(s.shape, generator=g, dtype=torch.float64).to(dtype)
                  - 0.1).clamp_min(0) for s in net.forward_states(x0)[:-1]]
    mine = JointFista(problem, [x.clone() for x in xs]).objective_parts()
    theirs = problem.objective_parts(xs[0], xs[1:])
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    assert float(theirs["bregman"][0, :-1].sum()) > 1e-3  # the hidden terms are not all zero
    for key in ("bregman", "reg", "total", "discrepancy"):
        torch.testing.assert_close(mine[key], theirs[key], rtol=tol, atol=tol)


def test_graph_bounds_reduce_to_the_chain_bounds_and_dominate_the_hessian():
    chain = LiftedNetwork.from_module(nn.Sequential(nn.Linear(6, 5), nn.ReLU(), nn.Linear(5, 4),
                                                    nn.ReLU(), nn.Linear(4, 3)).double(), (6,))
    n = [float(layer.affine.norm()) for layer in chain.layers]
    want = [n[0] ** 2 + n[0]] + [1 + n[i] ** 2 + n[i - 1] + n[i] for i in (1, 2)]
    assert np.allclose(graph_bounds(chain), want, rtol=1e-14)
    # a graph: diag(m) - H is positive semidefinite for the Hessian H of the smooth part at a
    # point where every ReLU is active (sigma' = 1: the largest H)
    net = _small("residual")
    dims = [16] + [int(np.prod(lay.affine.out_shape)) for lay in net.layers[:-1]]
    offsets = np.cumsum([0] + dims)
    h = np.zeros((offsets[-1], offsets[-1]))
    for i in range(len(net.layers)):
        rows = [(j, amap.dense().numpy()) for j, amap in net.terms(i)]
        for j, a in rows:
            for k, b in rows:
                h[offsets[j]:offsets[j + 1], offsets[k]:offsets[k + 1]] += a.T @ b
            if i + 1 < len(net.layers):
                o = slice(offsets[i + 1], offsets[i + 2])
                h[o, offsets[j]:offsets[j + 1]] -= a
                h[offsets[j]:offsets[j + 1], o] -= a.T
        if i + 1 < len(net.layers):
            o = slice(offsets[i + 1], offsets[i + 2])
            h[o, o] += np.eye(dims[i + 1])
    m = np.repeat(graph_bounds(net), dims)
    assert np.linalg.eigvalsh(np.diag(m) - h).min() >= -1e-10


def cvx_pre_activation(terms: list, j: int, v: object, vals: list) -> object:
    """sum_k A_k (v if k == j else vals[k]) + b_k in cvxpy, from the dense matrices."""
    z = 0
    for k, amap in terms:
        a = amap.dense().numpy()
        b = amap.apply(torch.zeros(1, *amap.in_shape, dtype=torch.float64)).reshape(-1)
        z = z + (a @ v if k == j else a @ vals[k]) + b.numpy()
    return z


def _cvx_block_minimiser(net: LiftedNetwork, problem: InversionProblem, xs: list, j: int,
                         hidden_weight: float = 1.0):
    """argmin over x_j of the lifted objective with the other blocks fixed (convex in x_j:
    MATH.md §5.6), by cvxpy, written from the definitions (MATH.md §2.3), every hidden
    layer's Bregman term times ``hidden_weight`` (MATH.md §5.7)."""
    import cvxpy as cp

    from tests.engine._solver_cases import cvx_tv

    vals = [x.reshape(-1).numpy() for x in xs] + [problem.y_delta.reshape(-1).numpy()]
    v = cp.Variable(vals[j].size, nonneg=j > 0)
    objective = 0
    for i, layer in enumerate(net.layers):
        terms = net.terms(i)
        if j != i + 1 and all(k != j for k, _ in terms):
            continue
        z = cvx_pre_activation(terms, j, v, vals)
        out = v if j == i + 1 else vals[i + 1]
        w = hidden_weight if i + 1 < len(net.layers) else 1.0
        if layer.activation.name == "relu":
            objective += w * (0.5 * cp.sum_squares(out) + 0.5 * cp.sum_squares(cp.pos(z))
                              - cp.sum(cp.multiply(out, z)))
        else:
            objective += w * 0.5 * cp.sum_squares(out - z)
    if j == 0:
        objective += problem.alpha * cvx_tv(v, 4, 4)
    # tight gaps: a weighted objective (hidden_weight 100) is 100x larger at the same x error
    cp.Problem(cp.Minimize(objective)).solve(solver="CLARABEL", tol_gap_abs=1e-9,
                                             tol_gap_rel=1e-9, tol_feas=1e-9)
    return v.value


@pytest.mark.parametrize("kind", ["residual", "concat"])
@pytest.mark.parametrize("hidden_weight", [1.0, 100.0])
def test_joint_limit_is_the_minimiser_of_every_block_by_cvxpy(kind, hidden_weight):
    """With hidden weight 100 (what alpha "auto" raises it to where its target is out of
    reach) the limit minimises the weighted objective, in the network's own states (the
    rescaling is undone at the border)."""
    pytest.importorskip("cvxpy")
    net = _small(kind)
    problem = _problem(net)
    record = final(solve(problem, "joint", stop=StopRule(max_iter=40000, tol=1e-13),
                         options={"hidden_weight": hidden_weight}))
    weight = hidden_weight
    assert record.hidden_weight == weight
    xs = [record.x, *record.aux]
    assert record.extras.get("steps") == "accelerated"
    for j, x in enumerate(xs):
        want = _cvx_block_minimiser(net, problem, xs, j, weight)
        got = x.reshape(-1).numpy()
        assert np.linalg.norm(got - want) <= 1e-5 * max(1.0, np.linalg.norm(want)), j
    # some ReLU constraints x >= 0 are active at the limit (the prox part is exercised)
    assert any(bool((a == 0).any()) for a in record.aux)


def test_pre_activation_of_a_merging_layer_needs_all_its_states():
    net = _small("residual")
    x = torch.rand(2, 1, 4, 4, dtype=torch.float64)
    states = [x, *net.forward_states(x)]
    merging = next(i for i in range(len(net)) if len(net.terms(i)) > 1)
    with pytest.raises(InputError, match="pre_activation_of"):
        net.pre_activation(merging, states[merging])
    z = net.pre_activation_of(merging, states)
    assert torch.allclose(net.layers[merging].activation.sigma(z), states[merging + 1])


def test_chain_only_methods_refuse_graph_networks_in_one_line():
    problem = _problem(_small("residual"))
    for method in ("landweber", "one-layer"):  # layer-wise runs over graphs (its own tests)
        with pytest.raises(InputError, match="adds or concatenates tensors") as info:
            solve(problem, method)
        assert "\n" not in str(info.value)
    with pytest.raises(InputError, match="use method 'joint'"):
        list(solve(problem, "joint", options={"steps": "paper"}))
    assert final(solve(problem, "auto", stop=StopRule(max_iter=5))).method == "joint"
