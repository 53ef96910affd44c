"""The one-layer problem min_x B_Psi(x, W x + b) + alpha R(x), and the block step that the
multi-layer methods reuse for it.

The method's name for users stays ``pdhg`` (an alias of ``one-layer``); by default it runs the
accelerated proximal gradient (``accelerated``) where that applies and Condat–Vũ's
primal–dual step (``primal_dual``) elsewhere.

- ``method``: the method's run loop (``run_pdhg``) and the block classes the joint and
  layer-wise methods share (``BlockMethod``, ``make_block``);
- ``accelerated``: FISTA with the gradient restart and the inexact TV prox;
- ``primal_dual``: Condat–Vũ PDHG in preallocated slots; ``anderson``: its Anderson mixing;
- ``inplace``: the in-place plans of the primal–dual step (and the fused-kernel switch);
- ``step_sizes``: the step-size rules (``steps=`` of SolverOptions).
"""
