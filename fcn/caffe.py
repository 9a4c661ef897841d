"""Caffe ``.caffemodel`` files without Caffe: a streaming reader of their protobuf wire format,
and the conversion of the paper's trained FCNs into fcn models ([`convert_caffe`][]).

A ``.caffemodel`` is one ``NetParameter`` protobuf message. Its layers are field 100
(``LayerParameter``: name 1, type 2, blobs 7) or, in files written before Caffe's 2015 layer
format, field 2 (``V1LayerParameter``: name 4, type 5 (an enum), blobs 6). A blob is a
``BlobProto``: data 5 (packed float32), shape 7 (``BlobShape``: dim 1, packed int64), or in
older files num / channels / height / width 1-4. [`read_caffemodel`][] walks the file once
and notes each blob's shape and where its floats lie, reading none of them; [`CaffeBlob.read`][]
reads one blob when it is wanted. A VGG FCN file is ~540 MB: the conversion holds the model and
one blob, never two copies of the file.

Layouts: a Caffe ``Convolution`` kernel is (out, in, kh, kw), Keras' ``Conv2D`` (kh, kw, in,
out). A Caffe ``Deconvolution`` kernel is (in, out, kh, kw): the kernel of the convolution from
its output to its input, in Caffe's (out, in) order, whose gradient it computes; Keras'
``Conv2DTranspose`` (TensorFlow's ``conv2d_transpose``, the same gradient) keeps that forward
convolution's kernel as (kh, kw, its in, its out) = (kh, kw, out, in) of the deconvolution. So
both map by the same axis order (2, 3, 1, 0), without flipping the kernel.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import keras
import numpy as np

from fcn.initialize import write_slices
from fcn.layout import VGG_BLOCKS, check_variant, conv_name
from fcn.model import build_model
from fcn.preprocessing import PAPER_MEAN_BGR

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
"""Protobuf wire types (3 and 4, groups, appear in no Caffe message)."""

NET_LAYERS, NET_V1_LAYERS = 100, 2
"""``NetParameter`` fields of the layers: ``LayerParameter`` and ``V1LayerParameter``."""

LAYER_FIELDS = {False: (1, 2, 7), True: (4, 5, 6)}
"""(name, type, blobs) field numbers of a layer message, by whether it is a V1 layer."""

V1_TYPES = {4: "Convolution", 39: "Deconvolution", 17: "Pooling", 18: "ReLU", 6: "Dropout",
            25: "Eltwise", 5: "Data", 21: "SoftmaxWithLoss"}  # fmt: skip
"""``V1LayerParameter.LayerType`` values of the layers in FCN nets."""

KERAS_AXES = (2, 3, 1, 0)
"""Caffe kernel axes in Keras' order, for convolutions and deconvolutions alike (see above)."""

CAFFE_AXES = tuple(int(axis) for axis in np.argsort(KERAS_AXES))
"""The inverse: Keras kernel axes in Caffe's order, (3, 2, 0, 1)."""


class CaffeFormatError(ValueError):
    """Not a readable ``.caffemodel``, or not the net asked for; the message names the file and
    the first problem.

    Examples:
        >>> import tempfile
        >>> path = tempfile.mkdtemp() + "/empty.caffemodel"
        >>> open(path, "wb").close()
        >>> read_caffemodel(path)
        Traceback (most recent call last):
        fcn.caffe.CaffeFormatError: ...empty.caffemodel: no layers: not a .caffemodel
    """


@dataclass(frozen=True)
class CaffeBlob:
    """One parameter blob of a layer, unread.

    Attributes:
        path: the ``.caffemodel`` file.
        shape: as stored (a legacy blob: (num, channels, height, width)).
        offset: bytes from the start of the file to its packed little-endian float32 data.

    Examples:
        >>> import tempfile
        >>> from fcn.testing import write_caffemodel
        >>> path = tempfile.mkdtemp() + "/net.caffemodel"
        >>> write_caffemodel(path, [("score", "Convolution", [np.eye(2).reshape(2, 2, 1, 1)])])
        >>> blob = read_caffemodel(path)[0].blobs[0]
        >>> blob.shape, blob.size, blob.read()[:, :, 0, 0].tolist()
        ((2, 2, 1, 1), 4, [[1.0, 0.0], [0.0, 1.0]])
    """

    path: Path
    shape: tuple[int, ...]
    offset: int

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def read(self) -> np.ndarray:
        """The blob's values, float32 of [`shape`][fcn.caffe.CaffeBlob] (one read of its bytes)."""
        values = np.fromfile(self.path, "<f4", count=self.size, offset=self.offset)
        if values.size != self.size:
            raise CaffeFormatError(f"{self.path}: truncated inside a blob at byte {self.offset}")
        return values.reshape(self.shape)


@dataclass(frozen=True)
class CaffeLayer:
    """A layer of a ``.caffemodel``: its name, type (``"Convolution"``, ...) and blobs.

    Examples:
        >>> import tempfile
        >>> from fcn.testing import write_caffemodel
        >>> path = tempfile.mkdtemp() + "/v1.caffemodel"
        >>> write_caffemodel(path, [("up", "Deconvolution", [np.ones((3, 3, 4, 4))])], v1=True)
        >>> layer = read_caffemodel(path)[0]  # a V1 layer: its type is an enum in the file
        >>> layer.name, layer.type, layer.blobs[0].shape
        ('up', 'Deconvolution', (3, 3, 4, 4))
    """

    name: str
    type: str
    blobs: tuple[CaffeBlob, ...]


class _Reader:
    """Protobuf wire-format fields of a file, read in place; every length checked."""

    def __init__(self, file: BinaryIO, path: Path, size: int):
        self.file, self.path, self.size = file, path, size

    def fail(self, problem: str) -> CaffeFormatError:
        return CaffeFormatError(f"{self.path}: {problem} at byte {self.file.tell()}")

    def varint(self) -> int:
        value, shift = 0, 0
        while True:
            byte = self.file.read(1)
            if not byte:
                raise self.fail("truncated (the file ends inside a field)")
            value |= (byte[0] & 0x7F) << shift
            if byte[0] < 0x80:
                return value
            shift += 7
            if shift > 63:
                raise self.fail("not a protobuf message (a varint longer than 10 bytes)")

    def end_of(self, limit: int) -> int:
        """Read a length and return where that field ends (within ``limit``)."""
        end = self.varint() + self.file.tell()
        if end > limit:
            raise self.fail("truncated (a field runs past the end of its message or the file)")
        return end

    def fields(self, end: int) -> Iterator[tuple[int, int]]:
        """(field number, wire type) of each field up to byte ``end``."""
        while self.file.tell() < end:
            key = self.varint()
            if key >> 3 == 0 or key & 7 not in (VARINT, FIXED64, LENGTH, FIXED32):
                raise self.fail(f"not a protobuf message (field key {key})")
            yield key >> 3, key & 7

    def skip(self, wire: int, limit: int) -> None:
        if wire == VARINT:
            self.varint()
            return
        if wire == LENGTH:
            end = self.end_of(limit)
        else:
            end = self.file.tell() + (8 if wire == FIXED64 else 4)
        if end > limit:
            raise self.fail("truncated")
        self.file.seek(end)

    def text(self, limit: int) -> str:
        end = self.end_of(limit)
        return self.file.read(end - self.file.tell()).decode("utf-8", "replace")

    def packed_varints(self, limit: int) -> list[int]:
        end = self.end_of(limit)
        values = []
        while self.file.tell() < end:
            values.append(self.varint())
        return values


def read_caffemodel(path: str | os.PathLike) -> list[CaffeLayer]:
    """The layers of a ``.caffemodel`` with their blobs' shapes and places, in file order; no
    blob is read.

    Raises:
        CaffeFormatError: not a protobuf ``NetParameter`` with layers, or truncated (the
            message names the byte).

    Examples:
        >>> import tempfile
        >>> from fcn.testing import write_caffemodel
        >>> path = tempfile.mkdtemp() + "/net.caffemodel"
        >>> write_caffemodel(path, [("conv1", "Convolution", [np.ones((2, 3, 1, 1))])])
        >>> [(layer.name, layer.blobs[0].shape) for layer in read_caffemodel(path)]
        [('conv1', (2, 3, 1, 1))]
    """
    path = Path(path)
    size = path.stat().st_size
    layers = []
    with open(path, "rb") as f:
        reader = _Reader(f, path, size)
        for field, wire in reader.fields(size):
            if field in (NET_LAYERS, NET_V1_LAYERS) and wire == LENGTH:
                layers.append(_layer(reader, reader.end_of(size), v1=field == NET_V1_LAYERS))
            else:
                reader.skip(wire, size)
    if not layers:
        raise CaffeFormatError(f"{path}: no layers: not a .caffemodel")
    return layers


def _layer(reader: _Reader, end: int, v1: bool) -> CaffeLayer:
    name_field, type_field, blobs_field = LAYER_FIELDS[v1]
    name, kind, blobs = "", "", []
    for field, wire in reader.fields(end):
        if field == name_field and wire == LENGTH:
            name = reader.text(end)
        elif field == type_field and wire == (VARINT if v1 else LENGTH):
            if v1:
                number = reader.varint()
                kind = V1_TYPES.get(number, f"V1 type {number}")
            else:
                kind = reader.text(end)
        elif field == blobs_field and wire == LENGTH:
            blobs.append(_blob(reader, reader.end_of(end), name))
        else:
            reader.skip(wire, end)
    return CaffeLayer(name, kind, tuple(blobs))


def _blob(reader: _Reader, end: int, layer: str) -> CaffeBlob:
    legacy, dims, data = {}, None, None
    for field, wire in reader.fields(end):
        if field in (1, 2, 3, 4) and wire == VARINT:
            legacy[field] = reader.varint()
        elif field == 5 and wire == LENGTH:  # packed float32
            stop = reader.end_of(end)
            data = (reader.file.tell(), (stop - reader.file.tell()) // 4)
            reader.file.seek(stop)
        elif field == 5 and wire == FIXED32:
            raise reader.fail(f"layer {layer}: unpacked blob data (not written by Caffe)")
        elif field == 7 and wire == LENGTH:
            shape_end = reader.end_of(end)
            dims = []
            for sub, sub_wire in reader.fields(shape_end):
                if sub == 1 and sub_wire == LENGTH:
                    dims += reader.packed_varints(shape_end)
                elif sub == 1 and sub_wire == VARINT:
                    dims.append(reader.varint())
                else:
                    reader.skip(sub_wire, shape_end)
        else:
            reader.skip(wire, end)
    shape = tuple(dims) if dims is not None else tuple(legacy.get(i, 0) for i in (1, 2, 3, 4))
    if data is None or data[1] != math.prod(shape):
        found = "no data" if data is None else f"{data[1]} values"
        raise reader.fail(f"layer {layer}: a blob of shape {shape} with {found}")
    return CaffeBlob(reader.path, shape, data[0])


def _as_rank(shape: tuple[int, ...], rank: int) -> tuple[int, ...]:
    """A blob ``shape`` as ``rank`` axes: a legacy 4-d shape without its leading ones (a V1
    bias (1, 1, 1, N) is (N,)); other shapes as they are."""
    if len(shape) == 4 and rank < 4 and all(d == 1 for d in shape[: 4 - rank]):
        return shape[4 - rank :]
    return shape


def convert_caffe(caffemodel: str | os.PathLike, variant: str = "fcn8s") -> keras.Model:
    """An fcn model of ``variant`` with the weights of a Caffe FCN file (e.g. the paper's
    ``fcn8s-heavy-pascal.caffemodel``): every convolution, fc6/fc7, the score layers and the
    deconvolutions (see the module docstring for the layouts). Width and class count come from
    the file (conv1_1's outputs / 64, score_fr's outputs); the first layer subtracts the
    paper's mean ([`fcn.preprocessing.PAPER_MEAN_BGR`][]).

    Raises:
        CaffeFormatError: the file is not a readable ``.caffemodel``, or not ``variant``'s net:
            the message names the first missing layer or wrong shape.

    Examples:
        >>> import tempfile
        >>> from fcn.testing import caffe_layers, write_caffemodel
        >>> source = build_model("fcn32s", weights=None, width=1 / 16)
        >>> path = tempfile.mkdtemp() + "/fcn32s.caffemodel"
        >>> write_caffemodel(path, caffe_layers(source))
        >>> model = convert_caffe(path, "fcn32s")
        >>> bool(np.array_equal(model.get_layer("fc6").kernel, source.get_layer("fc6").kernel))
        True
    """
    check_variant(variant)
    path = Path(caffemodel)
    found = {layer.name: layer for layer in read_caffemodel(path) if layer.blobs}
    first, score = conv_name(1, 1), "score_fr"
    for name in (first, score):
        if name not in found:
            raise CaffeFormatError(f"{path}: no layer {name}: not an FCN ({variant}) file")
    width = found[first].blobs[0].shape[0] / VGG_BLOCKS[0][1]
    classes = found[score].blobs[0].shape[0]
    model = build_model(variant, classes, None, width=width, mean=PAPER_MEAN_BGR)
    plan = []
    for layer in model.layers:
        if not layer.weights:
            continue
        source = found.get(layer.name)
        if source is None:
            raise CaffeFormatError(f"{path}: no layer {layer.name}, which {variant} needs")
        if len(source.blobs) != len(layer.weights):
            raise CaffeFormatError(
                f"{path}: layer {layer.name} holds {len(source.blobs)} blobs, "
                f"{variant} needs {len(layer.weights)}"
            )
        for blob, variable in zip(source.blobs, layer.weights):
            target = tuple(variable.shape)
            caffe = tuple(target[axis] for axis in CAFFE_AXES) if len(target) == 4 else target
            if _as_rank(blob.shape, len(caffe)) != caffe:
                raise CaffeFormatError(
                    f"{path}: layer {layer.name} holds a blob of shape {blob.shape}, "
                    f"{variant} (width {width:g}, {classes} classes) needs {caffe}"
                )
            plan.append((blob, variable))
    for blob, variable in plan:  # one blob in memory at a time
        values = blob.read().reshape(_as_rank(blob.shape, len(variable.shape)))
        if values.ndim == 4:  # Keras [i, j, rows, :] is Caffe [:, rows, i, j] transposed
            write_slices(
                variable, lambda b, v=values: v[(slice(None), slice(b[1], b[2]), *b[0])].T
            )
        else:
            variable.assign(values)
        del values
    return model
