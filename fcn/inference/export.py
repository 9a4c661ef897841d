"""Export an FCN for serving without ``fcn``: a TensorFlow SavedModel, a LiteRT (TFLite) file or
an ONNX file, each taking uint8 RGB images and returning class labels (or logits).

The exported graph is [`serving_model`][]: the FCN with a uint8 input named ``image`` and one
named output, ``labels`` (N, H, W) in [`fcn.layers.label_dtype`][] or ``logits``
(N, H, W, C) float32, written by ``tf.saved_model.save`` (each weight once), Keras'
``Model.export`` (LiteRT) or tf2onnx (with the weights as inputs while it converts): see each
[`Format`][]'s writer for why. What each format takes:

=============  =================================  ==========================================
format         input ``image``                    runs on
=============  =================================  ==========================================
saved_model    (N, H, W, 3) uint8, any N, H, W    TensorFlow, TF Serving (``serving_default``)
litert         (1, H, W, 3) uint8, ``size`` H, W  LiteRT / TFLite interpreters (phones, edge)
onnx           (N, H, W, 3) uint8, any N, H, W    ONNX Runtime etc. (needs ``tf2onnx``)
=============  =================================  ==========================================

``size`` fixes H and W in every format; LiteRT needs it. A fixed-size SavedModel's ``serve``
function refuses other sizes; its ``serving_default`` signature does not check (TensorFlow
runs it on whatever it gets), so call it at its size.

The exported graph runs each image whole, as Keras does: its memory grows with the image (the
full FCN-8s as a SavedModel: 780 MiB above the loaded model for one 1000x1000 image on a CPU,
``benchmarks/README.md``), whereas [`fcn.predict`][] streams any size in bounded memory
([`fcn.inference.streamed`][]). Dropout is off (inference). An export is written beside its
destination and moved into place when complete (``fcn.data.atomic.write_whole``), so an
interrupted export leaves no partial artifact and an earlier one at that path stays until the
new one is whole. An export whose converter would need more memory than is available is
refused before it starts ([`Format`][]).

``quantize="int8"`` writes a LiteRT or ONNX file with int8 weights and activations, calibrated
on training images ([`fcn.inference.calibration`][]); [`fcn.predict`][] and [`fcn.evaluate`][]
run a LiteRT file back ([`fcn.inference.litert`][]), so the accuracy of the deployed file is
scored by the package's own evaluator.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from fcn.conv_gradients import native_convolutions
from fcn.data.atomic import write_whole
from fcn.device import OutOfMemoryError, Precision, available_host_memory, resolve_precision
from fcn.inference.calibration import CalibrationSource, calibration_files, calibration_inputs
from fcn.inference.model_files import load_model
from fcn.inference.precision import in_precision
from fcn.layers import ClassLabels
from fcn.options import (
    DEFAULT_CALIBRATION_IMAGES,
    EXPORT_FORMATS,
    OUTPUTS,
    QUANTIZATIONS,
    QUANTIZED_FORMATS,
    ExportFormat,
    Output,
    Quantization,
)

INPUT_NAME = "image"
"""The name of an exported model's input."""


def serving_model(model: keras.Model, output: Output = "labels") -> keras.Model:
    """``model`` (an FCN from RGB 0..255 to logits) behind a uint8 input named ``image``, with
    one output named ``output``: labels (N, H, W) or logits (N, H, W, C). It shares
    ``model``'s weights.

    Examples:
        >>> import fcn, numpy as np
        >>> served = serving_model(fcn.build_model("fcn8s", weights=None, width=1 / 16))
        >>> out = served(np.zeros((2, 40, 50, 3), np.uint8))
        >>> list(out), out["labels"].shape, out["labels"].dtype
        (['labels'], TensorShape([2, 40, 50]), tf.uint8)
    """
    if output not in OUTPUTS:
        raise ValueError(f"unknown output {output!r}; choose one of {', '.join(OUTPUTS)}")
    image = keras.Input((None, None, 3), dtype="uint8", name=INPUT_NAME)
    logits = model(image, training=False)
    result = ClassLabels(name="labels")(logits) if output == "labels" else logits
    return keras.Model(image, {output: result}, name=f"{model.name}_{output}")


def _write_saved_model(
    served: keras.Model, spec: tf.TensorSpec, path: Path, calibration: None = None
) -> None:
    """``served`` as a SavedModel whose ``serve`` function is also its ``serving_default``
    signature, each weight stored once. Not ``Model.export``: on TensorFlow it stores every
    weight twice, as the Keras variable and as the TensorFlow variable inside it, which doubles
    the folder and the memory of every process that loads it (keras-team/keras#23553, open in
    Keras 3.15)."""
    module = tf.Module()
    module.weights = [weight.value for weight in served.weights]  # the tf.Variables it reads

    @tf.function(input_signature=[spec], autograph=False)
    def serve(image):
        return served(image, training=False)

    module.serve = serve
    tf.saved_model.save(module, str(path), signatures={"serving_default": serve})


Inputs = Callable[[], Iterator[np.ndarray]]
"""Calibration inputs: a function yielding uint8 (1, H, W, 3) images
([`fcn.inference.calibration.calibration_inputs`][])."""


def _write_litert(
    served: keras.Model, spec: tf.TensorSpec, path: Path, calibration: Inputs | None
) -> None:
    """``served`` as a LiteRT flatbuffer, by Keras' ``Model.export`` (TensorFlow's converter);
    with ``calibration``, full-integer int8: TensorFlow's post-training quantisation targeting
    its int8 builtin ops (weights per output channel, each activation's scale from its range
    over the calibration inputs). Every convolution, pooling, addition and crop then computes
    in int8 (``tests/test_export.py`` checks each op of the file); the casts of the uint8 input
    to the graph's float and of the argmax to uint8 labels stay as they are."""
    quantize = {}
    if calibration is not None:
        quantize = {
            "optimizations": [tf.lite.Optimize.DEFAULT],
            "representative_dataset": lambda: ([image] for image in calibration()),
            "target_spec": {"supported_ops": [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]},
        }
    served.export(path, "litert", input_signature=[spec], verbose=False, **quantize)


def _write_onnx(
    served: keras.Model, spec: tf.TensorSpec, path: Path, calibration: Inputs | None
) -> None:
    """``served`` as an ONNX file, converted by tf2onnx with the weights as inputs of the
    function, then stored as the file's initializers. Not ``Model.export``, which hands tf2onnx
    the weights as constants: every optimizer pass of tf2onnx copies the graph, constants
    included, and the full FCN-8s needed ~26 GiB (51x its weights; 3.1-4.2x this way,
    ``benchmarks/README.md``). The weights Keras keeps for training only (dropout's seeds) are
    unused by the graph and left out. With ``calibration``, the float file is then quantised
    by [`_quantize_onnx`][]."""
    if calibration is not None:
        floating = path.with_name(f"{path.stem}.float32.onnx")
        try:
            _write_onnx(served, spec, floating, None)
            _quantize_onnx(floating, path, calibration)
        finally:
            floating.unlink(missing_ok=True)
            floating.with_suffix(".prepared.onnx").unlink(missing_ok=True)
        return
    import onnx
    import tf2onnx
    from onnx import numpy_helper

    variables = [*served.trainable_variables, *served.non_trainable_variables]
    specs = [tf.TensorSpec(v.shape, v.dtype, name=f"weight_{i}") for i, v in enumerate(variables)]
    trainable = len(served.trainable_variables)

    @tf.function(autograph=False)
    def forward(image, *values):
        outputs, _ = served.stateless_call(
            list(values[:trainable]), list(values[trainable:]), image, training=False
        )
        return outputs

    proto, _ = tf2onnx.convert.from_function(forward, [spec, *specs])
    graph = proto.graph
    by_name = {s.name: v for s, v in zip(specs, variables)}
    read = {name for node in graph.node for name in node.input}
    weights = [i.name for i in graph.input if i.name in by_name and i.name in read]
    inputs = [i for i in graph.input if i.name not in by_name]
    del graph.input[:]
    graph.input.extend(inputs)
    for name in weights:
        graph.initializer.append(numpy_helper.from_array(by_name[name].numpy(), name))
    onnx.save(proto, str(path))


def _quantize_onnx(floating: Path, path: Path, calibration: Inputs) -> None:
    """The ONNX file ``floating`` as int8 in ``path``: ONNX Runtime's static quantiser in its
    recommended defaults, QDQ format (quantise/dequantise pairs around each int8 op, which ONNX
    Runtime fuses into int8 kernels) with int8 weights and activations (S8S8), weights per
    output channel, each activation's scale from its min and max over the calibration inputs
    (the calibrator keeps those two numbers per tensor, not the activations). First its
    pre-processing (``quant_pre_process``: constant folding and shape inference): tf2onnx leaves
    each kernel behind a Transpose of the weight (NHWC to NCHW), which the quantiser would not
    see as a weight; folded, every kernel is an initializer it quantises."""
    try:
        from onnxruntime import quantization
    except ImportError as err:
        raise RuntimeError(
            "an int8 ONNX export needs ONNX Runtime's quantiser: pip install 'fcn-keras[onnx]'"
        ) from err

    class Reader(quantization.CalibrationDataReader):
        def __init__(self):
            self.inputs = calibration()

        def get_next(self) -> dict[str, np.ndarray] | None:
            image = next(self.inputs, None)
            return None if image is None else {INPUT_NAME: image}

    prepared = floating.with_suffix(".prepared.onnx")
    quantization.quant_pre_process(
        str(floating), str(prepared), skip_symbolic_shape=True
    )
    quantization.quantize_static(
        str(prepared), str(path), Reader(), quant_format=quantization.QuantFormat.QDQ,
        per_channel=True, activation_type=quantization.QuantType.QInt8,
        weight_type=quantization.QuantType.QInt8,
    )  # fmt: skip


Writer = Callable[[keras.Model, tf.TensorSpec, Path, Inputs | None], None]


@dataclass(frozen=True)
class Format:
    """One export format.

    Attributes:
        suffix: what the file's name must end in ("" for a folder).
        memory: the converter's peak memory above the loaded model, per byte of the model's
            weights, rounded up from ``benchmarks/convert_memory.py`` (full FCN-8s, oneDNN /
            Eigen kernels: SavedModel 0.05 / 0.11, LiteRT 9.4 / 7.7, ONNX 4.2 / 3.1).
        write: ``write(serving_model, input_spec, path, calibration)``: calibration inputs
            for an int8 file, else None.

    Examples:
        >>> FORMATS["litert"].suffix, round(FORMATS["litert"].memory * 513 / 1024, 1)  # GiB
        ('.tflite', 5.0)
    """

    suffix: str
    memory: float
    write: Writer


FORMATS: dict[ExportFormat, Format] = {
    "saved_model": Format("", 0.2, _write_saved_model),
    "litert": Format(".tflite", 10.0, _write_litert),
    "onnx": Format(".onnx", 6.0, _write_onnx),
}
"""How each of [`fcn.options.EXPORT_FORMATS`][] is written."""


def _input_spec(format: str, size: tuple[int, int] | None) -> tf.TensorSpec:
    if size is not None and (len(size) != 2 or min(size) < 1):
        raise ValueError(f"size must be (height, width) in pixels, both positive: got {size}")
    if format == "litert" and size is None:
        raise ValueError("a LiteRT file has a fixed image size: pass size=(H, W) (--size H W)")
    height, width = size if size is not None else (None, None)
    batch = 1 if format == "litert" else None
    return tf.TensorSpec((batch, height, width, 3), tf.uint8, name=INPUT_NAME)


def _check_memory(model: keras.Model, format: str) -> None:
    """Refuse, before starting, an export whose converter would need more memory than is
    available (it would be killed, or make the machine swap, with nothing written)."""
    weights = sum(math.prod(w.shape) * tf.as_dtype(w.dtype).size for w in model.weights)
    need = FORMATS[format].memory * weights
    available = available_host_memory()
    if available is not None and need > available:
        raise OutOfMemoryError(
            f"exporting {model.name} ({weights / 2**20:.0f} MiB of weights) to {format} needs "
            f"about {need / 2**30:.1f} GiB of memory, {FORMATS[format].memory:g}x its weights "
            f"(benchmarks/README.md), and {available / 2**30:.1f} GiB are available"
        )


def export_model(
    model: keras.Model | str | os.PathLike | None,
    path: str | os.PathLike,
    format: ExportFormat = "saved_model",
    *,
    size: tuple[int, int] | None = None,
    output: Output = "labels",
    precision: Precision = "float32",
    quantize: Quantization | None = None,
    calibration: CalibrationSource | None = None,
    calibration_images: int | None = None,
) -> Path:
    """Write ``model`` as a SavedModel folder, a ``.tflite`` file or an ``.onnx`` file.

    Args:
        model: a Keras FCN, a ``.keras`` path, a known name (``"fcn8s-voc"``) or None for the
            default model ([`fcn.load_model`][]).
        path: the folder (saved_model) or file to write; an existing one is replaced once the
            new one is complete. A LiteRT file's name must end in ``.tflite``.
        format: one of [`fcn.options.EXPORT_FORMATS`][] (see the module's table).
        size: (height, width) in pixels that the exported model takes; required for
            ``litert``, optional elsewhere (default: any size).
        output: ``"labels"``: (N, H, W) class indices, uint8 up to 256 classes, else int32;
            ``"logits"``: (N, H, W, C) float32.
        precision: ``"float32"`` (default: the file may run on any machine), ``"bfloat16"``
            (the trunk's weights stored and run in bf16, [`fcn.inference.precision`][]: half
            the size; SavedModel only, LiteRT and ONNX Runtime have no bf16 convolutions on a
            CPU) or ``"auto"`` (bfloat16 where this machine runs it natively).
        quantize: None (float), or ``"int8"``: full-integer post-training quantisation of the
            float32 model, for ``litert`` (TensorFlow's converter) and ``onnx`` (ONNX Runtime's
            quantiser); weights int8 per output channel, activations int8 scaled by their
            range on ``calibration``. Needs ``precision="float32"``.
        calibration: the images the int8 activations are calibrated on (required with
            ``quantize``, refused without): a VOC root (its ``train`` images), a folder, or
            image files ([`fcn.inference.calibration`][]); streamed, one image in memory.
        calibration_images: how many of them, spread evenly (all if fewer); default
            [`fcn.options.DEFAULT_CALIBRATION_IMAGES`][].

    Returns:
        ``path``.

    Examples:
        >>> import fcn, numpy as np, tempfile, tensorflow as tf
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> folder = export_model(model, tempfile.mkdtemp() + "/fcn8s", "saved_model")
        >>> served = tf.saved_model.load(str(folder)).signatures["serving_default"]
        >>> served(image=tf.zeros((1, 60, 80, 3), tf.uint8))["labels"].shape
        TensorShape([1, 60, 80])
    """
    if format not in EXPORT_FORMATS:
        raise ValueError(f"unknown format {format!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    spec = _input_spec(format, size)
    path = Path(path)
    if FORMATS[format].suffix and path.suffix != FORMATS[format].suffix:
        raise ValueError(f"{path}: a {format} file's name must end in {FORMATS[format].suffix}")
    inputs = _calibration(format, precision, size, quantize, calibration, calibration_images)
    if resolve_precision(precision) == "bfloat16" and format != "saved_model":
        raise ValueError(
            f"precision {precision!r} means bfloat16 here, which a {format} file cannot run "
            "(no bf16 convolutions in its CPU runtime): export it with precision='float32', "
            "or as format='saved_model'"
        )
    if format == "onnx":
        try:
            import tf2onnx  # noqa: F401  (the converter)
        except ImportError as err:
            raise RuntimeError("ONNX export needs tf2onnx: pip install 'fcn-keras[onnx]'") from err
    if isinstance(model, keras.Model):
        model = in_precision(model, precision)
    else:
        model = load_model(model, precision=precision)
    _check_memory(model, format)
    served = serving_model(model, output)
    path.parent.mkdir(parents=True, exist_ok=True)
    portable = native_convolutions() if format != "saved_model" else contextlib.nullcontext()
    with portable:  # a SavedModel runs on TensorFlow: its fc6 as fast matrix products
        write_whole(path, lambda new: FORMATS[format].write(served, spec, new, inputs))
    return path


def _calibration(
    format: str,
    precision: Precision,
    size: tuple[int, int] | None,
    quantize: Quantization | None,
    calibration: CalibrationSource | None,
    count: int | None,
) -> Inputs | None:
    """The calibration inputs of an int8 export (None for a float one), every combination that
    makes no sense refused by name before anything is done."""
    if quantize is None:
        if calibration is not None or count is not None:
            raise ValueError("calibration images are for quantize='int8' (--quantize int8)")
        return None
    if quantize not in QUANTIZATIONS:
        raise ValueError(f"unknown quantize {quantize!r}; choose one of {', '.join(QUANTIZATIONS)}")
    if format not in QUANTIZED_FORMATS:
        raise ValueError(
            f"quantize={quantize!r} writes {' or '.join(QUANTIZED_FORMATS)} files, whose runtimes "
            f"run int8 convolutions; a {format} runs TensorFlow's float kernels: export it "
            "without quantize"
        )
    if precision != "float32":
        raise ValueError(
            f"quantize={quantize!r} quantises the float32 model: precision={precision!r} with it "
            "makes no sense (bfloat16 weights would be rounded twice); leave precision float32"
        )
    if calibration is None:
        raise ValueError(
            f"quantize={quantize!r} needs calibration images, the range of each activation is "
            "measured on them: pass calibration=VOC_ROOT or image files (--calibration)"
        )
    count = DEFAULT_CALIBRATION_IMAGES if count is None else count
    return calibration_inputs(calibration_files(calibration, count), size)
