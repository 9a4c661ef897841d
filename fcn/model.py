"""FCN-32s, FCN-16s and FCN-8s (Long, Shelhamer & Darrell), layer for layer as ``voc-fcn*s``.

Geometry (all Caffe): conv1_1 sees the input padded by 100 pixels, max pools are 2x2 stride 2
rounding up, fc6 is a 7x7 valid conv. The coarse scores are upsampled by fixed bilinear
transposed convolutions and cropped back onto the input grid at the offsets in
[`CROP_OFFSETS`][], which keep every output pixel's receptive field centred on that pixel for
any input size.
"""

from __future__ import annotations

import numbers
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import keras

from fcn.classes import NUM_CLASSES, default_class_names, read_class_names
from fcn.initialize import Unwritten, restore_initializers, write_glorot
from fcn.layers import BilinearUpsampling, CaffeCrop, LeanConv2D, Scale, ScoreCrop
from fcn.layout import (
    CROP_OFFSETS,
    FC_LAYERS,
    INPUT_PAD,
    VARIANTS,
    VGG_BLOCKS,
    body_layer_names,
    check_variant,
    conv_name,
    pool_name,
)
from fcn.preprocessing import MEAN_BGR, CaffePreprocess
from fcn.vgg16 import imagenet_weights_path, load_vgg16_weights

ATONCE_SCALES = {"pool4": 0.01, "pool3": 0.0001}
"""Fixed scaling of the skip features in the all-at-once FCN-8s."""


PREPROCESS_LAYER = "preprocess"
"""The first layer: [`CaffePreprocess`][] (RGB 0..255 to Caffe's input)."""

PAD_LAYER = "pad"
"""The [`INPUT_PAD`][] zero padding in front of conv1_1."""

HEAD_LAYERS: tuple[str, ...] = (FC_LAYERS[0], "drop6", FC_LAYERS[1], "drop7", "score_fr")
"""The layers after pool5, in order: the convolutionalised fully connected layers and the
coarse scores."""

SKIP_POOLS: dict[str, tuple[int, ...]] = {
    "fcn32s": (), "fcn16s": (4,), "fcn8s": (4, 3), "fcn8s_atonce": (4, 3),
}  # fmt: skip
"""The VGG blocks whose pools feed a skip branch, in fusion order, per variant."""

UPSAMPLERS: dict[str, str] = {
    "fcn32s": "upscore", "fcn16s": "upscore16", "fcn8s": "upscore8", "fcn8s_atonce": "upscore8",
}  # fmt: skip
"""The last (transposed-convolution) upsampler of each variant, before the final crop."""

SCORE_LAYER = "score"
"""The last layer: the class scores on the input's grid (a [`ScoreCrop`][]
holding the class names)."""


def skip_layer_names(pool: str) -> tuple[str, str]:
    """(the at-once scaling, the score layer) of the skip branch off ``pool`` ("pool4").

    Examples:
        >>> skip_layer_names("pool4")
        ('scale_pool4', 'score_pool4')
    """
    return f"scale_{pool}", f"score_{pool}"


@dataclass(frozen=True)
class Topology:
    """Which layers of a [`build_model`][] FCN form what, by name: the contract that
    [`fcn.inference.streamed`][] (and anything else that walks the graph) reads instead of
    guessing from names.

    Attributes:
        variant: one of [`VARIANTS`][].
        chain: the layers from the padded input to the coarse scores, in order (conv1_1 ..
            pool5, then [`HEAD_LAYERS`][]); each consumes the one before.
        branches: chain layer -> the per-pixel layers (the at-once scaling, the skip score)
            that run on its output, in order.
        upsampler: the last transposed convolution, whose output [`crop`][fcn.model.Topology] cuts
            onto the input grid at ``CROP_OFFSETS[variant]["score"]``.
        preprocess, pad, crop: the first layer, the padding in front of conv1_1, the last
            layer.

    Examples:
        >>> t = topology("fcn16s")
        >>> t.chain[0], t.chain[-1], t.branches, t.upsampler
        ('conv1_1', 'score_fr', {'pool4': ('score_pool4',)}, 'upscore16')
    """

    variant: str
    chain: tuple[str, ...]
    branches: Mapping[str, tuple[str, ...]]
    upsampler: str
    preprocess: str = PREPROCESS_LAYER
    pad: str = PAD_LAYER
    crop: str = SCORE_LAYER

    def layer_names(self) -> set[str]:
        """Every layer the topology names."""
        branched = {name for path in self.branches.values() for name in path}
        return {*self.chain, *branched, self.upsampler, self.preprocess, self.pad, self.crop}


def topology(variant: str) -> Topology:
    """The [`Topology`][] of ``variant`` as [`build_model`][] builds it.

    Examples:
        >>> t = topology("fcn8s_atonce")
        >>> len(t.chain), t.branches["pool4"], t.upsampler
        (23, ('scale_pool4', 'score_pool4'), 'upscore8')
    """
    check_variant(variant)
    branches = {}
    for block in sorted(SKIP_POOLS[variant]):
        scale, score = skip_layer_names(pool_name(block))
        branches[pool_name(block)] = (scale, score) if variant == "fcn8s_atonce" else (score,)
    return Topology(variant, (*body_layer_names(), *HEAD_LAYERS), branches, UPSAMPLERS[variant])


def topology_of(model: keras.Model) -> Topology | None:
    """The [`Topology`][] whose layers ``model`` has (the richest, if several match), or
    None for a model that is not an FCN of [`build_model`][] by its layer names. Whether
    its graph really has that shape is for the reader to check (the names are the contract).

    Examples:
        >>> topology_of(build_model("fcn8s_atonce", weights=None, width=1 / 16)).variant
        'fcn8s_atonce'
    """
    return topology_named({layer.name for layer in model.layers})


def topology_named(names: set[str]) -> Topology | None:
    """[`topology_of`][] for a model with layers of these ``names`` (built or not: a config).

    Examples:
        >>> topology_named({"conv1_1", "score"}) is None
        True
    """
    matches = [topology(v) for v in VARIANTS if topology(v).layer_names() <= names]
    return max(matches, key=lambda t: len(t.layer_names()), default=None)


def _upscore(name: str, classes: int, kernel: int, stride: int, learnable: bool):
    return keras.layers.Conv2DTranspose(
        classes, kernel, strides=stride, use_bias=False, name=name,
        kernel_initializer=BilinearUpsampling(), trainable=learnable,
    )  # fmt: skip


def _glorot_conv(name: str, filters: int, size: int, **kwargs) -> LeanConv2D:
    """A ReLU conv of the VGG body or fc6/fc7 whose kernel [`build_model`][] writes in place
    ([`fcn.initialize`][]): Keras' glorot-uniform default, without its full-size temporaries;
    its gradients are lean too ([`LeanConv2D`][])."""
    return LeanConv2D(
        filters, size, activation="relu", kernel_initializer=Unwritten(), name=name, **kwargs
    )


def _score(name: str, classes: int):
    return keras.layers.Conv2D(classes, 1, kernel_initializer="zeros", name=name)


def class_names(model: keras.Model) -> tuple[str, ...]:
    """The names of ``model``'s classes: those it was built with, else
    [`fcn.classes.default_class_names`][] of its class count.

    Examples:
        >>> model = build_model("fcn8s", weights=None, width=1 / 16, class_names=["sky", "road"])
        >>> class_names(model)
        ('sky', 'road')
    """
    try:
        stored = getattr(model.get_layer(SCORE_LAYER), "class_names", None)
    except ValueError:  # not an fcn model
        stored = None
    return stored or default_class_names(model.output_shape[-1])


def build_model(
    variant: str = "fcn8s",
    num_classes: int | None = None,
    weights: str | None = "imagenet",
    *,
    class_names: Sequence[str] | str | os.PathLike | None = None,
    width: float = 1.0,
    dropout: float = 0.5,
    learnable_upsampling: bool = False,
    init_from: keras.Model | None = None,
    mean: tuple[float, float, float] = MEAN_BGR,
) -> keras.Model:
    """Build an FCN.

    Args:
        variant: one of [`VARIANTS`][].
        num_classes: number of output classes (background included); default: as many as
            ``class_names``, else 21 (VOC).
        weights: ``"imagenet"`` (Keras' VGG16 file, downloaded once into Keras' cache), a path to
            a Keras VGG16 weights file (full, or 'notop' with a warning), or ``None`` (random).
        width: channel multiplier of the VGG body and fc6/fc7 (1.0 = the paper's net; smaller
            values keep the topology for fast tests and demos, only with ``weights=None``).
        dropout: dropout rate after fc6 and fc7.
        learnable_upsampling: train the bilinear upsampling kernels (frozen by default).
        init_from: a trained coarser FCN whose layers of the same name initialise this one
            (the paper's staged training: 16s from 32s, 8s from 16s).
        class_names: the classes' names (a list, or a text file of one per line), stored in
            the model ([`class_names`][] reads them back, also from a saved ``.keras``).
        mean: the BGR mean pixel (0..255) the first layer subtracts: that of the weights
            (Keras' VGG16 by default; the paper's for models converted from Caffe).

    Returns:
        A model from RGB images (N, H, W, 3), uint8 or float in 0..255, of any H and W, to
        float32 logits (N, H, W, num_classes) on the same pixel grid. Its layers are those of
        [`topology`][] (``variant``). Building changes no device setting: on a
        GPU, call [`fcn.enable_memory_growth`][fcn.device.enable_memory_growth] first.

    Examples:
        >>> import numpy as np
        >>> model = build_model("fcn8s", weights=None, width=1 / 16)
        >>> model(np.zeros((1, 37, 53, 3), np.uint8)).shape
        TensorShape([1, 37, 53, 21])
    """
    check_variant(variant)
    names = read_class_names(class_names) if class_names is not None else None
    if num_classes is None:
        num_classes = len(names) if names else NUM_CLASSES
    if names and len(names) != num_classes:
        raise ValueError(f"{len(names)} class names for num_classes={num_classes}")
    if isinstance(num_classes, bool) or not isinstance(num_classes, numbers.Integral) or (
        num_classes < 1
    ):
        raise ValueError(f"num_classes={num_classes!r}: an FCN scores a whole number >= 1 of them")
    if not width > 0:
        raise ValueError(f"width={width!r}: the channel multiplier must be positive")
    if width != 1.0 and weights is not None:
        raise ValueError("a width-reduced model cannot take VGG16 weights: pass weights=None")
    offsets = CROP_OFFSETS[variant]

    def channels(n: int) -> int:
        return max(1, int(round(n * width)))

    image = keras.Input((None, None, 3), name="image")
    x = CaffePreprocess(mean, name=PREPROCESS_LAYER)(image)
    x = keras.layers.ZeroPadding2D(INPUT_PAD, name=PAD_LAYER)(x)
    pools = {}
    for block, (convs, filters) in enumerate(VGG_BLOCKS, 1):
        for i in range(1, convs + 1):
            padding = "valid" if (block, i) == (1, 1) else "same"
            x = _glorot_conv(conv_name(block, i), channels(filters), 3, padding=padding)(x)
        x = keras.layers.MaxPooling2D(2, 2, padding="same", name=pool_name(block))(x)
        pools[block] = x
    fc6, drop6, fc7, drop7, score_fr = HEAD_LAYERS
    x = _glorot_conv(fc6, channels(4096), 7)(x)
    x = keras.layers.Dropout(dropout, name=drop6)(x)
    x = _glorot_conv(fc7, channels(4096), 1)(x)
    x = keras.layers.Dropout(dropout, name=drop7)(x)
    x = _score(score_fr, num_classes)(x)

    def fuse(x, pool: int):
        """2x upsample ``x`` and add the cropped scores of ``pool<pool>``."""
        up_name = "upscore2" if pool == 4 else "upscore_pool4"
        x = _upscore(up_name, num_classes, 4, 2, learnable_upsampling)(x)
        skip = pools[pool]
        scale_name, score_name = skip_layer_names(pool_name(pool))
        if variant == "fcn8s_atonce":
            skip = Scale(ATONCE_SCALES[pool_name(pool)], name=scale_name)(skip)
        skip = _score(score_name, num_classes)(skip)
        skip = CaffeCrop(offsets[f"score_pool{pool}c"], name=f"score_pool{pool}c")([skip, x])
        return keras.layers.Add(name=f"fuse_pool{pool}")([x, skip])

    for pool in SKIP_POOLS[variant]:
        x = fuse(x, pool)
    stride = 2 ** (5 - len(SKIP_POOLS[variant]))  # 32, 16 or 8: the resolution reached
    x = _upscore(UPSAMPLERS[variant], num_classes, 2 * stride, stride, learnable_upsampling)(x)
    score = ScoreCrop(offsets["score"], names, dtype="float32", name=SCORE_LAYER)
    logits = score([x, image])
    model = keras.Model(image, logits, name=variant)

    path = imagenet_weights_path() if weights == "imagenet" else weights
    written = load_vgg16_weights(model, os.fspath(path)) if path is not None else set()
    for name in restore_initializers(model):
        if name not in written:  # random: everything a weights file did not hold
            write_glorot(model.get_layer(name).kernel)
    if init_from is not None:
        transfer_weights(init_from, model)
    return model


def transfer_weights(source: keras.Model, target: keras.Model) -> list[str]:
    """Copy the weights of every layer that ``source`` and ``target`` share by name and shape.

    Returns the names of the copied layers (for staged training: FCN-16s from FCN-32s copies the
    VGG body, fc6, fc7 and score_fr; score_pool4 stays at zero).

    Examples:
        >>> fcn32s = build_model("fcn32s", weights=None, width=1 / 16)
        >>> copied = transfer_weights(fcn32s, build_model("fcn16s", weights=None, width=1 / 16))
        >>> len(copied), copied[-3:], "score_pool4" in copied
        (16, ['fc6', 'fc7', 'score_fr'], False)
    """
    copied = []
    for layer in target.layers:
        try:
            other = source.get_layer(layer.name)
        except ValueError:
            continue
        theirs = other.get_weights()
        ours = layer.get_weights()
        if ours and [w.shape for w in theirs] == [w.shape for w in ours]:
            layer.set_weights(theirs)
            copied.append(layer.name)
    return copied
