"""The joint method (the default for several layers): accelerated proximal gradient on all
blocks x_0, .., x_{L-1} of the lifted objective at once (MATH.md §5.1).

From the run loop to the step:

- ``method``: ``run_joint`` and the driver's method (``AcceleratedJoint``; the Condat–Vũ
  sweep ``JointMethod`` where the accelerated step does not apply);
- ``fista``: ``JointFista``, the iteration's state (all blocks in flat buffers) and its step;
  ``state``: the fields of it that the records and the compiled step read;
- ``one_sample``: the gradient of one sample on buffers made once; ``compiled_step``:
  everything after that gradient in compiled loops (``kernels.joint_prox_gradient``);
- ``records``: the objective's parts at the iterates, on the step's maps;
- ``start``: the back-projection start; ``graph``: residual and concatenating networks;
- ``hidden_weight``: the hidden-layer weight (MATH.md §5.7) around a run;
- ``sparse_maps``, ``tensor_cache``: small convolutions as CSR matrices, cached per weight.
"""
