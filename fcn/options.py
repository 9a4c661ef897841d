"""The named choices of ``fcn``'s public functions, as plain values (ground floor).

No TensorFlow: the ``fcn`` command line offers them (``--precision``, ``--format``,
``--output``) and answers ``--help`` without importing it; the modules that act on a choice
import it from here ([`fcn.device`][] resolves a precision, [`fcn.inference.export`][]
writes a format).

Examples:
    >>> PRECISIONS, EXPORT_FORMATS, OUTPUTS
    (('auto', 'float32', 'bfloat16'), ('saved_model', 'litert', 'onnx'), ('labels', 'logits'))
"""

from __future__ import annotations

from typing import Literal, get_args

Precision = Literal["auto", "float32", "bfloat16"]

PRECISIONS: tuple[str, ...] = get_args(Precision)
"""What ``precision=`` of [`fcn.predict`][], [`fcn.evaluate`][] and export take ("auto":
bfloat16 where the hardware runs it natively, [`fcn.device.resolve_precision`][])."""

ExportFormat = Literal["saved_model", "litert", "onnx"]

EXPORT_FORMATS: tuple[str, ...] = get_args(ExportFormat)
"""The formats [`fcn.export_model`][] writes: a SavedModel folder, a LiteRT ``.tflite`` file,
an ``.onnx`` file."""

Output = Literal["labels", "logits"]

OUTPUTS: tuple[str, ...] = get_args(Output)
"""What a forward pass returns (``output=`` of [`fcn.inference.streamed.compiled_forward`][],
[`fcn.inference.tiling.predict_tiled`][] and [`fcn.export_model`][]; an exported model's
output is named after it): class labels, or float32 logits."""
