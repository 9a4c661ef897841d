"""The named choices of ``fcn``'s public functions, as plain values (ground floor).

No TensorFlow: the ``fcn`` command line offers them (``--precision``, ``--format``,
``--output``, ``--quantize``) and answers ``--help`` without importing it; the modules that act
on a choice import it from here ([`fcn.device`][] resolves a precision, [`fcn.inference.export`][]
writes a format).

Examples:
    >>> PRECISIONS, EXPORT_FORMATS, OUTPUTS
    (('auto', 'float32', 'bfloat16'), ('saved_model', 'litert', 'onnx'), ('labels', 'logits'))
    >>> QUANTIZATIONS, QUANTIZED_FORMATS
    (('int8',), ('litert', 'onnx'))
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

Quantization = Literal["int8"]

QUANTIZATIONS: tuple[str, ...] = get_args(Quantization)
"""What ``quantize=`` of [`fcn.export_model`][] takes (``--quantize``): full-integer int8 (weights
per output channel, activations calibrated on images), for the LiteRT and ONNX formats."""

QUANTIZED_FORMATS: tuple[str, ...] = ("litert", "onnx")
"""The formats an int8 export writes: their runtimes (LiteRT with XNNPACK, ONNX Runtime) run
int8 convolutions on a CPU; a SavedModel runs on TensorFlow's float kernels."""

DEFAULT_CALIBRATION_IMAGES = 100
"""Images an int8 export is calibrated on by default ([`fcn.inference.calibration`][]): the
count TensorFlow's post-training quantisation guide suggests (~100-500);
``benchmarks/README.md`` measures the accuracy it gives."""
