"""Step-size rules of the Condat–Vũ iteration (MATH.md §3.2–3.3; see SolverOptions.steps).

Condat–Vũ converges when 1/tau_x - tau_z ||alpha K||^2 > L/2 (L: Lipschitz constant of the
smooth data term). Every rule but "paper" satisfies this by construction; they differ in
how the budget is split between the primal and the dual step, which decides the speed.
"""

from __future__ import annotations

# Primal step for a regulariser without a dual part (plain forward-backward): any
# tau < 2/L converges; 1.9/L keeps a margin for the 1 % slack of power iteration.
FORWARD_BACKWARD_SAFE = 1.9
PAPER_PRIMAL = 1.99


def step_sizes(rule: str, lipschitz: float, alpha: float, k_norm_sq: float) -> tuple[float, float]:
    """(tau_x, tau_z) for f L-smooth and h(alpha K x), by rule (see SolverOptions.steps)."""
    lipschitz = max(float(lipschitz), 1e-30)
    if k_norm_sq <= 0 or alpha <= 0:  # no dual part: forward-backward splitting
        factor = PAPER_PRIMAL if rule == "paper" else FORWARD_BACKWARD_SAFE
        return factor / lipschitz, 0.0
    if rule == "paper":
        return PAPER_PRIMAL / lipschitz, 1.0 / (8.0 * alpha)
    if rule == "conservative":
        tau_z = 1.0 / (8.0 * alpha)
        return 0.99 / (lipschitz / 2.0 + tau_z * alpha**2 * k_norm_sq), tau_z
    if rule in ("balanced", "accelerated"):  # "accelerated": its Condat–Vũ fallback
        # twice the dual step of "safe", primal step from the condition with margin 0.99:
        # 1/tau_x - tau_z alpha^2 ||K||^2 = L / (2 * 0.99) > L/2
        tau_z = 0.99 * lipschitz / (alpha**2 * k_norm_sq)
        return 0.99 / (lipschitz / 2.0 + tau_z * alpha**2 * k_norm_sq), tau_z
    # "safe": 1/tau_x - tau_z alpha^2 ||K||^2 = L - 0.495 L > L/2.
    return 1.0 / lipschitz, 0.99 * lipschitz / (2.0 * alpha**2 * k_norm_sq)


def resolve_rule(rule: str, fixed_data: bool) -> str:
    """The Condat–Vũ rule: "auto" -> "balanced" for a plain PDHG run (fixed data), "safe" for
    the x_0 block of coordinate descent (the joint method), whose data changes every sweep.
    ("accelerated" runs use these steps where the accelerated method does not apply.)"""
    if rule not in ("auto", "accelerated"):  # "accelerated": where it does not apply
        return rule
    return "balanced" if fixed_data else "safe"


def wants_accelerated(rule: str, tol_mode: str = "objective") -> bool:
    """Whether a pdhg run tries the accelerated method (``one_layer/accelerated.py``);
    it falls back to Condat–Vũ where it does not apply (``one_layer.accelerated.supported``).

    "auto" takes it only under the objective stop rule. Its dual is the TV dual of an
    inexact, warm-started inner prox: not unique (a divergence-free field can be added) and
    only as accurate as the inner gap test, so its change per iteration wanders (1e-3 to 0.5
    on the MNIST perceptron while x has converged). The rules that test that change
    (tol_mode "relative"/"absolute") then never fired; Condat–Vũ
    converges to one primal-dual pair, so they do. "accelerated" asked for by name stays."""
    if rule == "auto":
        return tol_mode == "objective"
    return rule == "accelerated"


def paper_steps_warning(lipschitz: float, alpha: float, k_norm_sq: float) -> str | None:
    """The paper's steps are provably convergent only when ||W||^2 > 398 alpha ||K||^2/8."""
    if alpha <= 0 or k_norm_sq <= 0:
        return None
    bound = 398.0 * alpha * k_norm_sq / 8.0
    if lipschitz > bound:
        return None
    return (
        f"the paper's step sizes are not provably convergent here (||W||^2 = {lipschitz:.4g} "
        f"<= 398 alpha ||K||^2/8 = {bound:.4g}); use steps='safe' if the run oscillates"
    )
