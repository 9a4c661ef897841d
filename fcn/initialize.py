"""Kernels written in place, a slice at a time, so that no layer's weights ever exist twice.

Keras creates each variable from its initializer's full-size result. For fc6 (7 x 7 x 512 x
4096, 392 MiB) a glorot draw leaves temporaries of several times that behind: building one fc6
raised RSS by 1,244 MiB under oneDNN and peaked 1,180 MiB above the import under Eigen
(measured, ``benchmarks/README.md``), and a build from a weights file paid for that draw and
then for a second, whole VGG16 model to read the file into. :func:`fcn.build_model` therefore
creates every glorot kernel from uninitialised memory (:class:`Unwritten`, untouched pages cost
no RAM) and then writes it here in slices of at most :data:`SLICE_ELEMENTS` values: either
random with glorot's distribution (:func:`write_glorot`) or straight from a file's slices
(:func:`write_slices`, see :mod:`fcn.vgg16`).

A kernel (..., C_in, C_out) is written as blocks of rows of its (prod(...) * C_in, C_out)
view: one block never crosses a leading index, so each is one strided-slice assignment.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterator

import keras
import numpy as np
import tensorflow as tf

SLICE_ELEMENTS = 2**18
"""Most values written at once (16 MiB of float32): the only temporary beside the kernel."""

RowBlock = tuple[tuple[int, ...], int, int]
"""(leading index, first row, end row) of a kernel (..., C_in, C_out): the block
``kernel[lead][first:end, :]``."""


@keras.saving.register_keras_serializable(package="fcn")
class Unwritten(keras.initializers.Initializer):
    """Uninitialised memory of the right shape: a placeholder that :func:`write_glorot` or
    :func:`write_slices` must overwrite before the variable is read.

    :func:`fcn.build_model` puts the layer's real initializer back once the kernel is written,
    so a saved model's config never names this class.
    """

    def __call__(self, shape, dtype=None):
        return tf.raw_ops.Empty(shape=shape, dtype=dtype or "float32", init=False)


def row_blocks(shape: tuple[int, ...]) -> Iterator[RowBlock]:
    """The row blocks, of at most :data:`SLICE_ELEMENTS` values, that cover a kernel of
    ``shape`` (..., C_in, C_out), in memory order.

    Example:
        >>> list(row_blocks((1, 2, 3, 4)))
        [((0, 0), 0, 3), ((0, 1), 0, 3)]
    """
    *lead, rows, cols = shape
    step = max(1, SLICE_ELEMENTS // cols)
    for index in np.ndindex(*lead):
        for first in range(0, rows, step):
            yield tuple(int(i) for i in index), first, min(rows, first + step)


def write_slices(variable, read: Callable[[RowBlock], np.ndarray]) -> None:
    """Fill ``variable`` (..., C_in, C_out) in place, block by block: ``read(block)`` returns
    the (end - first, C_out) values of :func:`row_blocks`' ``block``."""
    *lead, _, cols = variable.shape
    value = variable.value
    # under a tf.distribute strategy: one copy per device, each written alike
    copies = value.values if isinstance(value, tf.distribute.DistributedValues) else (value,)
    for block in row_blocks(tuple(variable.shape)):
        index, first, end = block
        values = np.asarray(read(block), dtype=variable.dtype)
        if values.shape != (end - first, cols):
            raise ValueError(f"{variable.path}: block {block} got values of shape {values.shape}")
        for copy in copies:
            with tf.device(copy.device):
                tf.raw_ops.ResourceStridedSliceAssign(
                    ref=copy.handle,
                    begin=[*index, first, 0],
                    end=[*(i + 1 for i in index), end, cols],
                    strides=[1] * len(variable.shape),
                    value=values.reshape((1,) * len(lead) + values.shape),
                )  # fmt: skip


def glorot_limit(shape: tuple[int, ...]) -> float:
    """Bound of Keras' ``GlorotUniform`` for a conv kernel (kh, kw, C_in, C_out):
    sqrt(6 / (fan_in + fan_out)), fans = kh * kw * C_in and kh * kw * C_out.

    Example:
        >>> round(glorot_limit((7, 7, 512, 4096)), 6)
        0.004906
    """
    receptive = math.prod(shape[:-2])
    return math.sqrt(6 / (receptive * (shape[-2] + shape[-1])))


def write_glorot(variable) -> None:
    """Fill ``variable`` in place with glorot-uniform values (Keras' default kernel
    initializer, bounds from the whole shape), from a generator seeded by Python's ``random``
    (so :func:`keras.utils.set_random_seed` makes builds repeatable)."""
    limit = glorot_limit(tuple(variable.shape))
    rng = np.random.default_rng(random.getrandbits(64))

    def draw(block: RowBlock) -> np.ndarray:
        _, first, end = block
        values = rng.random((end - first, variable.shape[-1]), dtype=np.float32)
        values *= 2 * limit
        values -= limit
        return values

    write_slices(variable, draw)
