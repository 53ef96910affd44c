"""Prototype (issue #7, targets 3-4): iterations to a 1e-4 objective gap, float64 NumPy.

Candidates against the current Condat–Vũ rules on the four problems of section 3
(data from benchmarks/_proto_data.py). One iteration = one product with W and one with W^T.
Run: OMP_NUM_THREADS=1 .venv/bin/python -m benchmarks._proto_accel [names...]
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator

import numpy as np

GAP = 1e-4
EVERY = 10


class Prob:
    def __init__(self, name: str) -> None:
        d = np.load(f"/tmp/lbi_proto/{name}.npz")
        self.name = name
        self.W, self.b, self.y = d["W"], d["b"], d["y"]
        self.alpha = float(d["alpha"])
        self.shape = tuple(int(s) for s in d["shape"])
        self.e_star = float(d["e_star"])
        self.L = float(np.linalg.norm(self.W, 2) ** 2)
        h, w = self.shape
        self.K2 = 4 * math.sin(math.pi * (h - 1) / (2 * h)) ** 2 + \
            4 * math.sin(math.pi * (w - 1) / (2 * w)) ** 2
        self.n = self.W.shape[1]

    def gradf(self, x: np.ndarray) -> np.ndarray:
        return self.W.T @ (np.maximum(self.W @ x + self.b, 0) - self.y)

    def E(self, x: np.ndarray) -> float:
        z = self.W @ x + self.b
        data = 0.5 * np.sum(np.maximum(z, 0) ** 2) - self.y @ z + 0.5 * self.y @ self.y
        g = self.K(x)
        return float(data + self.alpha * np.sum(np.sqrt(g[0] ** 2 + g[1] ** 2)))

    def K(self, x: np.ndarray) -> np.ndarray:
        img = x.reshape(self.shape)
        g = np.zeros((2, *self.shape))
        g[0, :-1] = img[1:] - img[:-1]
        g[1, :, :-1] = img[:, 1:] - img[:, :-1]
        return g

    def KT(self, p: np.ndarray) -> np.ndarray:  # = -div
        out = np.zeros(self.shape)
        ph, pw = p[0, :-1], p[1, :, :-1]
        out[:-1] -= ph
        out[1:] += ph
        out[:, :-1] -= pw
        out[:, 1:] += pw
        return out.reshape(-1)


def proj(p: np.ndarray) -> np.ndarray:
    return p / np.maximum(1.0, np.sqrt(p[0] ** 2 + p[1] ** 2))


def measure(prob: Prob, gen: Iterator[np.ndarray], cap: int) -> int | None:
    """First multiple of EVERY from which the gap stays <= GAP (run 50 % / 200 past it)."""
    first = None
    for k, x in enumerate(gen, start=1):
        if k % EVERY:
            continue
        gap = (prob.E(x) - prob.e_star) / abs(prob.e_star)
        if not math.isfinite(gap) or gap > GAP:
            first = None
        elif first is None:
            first = k
        if first is not None and k >= max(1.5 * first, first + 200):
            return first
        if k >= cap:
            break
    return first


# -- Condat–Vũ (the current engine) ---------------------------------------------------------------
def rule(prob: Prob, name: str) -> tuple[float, float]:
    L, a2k = prob.L, prob.alpha**2 * prob.K2
    if name == "paper":
        return 1.99 / L, 1 / (8 * prob.alpha)
    if name == "safe":
        return 1 / L, 0.99 * L / (2 * a2k)
    tz = 0.99 * L / a2k  # balanced
    return 0.99 / (L / 2 + tz * a2k), tz


def condat_vu(prob: Prob, tx: float, tz: float) -> Iterator[np.ndarray]:
    a = prob.alpha
    x = np.zeros(prob.n)
    z = np.zeros((2, *prob.shape))
    while True:
        xn = x - tx * (prob.gradf(x) + a * prob.KT(z))
        z = proj(z + tz * a * prob.K(2 * xn - x))
        x = xn
        yield x


# -- Loris–Verhoeven / PAPC / PD3O with g = 0: tau < 2/L, tau sigma ||aK||^2 <= 1 -----------------
def papc(prob: Prob, tau: float, sig: float) -> Iterator[np.ndarray]:
    a = prob.alpha
    x = np.zeros(prob.n)
    s = np.zeros((2, *prob.shape))
    while True:
        g = x - tau * prob.gradf(x)
        v = g - tau * a * prob.KT(s)
        s = proj(s + sig * a * prob.K(v))
        x = g - tau * a * prob.KT(s)
        yield x


# -- FISTA with an inexact TV prox (warm-started dual projected gradient, n inner steps) ----------
def fista(prob: Prob, tau: float, inner: int, restart: bool = True, fgp: bool = False,
          mono: bool = False) -> Iterator[np.ndarray]:
    a = prob.alpha
    lam = tau * a
    step = 1.0 / (lam * prob.K2)  # inner dual step (1/Lipschitz of the dual of the prox)
    x = np.zeros(prob.n)
    yv = x.copy()
    p = np.zeros((2, *prob.shape))
    t = 1.0
    while True:
        v = yv - tau * prob.gradf(yv)
        q, pp, ti = p.copy(), p.copy(), 1.0
        for _ in range(inner):
            u = v - lam * prob.KT(q)
            pn = proj(q + step * prob.K(u))
            if fgp:
                tn = (1 + math.sqrt(1 + 4 * ti * ti)) / 2
                q = pn + (ti - 1) / tn * (pn - pp)
                ti, pp = tn, pn
            else:
                q = pn
        p = pp if fgp else q
        xn = v - lam * prob.KT(p)
        tn = (1 + math.sqrt(1 + 4 * t * t)) / 2
        if restart and np.dot(yv - xn, xn - x) > 0:
            t, tn = 1.0, 1.0
        yv = xn + (t - 1) / tn * (xn - x)
        x, t = xn, tn
        yield x


# -- Chen–Lan–Ouyang APD (Algorithm 1), unbounded-domain parameters -----------------------------
def apd(prob: Prob, scale_eta: float = 1.0, scale_tau: float = 1.0,
        restart_every: int | None = None) -> Iterator[np.ndarray]:
    a = prob.alpha
    LG, LK = prob.L, a * math.sqrt(prob.K2)
    x = np.zeros(prob.n)
    s = np.zeros((2, *prob.shape))
    xag, xbar = x.copy(), x.copy()
    t = 1
    while True:
        beta = (t + 1) / 2
        theta_next = t / (t + 1)
        eta = scale_eta * t / (2 * LG + t * LK)
        tau_d = scale_tau / LK
        xmd = (1 - 1 / beta) * xag + x / beta
        s = proj(s + tau_d * a * prob.K(xbar))
        xn = x - eta * (prob.gradf(xmd) + a * prob.KT(s))
        xag = (1 - 1 / beta) * xag + xn / beta
        xbar = xn + theta_next * (xn - x)
        x = xn
        t += 1
        if restart_every and t > restart_every:
            t, x, xbar = 1, xag.copy(), xag.copy()
        yield xag


def run(names: list[str], algs: dict[str, Callable[[Prob], Iterator[np.ndarray]]],
        cap: int = 8000) -> None:
    probs = [Prob(n) for n in names]
    print("alg".ljust(34) + "".join(p.name.rjust(9) for p in probs), flush=True)
    for label, make in algs.items():
        row = []
        for p in probs:
            row.append(measure(p, make(p), cap))
        print(label.ljust(34) + "".join(str(r).rjust(9) for r in row), flush=True)


if __name__ == "__main__":
    names = sys.argv[1:] or ["circle", "val0", "val1", "train0"]
    algs: dict[str, Callable] = {
        "cv balanced": lambda p: condat_vu(p, *rule(p, "balanced")),
        "cv safe": lambda p: condat_vu(p, *rule(p, "safe")),
    }
    for r in (0.5, 1.0, 2.0, 4.0):
        algs[f"papc tau=1.9/L s*={r}"] = (
            lambda p, r=r: papc(p, 1.9 / p.L, r / (1.9 / p.L * p.alpha**2 * p.K2)))
    for n in (1, 3, 10):
        algs[f"fista n={n} restart"] = lambda p, n=n: fista(p, 1 / p.L, n)
    algs["apd"] = lambda p: apd(p)
    run(names, algs)
