"""Inference: the streamed forward pass, tiles, budgets, model files, evaluate and predict.

- [`budget`][]: every pixel and byte budget, and the decisions whole /
  streamed / tiled / batched.
- [`streamed`][]: exact FCN inference in bands of rows, following the
  [`fcn.model.Topology`][] that [`fcn.model`][] publishes.
- [`tiling`][]: images above the budget in overlapping tiles.
- [`precision`][]: the model in the precision that runs (bf16 where the
  hardware has it natively).
- [`model_files`][]: where the default model is, checksums, safe loading.
- [`evaluate`][] (``fcn.evaluate``) and [`predict`][]
  (``fcn.predict``): the public calls built on the above.
- [`litert`][]: a LiteRT file run back in windows of its size, which
  [`predict`][] and [`evaluate`][] take as they take a Keras model.
- [`export`][] (``fcn.export_model``): SavedModel, LiteRT and ONNX files that
  serve without ``fcn``, float or int8 (calibrated by [`calibration`][]).
"""
