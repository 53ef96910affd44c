"""The solvers' compiled loops (numba on the CPU), one module per algorithm.

Each module imports numba and is compiled (or loaded from numba's cache) on first use, so
nothing imports it before a solver is about to use it: importing this package imports none
of them. Every path that uses one asks ``operators.backend.numba_enabled`` first and has a
torch twin that computes the same iterates to rounding.

- ``tv_primal_dual``: the gradient-field part of the Condat–Vũ step (divergence, dual ascent,
  projection, changes) fused into one pass per batch (one-layer method);
- ``dense_gradient``: that step's two products with a dense W, ``W^T (sigma(W x + b) - data)``,
  in one pass over W (one-layer method, a few samples);
- ``joint_prox_gradient``: the joint method's step for one sample after its gradient (gradient
  step, TV prox by FGP, x >= 0, restart test, extrapolation);
- ``gathered_conv``: one sample's products with a convolution as a gathered GEMM;
- ``bregman_sums``: one sample's Bregman terms summed in float64 (the joint records);
- ``activation_prox``: the root-solved prox of tanh and sigmoid.

The FGP loop of the TV prox itself is the regulariser's (``regularisers._fgp_kernel``).
"""
