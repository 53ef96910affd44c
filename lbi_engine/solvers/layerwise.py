"""Sequential layer-wise inversion (the paper's remark; MATH.md §5.5; docs/LAYERWISE.md).

Stage l = L .. 2 estimates the auxiliary variable x_{l-1} from the previous stage's estimate
x_l (x_L = y_delta), keeping the lifted Bregman loss and a learned Gaussian feature prior:

    x_{l-1} = argmin_h B_{Psi_l}(x_l, W_l h + b_l) + w_{l-1} R_{l-1}(h) + iota_{dom Psi_{l-1}}(h),
    R(h) = 1/2 (h - mu)^T Sigma^{-1} (h - mu),  w = sigma^2 (or layer_alphas when given),

solved by FISTA (``_feature_stage.py``). The last stage solves the input problem
B_{Psi_1}(x_1, W_1 x + b_1) + alpha R(x) with the user's regulariser (``pdhg``'s block), alpha
from the discrepancy principle on the measured code (``alpha/stage.py``) unless
``input_alpha="given"``. Without feature priors a network with hidden layers is refused
before anything runs: the stages are then under-determined and return noise (FINDINGS §1).

Over a graph (residual additions, concatenation: MATH.md §5.6) the stage for state j fits
every node l that reads x_j, sum_l B_{Psi_l}(x_l^est, A_{l,j} h + c_{l,j}) with c_{l,j} from
the node's other inputs at their current estimates (``ConsumerStage``); where a node reads an
earlier state beside x_j, two backward sweeps run (the first takes the forward states of the
back-projection for the states not yet estimated, the second the first sweep's estimates).
A chain run by that code gives the chain's iterates exactly (tested).

The stages share the run's iteration budget: each gets the budget left divided by the stages
left (``inner_max_iter`` caps the intermediate ones instead). Iteration numbers continue
across stages; every record names its stage, and ``extras["stages"]`` lists each finished
stage's iterations, weight and stop reasons.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from lbi_engine.errors import InputError
from lbi_engine.protocols import Network, Problem
from lbi_engine.settings.solver import SolverOptions
from lbi_engine.solvers._feature_stage import (
    RELATIVE_FLOOR,
    Consumer,
    ConsumerStage,
    GaussianStage,
    stage_weights,
)
from lbi_engine.solvers._monitor import RunMonitor
from lbi_engine.solvers.alpha.stage import search_alpha
from lbi_engine.solvers.base import IterateRecord, StopReason, StopRule
from lbi_engine.solvers.choice import AlphaChoice
from lbi_engine.solvers.driver import Changes, Method, iterate, run
from lbi_engine.solvers.joint.start import backprojection_start
from lbi_engine.solvers.one_layer.method import BlockMethod, make_block

NO_PRIOR = (
    "layer-wise inversion of {name!r} needs a learned prior on its {n} intermediate feature "
    "variable(s): with only the activations' domains as prior the stages are under-determined "
    "and the result is noise. Fit one from clean sample inputs with `lbi feature-prior "
    "NETWORK --samples FILE.npy --out PRIOR` and pass it (--feature-prior PRIOR), or use "
    "method 'joint'."
)


def check_ready(problem: Problem) -> None:
    """Raises InputError (before anything runs) when layer-wise cannot give a sound result."""
    if problem.depth == 1:
        return
    priors = getattr(problem, "feature_priors", None)
    if priors is None:
        raise InputError(NO_PRIOR.format(name=getattr(problem.network, "name", "network"),
                                         n=problem.depth - 1))
    priors.check_network(problem.network)
    _check_input_stage(problem.network)
    stage_weights(problem)  # raises when neither a noise level nor layer_alphas is known


def _layerwise(problem: Problem, options: SolverOptions, init: dict[str, Any],
               monitor: RunMonitor, *, graph: bool | None = None) -> Iterator[IterateRecord]:
    """``graph``: run the stages over the network's graph (default: when it is not a chain;
    True on a chain runs the same iterates by the graph's code, which a test checks)."""
    check_ready(problem)
    layers = problem.network.layers
    depth = len(layers)
    stop = monitor.stop
    weights, weight_rule = stage_weights(problem) if depth > 1 else ([], "")
    first_iteration = monitor.iteration
    stages: list[dict[str, Any]] = []
    monitor.extras["stages"] = stages
    if depth > 1:
        monitor.extras["weight_rule"] = weight_rule
    graph = not getattr(problem.network, "is_chain", True) if graph is None else graph
    with torch.no_grad():
        x0 = init.get("x", problem.zeros_input())
        warm_aux = list(init["aux"]) if init.get("aux") else None
        # A graph's stage for state j also reads the other inputs of the nodes that read x_j
        # (a residual's shortcut): those after j are estimated already, those before are the
        # forward states of the joint method's start, the back-projection of the code, the
        # best guess a single pass gives (docs/LAYERWISE.md, "Graphs"); a warm start's own.
        guess = x0 if warm_aux or not graph or "x" in init else backprojection_start(problem)
        aux = warm_aux or problem.forward_aux(guess)
    data = problem.y_delta

    def stage_cap(left: int, intermediate: bool) -> int:
        if intermediate and options.inner_max_iter:
            return int(options.inner_max_iter)
        remaining = stop.max_iter - (monitor.iteration - first_iteration)
        return max(0, -(-remaining // left))

    sweeps = _sweeps(problem.network) if graph else 1
    for sweep in range(sweeps):
        for index in range(depth - 1, 0, -1):
            prior = problem.feature_priors.layers[index - 1]
            below = layers[index - 1].activation
            name = f"layer {index + 1}/{depth}"
            if sweeps > 1:
                name += f" (sweep {sweep + 1}/{sweeps})"
            left = (sweeps - 1 - sweep) * (depth - 1) + index + 1  # stages left, input's too
            _start_stage(monitor, name, _stage_rule(stop, stage_cap(left, True)))
            with torch.no_grad():
                start = warm_aux[index - 1] if warm_aux else \
                    aux[index - 1] if sweep else prior.mean_like(aux[index - 1])
            solver: GaussianStage
            if graph:  # the nodes that read state `index`, at the current estimates (§5.6)
                with torch.no_grad():
                    consumers = _consumers(problem.network, index,
                                           [guess, *aux, problem.y_delta])
                solver = ConsumerStage(consumers, below, prior, weights[index - 1],
                                       options.layer_tikhonov, options.step_scale, start)
                columns = [c.layer for c in consumers]
            else:
                solver = GaussianStage(layers[index], below, prior, data, weights[index - 1],
                                       options.layer_tikhonov, options.step_scale, start)
                columns = [index]
            stage = FeatureStage(solver, problem, x0, aux, index, columns)
            yield stage.record(monitor)
            yield from iterate(stage, monitor)
            aux[index - 1] = data = solver.x
            stages.append(_stage_summary(monitor, name, solver.weight, weight_rule,
                                         restarts=solver.restarts))
            if graph:
                stages[-1]["consumers"] = [c + 1 for c in columns]  # 1-based, as the names
            if _run_stopped(monitor):
                yield stage.record(monitor, final=True)
                return
            if stage.reported != monitor.iteration:  # every stage ends with a record of it
                yield stage.record(monitor)

    # Input stage: the perceptron problem with the user's regulariser.
    name = f"layer 1/{depth}"
    _start_stage(monitor, name, _with_cap(stop, stage_cap(1, False)))
    alpha, rule, dual = float(problem.alpha), "given", init.get("dual")
    delta = _delta(problem)
    searched = options.input_alpha in ("quasi-optimality", "discrepancy")
    if depth > 1 and searched and delta is not None:
        monitor.watch.start()
        time_left = None if stop.time_budget is None else \
            max(stop.time_budget - monitor.watch.elapsed, 1e-9)
        found = search_alpha(problem, data, delta, options.eta, options, x0, stop.tol,
                             monitor.cancel, budget=monitor.stop.max_iter, time_budget=time_left,
                             rule=options.input_alpha)
        monitor.watch.pause()
        monitor.iteration += found.iterations
        x0, dual, alpha = found.x, found.dual, found.alpha
        rule = "quasi-optimality (first local minimum)" if options.input_alpha != "discrepancy" \
            else f"discrepancy principle (eta {options.eta:g})"
        monitor.extras["alpha_search"] = [list(t) for t in found.trail]
        if found.cancelled:
            monitor.finish(monitor.active.clone(), StopReason.CANCELLED)
        if found.saturated:
            rule += "; the code discrepancy saturates above eta delta: alpha by " \
                    "quasi-optimality among the alphas tried"
        if found.exhausted:
            rule += "; search cut short by the iteration or time budget"
    elif depth > 1 and searched:
        rule = "given (no noise level known)"
    staged = problem if alpha == problem.alpha else dataclasses.replace(problem, alpha=alpha)
    monitor.problem = staged
    monitor.choice = AlphaChoice(alpha, rule)
    block = make_block(layers[0], staged, options, x0, dual)
    monitor.extras.update(tau_x=block.tau_x, tau_z=block.tau_z, steps=block.rule)

    method = BlockMethod(block, data, aux)
    yield method.record(monitor)
    yield from iterate(method, monitor)
    stages.append(_stage_summary(monitor, name, alpha, rule))
    yield method.record(monitor, final=True)



run_layerwise = functools.partial(run, "layerwise", _layerwise)

def _delta(problem: Problem) -> Tensor | None:
    """Per-sample ||y_delta - y|| for the discrepancy principle, floored as the weights are."""
    if problem.delta is None:
        return None
    batch = problem.batch
    delta = torch.as_tensor(problem.delta, dtype=problem.dtype, device=problem.device)
    delta = delta.reshape(-1).expand(batch)
    m = math.prod(problem.y_delta.shape[1:])
    rms = problem.y_delta.reshape(batch, -1).pow(2).mean(dim=1).sqrt()
    return torch.maximum(delta, RELATIVE_FLOOR * rms * math.sqrt(m))


def _with_cap(stop: StopRule, cap: int) -> StopRule:
    """The run's rule with a stage's cap (at least one iteration, so a stage whose budget the
    earlier stages used up still reports its own stop reason: max_iterations)."""
    return dataclasses.replace(stop, max_iter=max(int(cap), 1))


def _stage_summary(monitor: RunMonitor, name: str, weight: Tensor | float, rule: str,
                   restarts: int = 0) -> dict[str, Any]:
    """A finished stage: its iterations, the weight of its prior (the input stage: alpha)
    and the rule that chose it, so a record says which alpha ran in every stage."""
    weight_list = weight.tolist() if isinstance(weight, Tensor) else [float(weight)]
    return {"stage": name, "iterations": monitor.iteration - monitor.start_iteration,
            "weight": weight_list, "weight_rule": rule, "restarts": restarts,
            "stop_reasons": [r or StopReason.FINISHED.value for r in monitor.reasons]}


def _stage_rule(stop: StopRule, cap: int) -> StopRule:
    """An intermediate stage's rule. Its objective (a strongly convex quadratic plus a Bregman
    term, solved by accelerated gradient with restarts) creeps down by less than 1e-4 of its
    value per half-run for thousands of iterations after the iterate has stopped moving, so
    the objective-settled rule would only end it at the cap; the stage stops on the relative
    change of its iterate instead, with the run's tolerance."""
    rule = _with_cap(stop, cap)
    if rule.tol_mode == "objective":
        rule = dataclasses.replace(rule, tol_mode="relative")
    return rule


class FeatureStage(Method):
    """An intermediate stage (x_{index-1} from x_index; in a graph x_index from the nodes that
    read it) on the driver; its records show the stage's own objective and put its layers'
    Bregman terms in the table (``columns``: their 0-based indices; NaN elsewhere)."""

    def __init__(self, solver: GaussianStage, problem: Problem, x0: Tensor, aux: list[Tensor],
                 index: int, columns: list[int] | None = None) -> None:
        self.solver, self.problem, self.x0, self.aux, self.index = solver, problem, x0, aux, index
        self.columns = columns or [index]
        self.reported = -1  # iteration of the last record

    def step(self, monitor: RunMonitor) -> Changes:
        x_new, change = monitor.accept(self.solver.step(), self.solver.x)
        self.solver.accept(x_new)
        return change, None

    def state(self) -> tuple[Tensor, list[Tensor]]:
        return self.x0, list(self.aux)

    def objective_parts(self) -> dict[str, Tensor]:
        problem, x0 = self.problem, self.x0
        with torch.no_grad():
            parts = self.solver.objective(self.solver.x)
        bregman = torch.full((problem.batch, problem.depth), float("nan"),
                             device=x0.device, dtype=x0.dtype)
        if "terms" in parts:
            bregman[:, self.columns] = parts["terms"]
        else:
            bregman[:, self.index] = parts["bregman"]
        return {"total": parts["bregman"] + parts["reg"], "bregman": bregman,
                "reg": parts["reg"], "discrepancy": parts["discrepancy"]}

    def record(self, monitor: RunMonitor, final: bool = False) -> IterateRecord:
        self.aux[self.index - 1] = self.solver.x
        self.reported = monitor.iteration
        return super().record(monitor, final)


#: Backward sweeps over a graph whose stages read provisional states (a residual block's
#: shortcut input, estimated only after the block): the second sweep takes the first one's
#: estimates for them, a Gauss-Seidel pass (docs/LAYERWISE.md, "Graphs", measures it).
GRAPH_SWEEPS = 2


def _sweeps(network: Network) -> int:
    """GRAPH_SWEEPS when a node that reads state j also reads an earlier state k (0 < k < j,
    provisional while x_j is estimated), else 1: a further sweep would repeat the first."""
    for index in range(len(network.layers)):
        states = [j for j, _ in network.terms(index)]
        if any(0 < k < j for j in states for k in states):
            return GRAPH_SWEEPS
    return 1


def _consumers(network: Network, state: int, states: list[Tensor]) -> list[Consumer]:
    """The terms of the stage for ``state``: every node l that reads it, with its maps of
    that state, its output's current estimate states[l + 1] and the offset
    sum_{k != state} A_{l,k} states[k] of its other inputs."""
    out = []
    for index, layer in enumerate(network.layers):
        terms = network.terms(index)
        maps = [amap for j, amap in terms if j == state]
        if not maps:
            continue
        offset: Tensor | None = None
        for j, amap in terms:
            if j != state:
                part = amap.apply(states[j])
                offset = part if offset is None else offset + part
        out.append(Consumer(index, maps, layer.activation, states[index + 1], offset))
    return out


INPUT_FANOUT = (
    "layer-wise inversion of {name!r}: its input is read {n} times (by lifted layer(s) "
    "{layers}), e.g. by a residual shortcut from the input; the input stage solves one "
    "layer's problem with the image regulariser and cannot take their sum; use method 'joint'."
)
UNREAD_STATE = (
    "layer-wise inversion of {name!r}: no layer reads the output of layer {layer} (a dead "
    "branch of the module), so its stage has no data; remove the unused branch, or use method "
    "'joint'."
)


def _check_input_stage(network: Network) -> None:
    """A graph runs layer-wise only where every stage has data and the input is read by
    layer 1 alone (which then reads nothing else: it is the first node)."""
    if getattr(network, "is_chain", True):
        return
    name = getattr(network, "name", "network")
    depth = len(network.layers)
    readers: list[list[int]] = [[] for _ in range(depth)]
    for index in range(depth):
        for j, _ in network.terms(index):
            readers[j].append(index)
    if readers[0] != [0]:
        layers = ", ".join(str(i + 1) for i in dict.fromkeys(readers[0]))
        raise InputError(INPUT_FANOUT.format(name=name, n=len(readers[0]), layers=layers))
    for state in range(1, depth):
        if not readers[state]:
            raise InputError(UNREAD_STATE.format(name=name, layer=state))


def _start_stage(monitor: RunMonitor, name: str, stop: StopRule) -> None:
    """Every sample runs again in the new stage; the iteration count continues."""
    monitor.stage = name
    monitor.stop = stop
    monitor.start_iteration = monitor.iteration
    monitor.active[:] = True
    monitor.reasons = [None] * len(monitor.reasons)
    monitor.first_objective = None


def _run_stopped(monitor: RunMonitor) -> bool:
    """Cancel, time budget or divergence in a stage ends the whole run."""
    fatal = {StopReason.CANCELLED.value, StopReason.TIME_BUDGET.value, StopReason.DIVERGED.value}
    return any(reason in fatal for reason in monitor.reasons)


__all__ = ["check_ready", "run_layerwise"]
