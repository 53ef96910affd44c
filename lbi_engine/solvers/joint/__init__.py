"""The joint method (the default for several layers): accelerated proximal gradient on all
blocks x_0, .., x_{L-1} of the lifted objective at once (MATH.md §5.1).

From the run loop to the step:

- ``method``: ``run_joint`` and the driver's method (``AcceleratedJoint``; the paper's
  coordinate-descent sweeps ``CoordinateDescent`` where the accelerated step does not apply);
- ``fista``: ``JointFista``, the iteration's state (all blocks in flat buffers), its
  prox-gradient step and its one ``step()``; ``state``: the fields of it that the step
  strategies and the records read; ``prior_step``: the image block under the Gaussian prior;
- ``steps``: how a step is taken, chosen once per state: torch operations on the batch
  (``BatchStep``), one sample on buffers (``OneSampleStep``, its gradient from
  ``one_sample``), or that with everything after the gradient in compiled loops
  (``compiled_step.CompiledStep``, ``kernels.joint_prox_gradient``);
- ``records``: the objective's parts at the iterates, on the step's maps;
- ``start``: the back-projection start; ``graph``: residual and concatenating networks;
- ``hidden_weight``: the hidden-layer weight (MATH.md §5.7) around a run;
- ``sparse_maps``, ``tensor_cache``: small convolutions as CSR matrices, cached per weight.
"""
