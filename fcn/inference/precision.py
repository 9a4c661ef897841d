"""Inference in bfloat16 where the hardware has it: the model in the precision that runs.

``precision="auto"`` of [`fcn.predict`][], [`fcn.evaluate`][],
[`predict_tiled`][fcn.inference.tiling.predict_tiled] and the command line means bfloat16 where
[`fcn.device.bf16_runs_natively`][] (AMX or AVX512-BF16 under oneDNN, a bf16 GPU), else float32. A
bfloat16 FCN holds the VGG trunk ([`Topology.chain`][fcn.model.Topology] up to ``score_fr``: every
convolution but the score layers) in bfloat16 variables that compute in bfloat16 with float32
accumulation inside each kernel; every score layer, the fusion and the upsampling keep float32
weights and sums, so the scores are compared in float32. The trunk holds nearly all of the FLOPs and
weights.

[`in_precision`][] gives the model to run: the model itself where it already computes in that
precision, else a copy of it in that precision. A copy is made once per model (and goes when
the model does) and takes the model's current weights at every call, so a
model that trains between evaluations is evaluated with its new weights. [`fcn.load_model`][]
with ``precision=`` builds the model in that precision and reads each weight from the file into
it ([`set_precision`][]): no float32 copy ever exists.
"""

from __future__ import annotations

import weakref

import keras
import tensorflow as tf

from fcn.device import resolve_precision
from fcn.model import topology_named
from fcn.options import Precision


def trunk_layers(model: keras.Model | set[str]) -> set[str]:
    """Names of the layers that run in bfloat16 in a bfloat16 ``model`` (or a model with layers
    of these names): its topology's chain without the last (score) layer; every layer of a
    model that is not an FCN of [`fcn.build_model`][] by its names.

    Examples:
        >>> import fcn
        >>> trunk = trunk_layers(fcn.build_model("fcn8s", weights=None, width=1 / 16))
        >>> "fc7" in trunk, "score_fr" in trunk, "score_pool4" in trunk, "upscore8" in trunk
        (True, False, False, False)
    """
    names = model if isinstance(model, set) else {layer.name for layer in model.layers}
    found = topology_named(names)
    return names if found is None else set(found.chain[:-1])


def set_precision(config: dict, dtype: str) -> None:
    """Make a functional model's config (``model.get_config()``) one of a model in ``dtype``
    (``"float32"`` or ``"bfloat16"``), in place: the [`trunk_layers`][] in ``dtype``, every
    other layer in float32.

    Examples:
        >>> import fcn
        >>> config = fcn.build_model("fcn8s", weights=None, width=1 / 16).get_config()
        >>> set_precision(config, "bfloat16")
        >>> model = keras.Model.from_config(config)
        >>> [model.get_layer(name).dtype_policy.name for name in ("conv1_1", "score_fr")]
        ['bfloat16', 'float32']
    """
    trunk = trunk_layers({layer["config"]["name"] for layer in config["layers"]})
    for layer in config["layers"]:
        if layer["class_name"] != "InputLayer":
            layer["config"]["dtype"] = dtype if layer["config"]["name"] in trunk else "float32"


def model_precision(model: keras.Model) -> str:
    """The precision ``model`` runs in: ``"bfloat16"`` where its trunk ([`trunk_layers`][])
    computes in bfloat16 (also under a ``mixed_bfloat16`` policy), ``"float32"`` where every
    layer computes in float32, else ``"mixed"`` (a ``mixed_float16`` model, say).

    Examples:
        >>> import fcn
        >>> model_precision(fcn.build_model("fcn8s", weights=None, width=1 / 16))
        'float32'
    """
    trunk = trunk_layers(model)
    computes = {layer.compute_dtype for layer in model.layers if layer.name in trunk}
    if computes == {"bfloat16"}:
        return "bfloat16"
    if all(layer.compute_dtype == "float32" for layer in model.layers):
        return "float32"
    return "mixed"


_COPIES: weakref.WeakKeyDictionary[keras.Model, dict[str, tuple]] = weakref.WeakKeyDictionary()
"""Each model's copies by dtype, with the function that gives a copy the model's weights; an
entry goes with its model (a copy holds none of the model, only its variables)."""


def _copy_in(model: keras.Model, dtype: str) -> keras.Model:
    """``model``'s architecture with the trunk in ``dtype`` and every other layer in float32."""
    config = model.get_config()
    set_precision(config, dtype)
    copy = type(model).from_config(config)
    for source, target in zip(model.weights, copy.weights):
        if source.shape != target.shape:  # the same config builds the same weights, in order
            raise RuntimeError(f"{model.name}: {source.path} does not match {target.path}")
    return copy


def in_precision(model: keras.Model, precision: Precision | None = "auto") -> keras.Model:
    """``model`` to run in ``precision`` (see the module): itself, or its cached copy in that
    precision holding the model's current weights. None: the model as it is.

    Raises:
        ValueError: for a precision not in [`fcn.options.PRECISIONS`][], naming it.

    Examples:
        >>> import fcn
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> in_precision(model, "float32") is model
        True
        >>> bf16 = in_precision(model, "bfloat16")
        >>> [bf16.get_layer(name).kernel.dtype for name in ("fc6", "score_fr")]
        ['bfloat16', 'float32']
    """
    if precision is None:
        return model
    dtype = resolve_precision(precision)
    if model_precision(model) == dtype:
        return model
    copies = _COPIES.setdefault(model, {})
    if dtype not in copies:
        copy = _copy_in(model, dtype)
        pairs = list(zip(model.weights, copy.weights))

        @tf.function
        def take_weights():
            for source, target in pairs:
                target.assign(tf.cast(source.value, target.dtype))

        copies[dtype] = copy, take_weights
    copy, take_weights = copies[dtype]
    take_weights()
    return copy
