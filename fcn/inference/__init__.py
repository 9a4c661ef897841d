"""Inference: the streamed forward pass, tiles, budgets, model files, evaluate and predict.

- :mod:`~fcn.inference.budget`: every pixel and byte budget, and the decisions whole /
  streamed / tiled / batched.
- :mod:`~fcn.inference.streamed`: exact FCN inference in bands of rows, following the
  :class:`fcn.model.Topology` that :mod:`fcn.model` publishes.
- :mod:`~fcn.inference.tiling`: images above the budget in overlapping tiles.
- :mod:`~fcn.inference.precision`: the model in the precision that runs (bf16 where the
  hardware has it natively).
- :mod:`~fcn.inference.model_files`: where the default model is, checksums, safe loading.
- :mod:`~fcn.inference.evaluate` (``fcn.evaluate``) and :mod:`~fcn.inference.predict`
  (``fcn.predict``): the public calls built on the above.
- :mod:`~fcn.inference.export` (``fcn.export_model``): SavedModel, LiteRT and ONNX files that
  serve without ``fcn``.
"""
