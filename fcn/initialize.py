"""Kernels written in place, a slice at a time, so that no layer's weights ever exist twice.

Keras creates each variable from its initializer's full-size result. For fc6 (7 x 7 x 512 x
4096, 392 MiB) a glorot draw leaves temporaries of several times that behind, and a build from
a weights file paid for that draw and then for a second, whole VGG16 model to read the file
into (the figures:
`docs/design.md#the-model-fcnmodelpy-fcnlayerspy-fcnvgg16py-fcninitializepy`).
[`fcn.build_model`][] therefore creates every glorot kernel from uninitialised memory
([`Unwritten`][], untouched pages cost no RAM) and then writes it here in slices of at most
[`SLICE_ELEMENTS`][] values: either random with glorot's distribution ([`write_glorot`][]) or
straight from a file's slices ([`write_slices`][]: VGG16 files in [`fcn.vgg16`][], ``.keras``
archives in [`load_keras_in_place`][], which [`fcn.load_model`][] uses).

A kernel (..., C_in, C_out) is written as blocks of rows of its (prod(...) * C_in, C_out)
view: one block never crosses a leading index, so each is one strided-slice assignment.
"""

from __future__ import annotations

import json
import math
import os
import random
import zipfile
from collections.abc import Callable, Iterator

import h5py
import keras
import numpy as np
import tensorflow as tf

from fcn._compat import host_view

SLICE_ELEMENTS = 2**18
"""Most values written at once (1 MiB of float32): the only temporary beside the kernel."""

RowBlock = tuple[tuple[int, ...], int, int]
"""(leading index, first row, end row) of a kernel (..., C_in, C_out): the block
``kernel[lead][first:end, :]``."""


@keras.saving.register_keras_serializable(package="fcn")
class Unwritten(keras.initializers.Initializer):
    """Uninitialised memory of the right shape: a placeholder that [`write_glorot`][] or
    [`write_slices`][] must overwrite before the variable is read.

    [`fcn.build_model`][] and [`load_keras_in_place`][] put the layer's real initializer
    back ([`restore_initializers`][]), so a saved model's config never names this class.

    Examples:
        >>> layer = keras.layers.Conv2D(16, 3, kernel_initializer=Unwritten())
        >>> layer.build((None, None, None, 8))  # a kernel of whatever the memory held
        >>> write_glorot(layer.kernel)  # now written, slice by slice
        >>> tuple(layer.kernel.shape)
        (3, 3, 8, 16)
    """

    def __call__(self, shape, dtype=None):
        return tf.raw_ops.Empty(shape=shape, dtype=dtype or "float32", init=False)


def row_blocks(shape: tuple[int, ...]) -> Iterator[RowBlock]:
    """The row blocks, of at most [`SLICE_ELEMENTS`][] values, that cover a kernel of
    ``shape`` (..., C_in, C_out), in memory order.

    Examples:
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
    the (end - first, C_out) values of [`row_blocks`][]' ``block``.

    A copy of the variable in host memory is written through a NumPy view of its own buffer
    (``_host_buffer``). Not with TensorFlow's ``ResourceStridedSliceAssign``: a sliced
    assignment puts the variable in "copy on read" mode for good, after which every read of it
    (every forward pass) copies the whole kernel and every optimizer update copies it again
    (the figures:
    `docs/design.md#the-model-fcnmodelpy-fcnlayerspy-fcnvgg16py-fcninitializepy`).
    A copy on another device (a GPU) is assembled in host memory and assigned whole.

    Examples:
        >>> kernel = keras.Variable(np.zeros((2, 3, 4), "float32"))
        >>> write_slices(kernel, lambda block: np.full((block[2] - block[1], 4), block[0][0]))
        >>> kernel.numpy()[:, :, 0].tolist()  # each block's leading index
        [[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    """
    *lead, _, cols = variable.shape
    dtype = tf.as_dtype(variable.dtype).as_numpy_dtype  # bfloat16 too (ml_dtypes)
    value = variable.value
    # under a tf.distribute strategy: one copy per device, each written alike
    copies = value.values if isinstance(value, tf.distribute.DistributedValues) else (value,)
    buffers = [_host_buffer(copy) for copy in copies]
    staged = None
    if any(buffer is None for buffer in buffers):
        staged = np.empty(tuple(variable.shape), dtype=dtype)
    for block in row_blocks(tuple(variable.shape)):
        index, first, end = block
        values = np.asarray(read(block), dtype=dtype)
        if values.shape != (end - first, cols):
            raise ValueError(f"{variable.path}: block {block} got values of shape {values.shape}")
        for buffer in (*buffers, staged):
            if buffer is not None:
                buffer[(*index, slice(first, end))] = values
    for copy, buffer in zip(copies, buffers):
        if buffer is None:
            copy.assign(staged)


def _host_buffer(variable: tf.Variable) -> np.ndarray | None:
    """A writable NumPy view of ``variable``'s own buffer where it lives in host memory and a
    read of it shares that buffer (two reads give the same address), else None."""
    if "CPU" not in variable.device.upper():
        return None
    first, second = (
        host_view(tf.raw_ops.ReadVariableOp(resource=variable.handle, dtype=variable.dtype))
        for _ in range(2)
    )
    if first.ctypes.data != second.ctypes.data or not first.flags.writeable:
        return None
    return first


def glorot_limit(shape: tuple[int, ...]) -> float:
    """Bound of Keras' ``GlorotUniform`` for a conv kernel (kh, kw, C_in, C_out):
    sqrt(6 / (fan_in + fan_out)), fans = kh * kw * C_in and kh * kw * C_out.

    Examples:
        >>> round(glorot_limit((7, 7, 512, 4096)), 6)
        0.005155
    """
    receptive = math.prod(shape[:-2])
    return math.sqrt(6 / (receptive * (shape[-2] + shape[-1])))


def write_glorot(variable) -> None:
    """Fill ``variable`` in place with glorot-uniform values (Keras' default kernel
    initializer, bounds from the whole shape), from a generator seeded by Python's ``random``
    (so ``keras.utils.set_random_seed`` makes builds repeatable).

    Examples:
        >>> kernel = keras.Variable(np.zeros((3, 3, 8, 16), "float32"))
        >>> write_glorot(kernel)
        >>> bool(np.all(np.abs(kernel.numpy()) <= glorot_limit((3, 3, 8, 16)))), kernel.dtype
        (True, 'float32')
    """
    limit = glorot_limit(tuple(variable.shape))
    rng = np.random.default_rng(random.getrandbits(64))

    def draw(block: RowBlock) -> np.ndarray:
        _, first, end = block
        values = rng.random((end - first, variable.shape[-1]), dtype=np.float32)
        values *= 2 * limit
        values -= limit
        return values

    write_slices(variable, draw)


def h5_layer_weights(f: h5py.File) -> dict[str, tuple[h5py.Dataset, ...]]:
    """Keras layer name -> its weight datasets (kernel, bias, ...), unread, in either layout Keras
    writes: the legacy one of its published files (a group per layer, listed in the file's
    ``layer_names``, each naming its datasets in ``weight_names``) or Keras 3's
    ``.weights.h5`` (``layers/<auto name>/vars/0, 1``, the layer's name in the ``vars`` group's
    ``name`` attribute).

    Examples:
        >>> import tempfile
        >>> model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2, name="fc")])
        >>> path = tempfile.mkdtemp() + "/model.weights.h5"; model.save_weights(path)
        >>> with h5py.File(path) as f:
        ...     {name: [w.shape for w in weights] for name, weights in h5_layer_weights(f).items()}
        {'fc': [(4, 2), (2,)]}
    """

    def text(value) -> str:
        return value.decode() if isinstance(value, bytes) else str(value)

    found = {}
    if "layer_names" in f.attrs:
        for name in map(text, f.attrs["layer_names"]):
            group = f[name]
            weights = [group[text(w)] for w in group.attrs.get("weight_names", [])]
            if weights:
                found[name] = tuple(weights)
    elif isinstance(f.get("layers"), h5py.Group):
        for group in f["layers"].values():
            variables = group.get("vars")
            if isinstance(variables, h5py.Group) and len(variables) and "name" in variables.attrs:
                found[text(variables.attrs["name"])] = tuple(variables[str(i)] for i in
                                                             range(len(variables)))  # fmt: skip
    return found


def kernel_fits(stored: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """Whether a stored kernel is ``shape`` or its Dense view (prod(shape[:-1]), C_out).

    Examples:
        >>> kernel_fits((25088, 4096), (7, 7, 512, 4096)), kernel_fits((4096,), (7, 7, 512, 4096))
        (True, False)
    """
    return stored == shape or stored == (int(np.prod(shape[:-1])), shape[-1])


def dataset_reader(kernel: h5py.Dataset, shape: tuple[int, ...]):
    """Row blocks of the target kernel ``shape`` (..., C_in, C_out) read from ``kernel``,
    either of that shape or Keras' Dense (prod(...) * C_in, C_out): ``fc1`` (25088, 4096) holds
    fc6's (7, 7, 512, 4096) in the same row-major order, so block rows map one to one.

    Examples:
        >>> import tempfile
        >>> with h5py.File(tempfile.mkdtemp() + "/dense.h5", "w") as f:
        ...     dense = f.create_dataset("fc", data=np.arange(24.0).reshape(6, 4))  # (2 * 3, 4)
        ...     dataset_reader(dense, (2, 3, 4))(((1,), 0, 3)).tolist()[0]  # kernel[1][0:3][0]
        [12.0, 13.0, 14.0, 15.0]
    """
    *lead, rows, _ = shape

    def read(block: RowBlock):
        index, first, end = block
        if kernel.ndim == 2:
            offset = int(np.ravel_multi_index(index, lead)) * rows
            return kernel[offset + first : offset + end]
        return kernel[(*index, slice(first, end))]

    return read


def restore_initializers(model: keras.Model) -> list[str]:
    """Give every layer with an [`Unwritten`][] kernel Keras' glorot-uniform initializer
    back (what its config then names); returns those layers' names. Their kernels must be
    written ([`write_glorot`][], [`write_slices`][]) by the caller.

    Examples:
        >>> dense = keras.layers.Dense(2, kernel_initializer=Unwritten(), name="fc")
        >>> model = keras.Sequential([keras.Input((4,)), dense])
        >>> restore_initializers(model), type(dense.kernel_initializer).__name__
        (['fc'], 'GlorotUniform')
        >>> write_glorot(dense.kernel)  # its kernel: still to be written
    """
    names = []
    for layer in model.layers:
        if isinstance(getattr(layer, "kernel_initializer", None), Unwritten):
            layer.kernel_initializer = keras.initializers.get("glorot_uniform")
            names.append(layer.name)
    return names


def load_keras_in_place(
    path: str | os.PathLike,
    *,
    safe_mode: bool = True,
    edit: Callable[[dict], None] | None = None,
) -> keras.Model:
    """Load a ``.keras`` model file, every kernel written in place from the archive's weights
    file slice by slice (Keras' own loader draws every glorot kernel first and then reads each
    variable whole beside it).

    The config is Keras' (deserialised in ``safe_mode``) with its glorot-uniform kernels
    created [`Unwritten`][]; every variable of every layer is then read from the file,
    which must hold them all, with the shapes of the config. The model comes back
    uncompiled: a training checkpoint's optimizer (``epoch-0050.keras``) is neither rebuilt nor
    read (its class lives in the training wing, which inference never imports). ``edit``, if
    given, changes the model's config (the ``"config"`` of the file's ``config.json``) in place
    first: [`fcn.inference.precision.set_precision`][] makes the model bf16 before any weight
    exists, so each is read from the file straight into its bf16 variable.

    Raises:
        ValueError: not a ``.keras`` archive, or it lacks a layer's weights or holds another
            shape (named).

    Examples:
        >>> import fcn, tempfile
        >>> path = tempfile.mkdtemp() + "/m.keras"
        >>> fcn.build_model("fcn8s", weights=None, width=1 / 16).save(path)
        >>> tuple(load_keras_in_place(path).get_layer("fc6").kernel.shape)
        (7, 7, 32, 256)
    """
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a .keras model file (not a zip archive)")
    with zipfile.ZipFile(path) as archive:
        config = json.loads(archive.read("config.json"))
        config.pop("compile_config", None)  # the model, not a training checkpoint's optimizer
        _defer_glorot(config)
        if edit is not None:
            edit(config["config"])
        model = keras.saving.deserialize_keras_object(config, safe_mode=safe_mode)
        with archive.open("model.weights.h5") as stream, h5py.File(stream, "r") as f:
            stored = h5_layer_weights(f)
            for layer in model.layers:
                if not layer.weights:
                    continue
                datasets = stored.get(layer.name, ())
                if [d.shape for d in datasets] != [tuple(v.shape) for v in layer.weights]:
                    raise ValueError(
                        f"{path}: the weights of layer {layer.name} are "
                        f"{[d.shape for d in datasets] or 'missing'}, its config needs "
                        f"{[tuple(v.shape) for v in layer.weights]}"
                    )
                for variable, dataset in zip(layer.weights, datasets):
                    if len(variable.shape) >= 2:
                        read = dataset_reader(dataset, tuple(variable.shape))
                        write_slices(variable, lambda block, read=read, d=dataset: _stored(
                            d, read(block)))  # fmt: skip
                    else:
                        variable.assign(_stored(dataset, dataset[()]))
    restore_initializers(model)
    return model


def _stored(dataset: h5py.Dataset, values: np.ndarray) -> np.ndarray:
    """``values`` read from ``dataset`` as numbers: Keras stores bf16 weights as 2 raw bytes
    each (h5py has no bf16) with the attribute ``dtype="bfloat16"``."""
    if dataset.attrs.get("dtype") == "bfloat16":
        return values.view(tf.bfloat16.as_numpy_dtype)
    return values


def _defer_glorot(config) -> None:
    """Turn every glorot-uniform ``kernel_initializer`` (without a seed) in a serialised
    Keras config into [`Unwritten`][], in place."""
    if isinstance(config, dict):
        init = config.get("kernel_initializer")
        if isinstance(init, dict) and init.get("class_name") == "GlorotUniform":
            if (init.get("config") or {}).get("seed") is None:
                config["kernel_initializer"] = keras.saving.serialize_keras_object(Unwritten())
        for value in config.values():
            _defer_glorot(value)
    elif isinstance(config, list):
        for value in config:
            _defer_glorot(value)
