"""Everything that reads a model file or lifts a torch module into operators + activations.

The only package that opens model files (a contract in ``.importlinter`` checks it):
``model_files`` (format sniffing, refusal of code-carrying files), ``cards`` (card JSON +
safetensors), ``importers`` (TorchScript rebuild, shared file checks), ``onnx_import`` and
``_onnx_*``, ``pt2_import`` and ``_pt2_*`` (torch.export archives read as data),
``layer_lifting`` / ``affine_layers`` / ``_layer_refusals`` / ``fx_chain`` / ``_leaf_modules``
(module -> AffineMap | activation),
``network`` (LiftedNetwork), ``zoo`` (bundled networks, load_model_file), ``convert``,
``maxpool_relu`` and ``footprint`` (memory estimate before building).

Importing this package is cheap: it imports no submodule.
"""
