"""Support for fcn's tests, benchmarks and notebooks: not part of the public API.

What the library itself never needs but its checks do: ``.caffemodel`` files written without
Caffe (the paper's files cannot be downloaded in a test), and the picture of the input
pipeline's memory benchmark. No module of ``fcn`` imports this one
(``tests/test_architecture.py`` checks it); its names may change without notice.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import keras
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from fcn.caffe import (
    CAFFE_AXES,
    LAYER_FIELDS,
    LENGTH,
    NET_LAYERS,
    NET_V1_LAYERS,
    V1_TYPES,
    VARINT,
)
from fcn.plots import DPI


def write_caffemodel(
    path: str | os.PathLike, layers: list[tuple[str, str, list[np.ndarray]]], *, v1: bool = False
) -> None:
    """Write a ``.caffemodel`` of ``(name, type, blobs)`` layers, in Caffe's wire format (the
    new layout, or with ``v1`` the V1 one with legacy 4-d blob shapes): for tests, examples and
    benchmarks, which cannot download the paper's files. `fcn.caffe.read_caffemodel` reads it.

    Examples:
        >>> import tempfile
        >>> from fcn.caffe import read_caffemodel
        >>> path = tempfile.mkdtemp() + "/net.caffemodel"
        >>> write_caffemodel(path, [("fc", "Convolution", [np.zeros((4, 2, 1, 1)), np.ones(4)])])
        >>> read_caffemodel(path)[0].blobs[1].read().tolist()
        [1.0, 1.0, 1.0, 1.0]
    """

    def varint(value: int) -> bytes:
        out = bytearray()
        while True:
            byte, value = value & 0x7F, value >> 7
            out.append(byte | (0x80 if value else 0))
            if not value:
                return bytes(out)

    def field(number: int, wire: int, payload: bytes) -> bytes:
        key = varint(number << 3 | wire)
        return key + (varint(len(payload)) + payload if wire == LENGTH else payload)

    v1_numbers = {kind: number for number, kind in V1_TYPES.items()}
    name_field, type_field, blobs_field = LAYER_FIELDS[v1]
    with open(path, "wb") as f:
        for name, kind, blobs in layers:
            message = field(name_field, LENGTH, name.encode())
            if v1:
                message += field(type_field, VARINT, varint(v1_numbers[kind]))
            else:
                message += field(type_field, LENGTH, kind.encode())
            for blob in blobs:
                blob = np.asarray(blob, "<f4")
                if v1:  # legacy num, channels, height, width
                    legacy = (1,) * (4 - blob.ndim) + blob.shape
                    shape = b"".join(field(i, VARINT, varint(d)) for i, d in enumerate(legacy, 1))
                else:
                    dims = b"".join(varint(d) for d in blob.shape)
                    shape = field(7, LENGTH, field(1, LENGTH, dims))
                message += field(blobs_field, LENGTH, shape + field(5, LENGTH, blob.tobytes()))
            f.write(field(NET_V1_LAYERS if v1 else NET_LAYERS, LENGTH, message))


def caffe_layers(model: keras.Model) -> list[tuple[str, str, list[np.ndarray]]]:
    """The ``(name, type, blobs)`` layers of a Caffe net with ``model``'s weights, in Caffe's
    layouts (the inverse of `fcn.caffe.convert_caffe`'s mapping): for `write_caffemodel`.

    Examples:
        >>> from fcn import build_model
        >>> model = build_model("fcn32s", weights=None, width=1 / 16)
        >>> name, kind, blobs = caffe_layers(model)[0]
        >>> name, kind, [b.shape for b in blobs]
        ('conv1_1', 'Convolution', [(4, 3, 3, 3), (4,)])
    """
    layers = []
    for layer in model.layers:
        if not layer.weights:
            continue
        kind = "Deconvolution" if isinstance(layer, keras.layers.Conv2DTranspose) else (
            "Convolution"
        )  # fmt: skip
        blobs = [
            np.transpose(w, CAFFE_AXES) if w.ndim == 4 else w
            for w in (np.asarray(v) for v in layer.weights)
        ]
        layers.append((layer.name, kind, blobs))
    return layers


def plot_memory_growth(rows: Sequence[dict], path: str | os.PathLike | None = None) -> Figure:
    """Peak RSS against data set size, one line per pipeline, least-squares slope in the legend
    (a bare Agg figure, as `fcn.plots` draws them).

    Args:
        rows: dicts with ``pipeline`` (name), ``images`` (data set size) and ``peak_rss_mb``,
            as ``benchmarks/loader_memory.py`` prints them.
        path: also save the figure there as a PNG.

    Examples:
        >>> rows = [{"pipeline": "fcn.data", "images": n, "peak_rss_mb": 500 + n / 100}
        ...         for n in (1_000, 10_000)]
        >>> plot_memory_growth(rows).axes[0].get_legend_handles_labels()[1]
        ['fcn.data: +0.01 MB per image (fit)']
    """
    fig = Figure(figsize=(6.5, 4))
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    for name in dict.fromkeys(row["pipeline"] for row in rows):
        points = sorted((r["images"], r["peak_rss_mb"]) for r in rows if r["pipeline"] == name)
        images, peaks = np.array(points, dtype=float).T
        slope = np.polyfit(images, peaks, 1)[0] if len(points) > 1 else float("nan")
        ax.plot(images, peaks, marker="o", label=f"{name}: {slope:+.2f} MB per image (fit)")
    ax.set_xlabel("images in the data set")
    ax.set_ylabel("peak RSS (MB)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    if path is not None:
        fig.savefig(path, dpi=DPI)
    return fig
