"""Reading a path of the discrepancy search: (alpha, residual) points of warm-started solves.

Pure functions over :class:`PathPoint` lists, shared by the whole-network search
(``whole._discrepancy_search``): the local slope of log residual in log alpha, the
interpolation between a bracket's ends, and which point to keep when the target is out of
reach (a flattened or rising residual, or a walk down to alpha_min).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from lbi_engine.solvers.alpha.path import discrepancy_ratio, log_linear

#: A residual within this factor of the smallest one reached counts as an equal fit when the
#: discrepancy target is out of reach (``_fit_floor``).
FIT_FLOOR = 0.1
#: The discrepancy search (``_discrepancy_search``): done when |log(residual / target)| is at
#: most MATCH (3 %: alpha within about 6-10 % at the measured slopes, where the PSNR is flat);
#: at most MAX_POINTS solves; a jump changes alpha by at most e^MAX_JUMP (a decade).
MATCH = 0.03
MAX_POINTS = 10
MAX_JUMP = math.log(10.0)
#: d log residual / d log alpha before two points measure it, and the range outside which a
#: measured one is not trusted (``_local_slope``): 0.2-0.4 near the crossing on mnist-cnn-ae,
#: more on mnist-perceptron-ae (training digits). Mean steps of a default run (every solve,
#: ``choice.solver_steps``) on 6 training digits at std 0.01 / 0.05 / 0.2
#: (``benchmarks.studies.alpha_search_steps --digits 7,11,50,60,150,222 --stds 0.01,0.05,0.2
#: --slope S``): 0.5 took 408 / 233 / 187 on the CNN and 470 / 198 / 167 on the perceptron,
#: 0.4 took 371 / 212 / 180 and 448 / 201 / 179 (4 % fewer in all, 9 % on the CNN; 0.4 with
#: an untrusted slope clipped instead of replaced took 451 on the CNN at 0.01).
SLOPE, MIN_SLOPE, MAX_SLOPE = 0.4, 0.1, 2.0
#: The prior slope of the search that runs again with the hidden layers weighted
#: (``whole._raised_weight``): weighting pins the lifted states to the network, so the
#: residual falls more slowly with alpha. Measured over the first jump of that search on the
#: 64x64 resnet18 and squeezenet slices of ``benchmarks.bench_graph_slices``: 0.15 and 0.19
#: (SLOPE took both a second jump to reach their crossings).
RAISED_SLOPE = 0.15


@dataclass
class PathPoint:
    alpha: float
    discrepancy: float
    reg: float
    objective: float
    iterations: int
    seconds: float
    psnr: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)



def _nearest(path: list[PathPoint], target: float) -> int:
    """The path point whose residual is nearest the target (log ratio), and of the points
    whose residuals lie within MATCH of that one's, the largest alpha: a fit equal within the
    search's own tolerance, with more weight on the prior. A random resnet18 slice at
    128x128 flattened at residuals 15.87 / 15.86 for alpha 4.5e-4 / 1.4e-4, and the smaller
    alpha's final solve ended at 9.25 dB."""
    def distance(i: int) -> float:
        return abs(math.log(discrepancy_ratio(path[i].discrepancy, target)))

    best = min(range(len(path)), key=distance)
    if not (path[best].discrepancy > 0 and math.isfinite(path[best].discrepancy)):
        return best
    equal = [i for i in range(len(path)) if path[i].discrepancy > 0
             and abs(math.log(path[i].discrepancy / path[best].discrepancy)) <= MATCH]
    return max(equal, key=lambda i: path[i].alpha)


def _out_of_reach(path: list[PathPoint], target: float, alpha_min: float) -> bool:
    """Whether the residual has flattened above the target: the last three path points
    walk down in alpha, all above the target, both of their steps with a slope
    d log residual / d log alpha below MIN_SLOPE, and even the steeper of the two would
    reach the target only below ``alpha_min``, or the residual rose as alpha fell (a
    lifted solve's fit through the network need not fall with alpha: a resnet18 stem without
    its pool rose from 12.3 to 13.2 while the PSNR fell from 22.0 to 16.2 dB). Then the search
    stops at the point nearest the target instead of walking on down: on a random vgg11 slice (64x64
    colour, std 0.05) the residual fell by 2 % per step from alpha 2.4e-3 to 2e-4 while the
    PSNR fell from 20.4 to 16.2 dB, and the walk spent six more solves getting there. Not
    ``_fit_floor``: its 10 % band spans the whole of so flat a path and went back to its
    first flat point (17.1 dB with TV + box on that slice, 19.4 dB at the last). One flat
    step is not enough: a short path solve can pass the settle test with its residual
    still drifting (``_local_slope``)."""
    if len(path) < 3:
        return False
    a, b, c = path[-3:]
    if not (a.alpha > b.alpha > c.alpha and min(a.discrepancy, b.discrepancy,
                                                 c.discrepancy) > target):
        return False
    slopes = [math.log(p.discrepancy / q.discrepancy) / math.log(p.alpha / q.alpha)
              for p, q in ((a, b), (b, c))]
    steepest = max(slopes)
    if steepest >= MIN_SLOPE:
        return False
    if steepest <= 0:
        return True
    return c.alpha * math.exp(math.log(target / c.discrepancy) / steepest) < alpha_min


def _fit_floor(path: list[PathPoint]) -> int:
    """The path point to keep when the residual stays above the target down to ``alpha_min``:
    the largest alpha whose residual is within FIT_FLOOR of the smallest the search reached.

    Below that alpha the residual hardly falls (the network, or the iterations a solve gets,
    cannot fit the data more closely), so a smaller weight buys no fidelity and only lets the
    noise in; alpha_min itself, the old answer, gave 12 dB on a random resnet18 slice where
    larger alphas on the same path gave 23 dB."""
    smallest = min(point.discrepancy for point in path)
    close = [i for i, point in enumerate(path) if point.discrepancy <= (1 + FIT_FLOOR) * smallest]
    return max(close, key=lambda i: path[i].alpha)


def _interpolate(lo: PathPoint, hi: PathPoint, target: float) -> float:
    """log alpha linear in log residual between a point below and one above the target."""
    return log_linear((lo.alpha, lo.discrepancy), (hi.alpha, hi.discrepancy), target,
                      log_values=True, flat=0.5)


def _local_slope(path: list[PathPoint], target: float, prior: float | None = None) -> float:
    """d log residual / d log alpha from the two path points nearest the target (in
    residual); ``prior`` (SLOPE) before there are two, and when theirs lies outside [MIN_SLOPE,
    MAX_SLOPE]: such a slope says the points are not to be trusted (a short solve after a
    small change of alpha can pass the settle test with its residual still drifting), not
    that the curve is that flat or steep; clipped to MIN_SLOPE it sent the CNN at std 0.01
    a third of a decade past the target (training digits 7, 150, 222: 5-7 solves)."""
    prior = SLOPE if prior is None else prior  # read here: benchmarks set SLOPE
    if len(path) < 2:
        return prior
    a, b = sorted(path, key=lambda p: abs(math.log(p.discrepancy / target)))[:2]
    if a.alpha == b.alpha or a.discrepancy <= 0 or b.discrepancy <= 0:
        return prior
    slope = math.log(a.discrepancy / b.discrepancy) / math.log(a.alpha / b.alpha)
    return slope if MIN_SLOPE <= slope <= MAX_SLOPE else prior
