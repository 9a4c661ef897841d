"""Whole-image FCN inference in overlapping tiles, for images larger than a pixel budget.

Each tile runs through [`fcn.inference.streamed.compiled_forward`][], which already streams in
bands of rows, so tiles are for images beyond what one streamed pass should hold
([`fcn.inference.budget.Budget`][]) or for an explicit, smaller ``max_pixels``.

Geometry of the FCN graph ([`fcn.model`][]): output stride 32 (pools round up), conv1_1 sees the
input padded by 100 pixels of mean colour, and an output pixel depends on input pixels up to
about 220 pixels away. A tile whose origin is a multiple of 32 therefore sees the same pooling
grid as the whole image, and the pixels at least [`DEFAULT_MARGIN`][] pixels inside its borders
(or on a border it shares with the image) get the logits of whole-image inference, up to float
rounding (``tests/test_tiling.py::test_tiled_logits_equal_whole_image``). Each tile keeps only
that central part; the kept parts partition the image.

A model of fixed input size (a LiteRT file, [`fcn.inference.litert.LiteRTModel`][]) reads
windows of exactly its size: [`plan_windows`][] cuts them by the same margin rule, and
[`pad_window`][] fills a window that runs past the image's bottom or right edge (or an image
smaller than the size) with the mean colour, the colour that conv1_1's own 100-pixel pad stands
for (Keras' VGG16 mean in whole grey levels: within one grey level of the paper's). That filling
is not the whole-image network (deeper layers pad with zeros, not with what the network makes of
the mean colour), so pixels within ~220 of such an edge may differ from whole-image inference:
``benchmarks/README.md`` measures it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import keras
import numpy as np

from fcn.inference.budget import fits_one_pass
from fcn.inference.precision import in_precision
from fcn.inference.streamed import compiled_forward
from fcn.options import Output, Precision
from fcn.preprocessing import MEAN_RGB

STRIDE = 32
"""Output stride of every FCN variant: tile origins are multiples of it."""

DEFAULT_MARGIN = 256
"""Context (pixels, a multiple of [`STRIDE`][]) read around each tile's kept part.

Measured on the full FCN-8s with random weights (tiled minus whole-image logits, as a fraction
of the largest logit): 2e-2 at 64 px, 2e-3 at 160, 2e-4 at 192, 1e-7 (float rounding) at 224
and above. 256 keeps one stride of slack for the other variants."""


class Tile(NamedTuple):
    """One forward pass: read ``image[source]``, keep ``logits[keep]``, which is ``image[region]``.

    All three are ``(rows, cols)`` pairs of slices in pixels.

    Examples:
        >>> tile = plan_tiles(1000, 1000, max_pixels=500_000)[0]
        >>> tile.source, tile.keep
        ((slice(0, 448, None), slice(0, 448, None)), (slice(0, 192, None), slice(0, 192, None)))
    """

    source: tuple[slice, slice]
    keep: tuple[slice, slice]
    region: tuple[slice, slice]


def _axis(length: int, core: int, margin: int) -> list[tuple[slice, slice, slice]]:
    pieces = []
    for start in range(0, length, core):
        stop = min(start + core, length)
        lo, hi = max(0, start - margin), min(length, stop + margin)
        pieces.append((slice(lo, hi), slice(start - lo, stop - lo), slice(start, stop)))
    return pieces


def plan_tiles(
    height: int, width: int, max_pixels: int, margin: int = DEFAULT_MARGIN
) -> list[Tile]:
    """Cut a (height, width) image into tiles of at most ``max_pixels`` input pixels each.

    An image that fits is one tile. Otherwise the kept parts are squares of side ``core`` (a
    multiple of 32, as large as the budget allows) and each tile reads ``margin`` more pixels on
    every side that is inside the image. Raises ``ValueError`` if even a 32-pixel core with its
    margins exceeds ``max_pixels``.

    Examples:
        >>> len(plan_tiles(375, 500, max_pixels=2_000_000)), len(plan_tiles(3000, 4000, 2_000_000))
        (1, 20)
    """
    if margin % STRIDE:
        raise ValueError(f"margin must be a multiple of {STRIDE}, got {margin}")
    if fits_one_pass(height, width, max_pixels):
        whole = (slice(0, height), slice(0, width))
        return [Tile(whole, whole, whole)]

    def area(core: int) -> int:
        return min(core + 2 * margin, height) * min(core + 2 * margin, width)

    core = STRIDE
    if area(core) > max_pixels:
        raise ValueError(
            f"max_pixels={max_pixels} is too small for a {STRIDE}-pixel tile with a {margin}-pixel"
            f" margin: it needs at least {area(core)}"
        )
    while core < max(height, width) and area(core + STRIDE) <= max_pixels:
        core += STRIDE
    return [
        Tile((rs, cs), (rk, ck), (rr, cr))
        for rs, rk, rr in _axis(height, core, margin)
        for cs, ck, cr in _axis(width, core, margin)
    ]


def plan_windows(
    height: int, width: int, size: tuple[int, int], margin: int = DEFAULT_MARGIN
) -> list[Tile]:
    """Cut a (height, width) image into the windows of a model whose input is ``size`` (H, W).

    Along an axis the image fits in, one window; along a longer one, kept parts of ``core`` (the
    largest multiple of 32 with ``core + 2 * margin`` within the size), each read with
    ``margin`` more pixels on every side inside the image, as in [`plan_tiles`][]. Every
    ``source`` is at most ``size``; [`pad_window`][] makes it ``size``.

    Raises:
        ValueError: the size is too small for a 32-pixel core with its margins along an axis the
            image is longer than (the message gives the least size).

    Examples:
        >>> len(plan_windows(375, 500, (512, 512))), len(plan_windows(1000, 1500, (544, 544), 128))
        (1, 24)
    """
    if margin % STRIDE:
        raise ValueError(f"margin must be a multiple of {STRIDE}, got {margin}")

    def axis(length: int, side: int) -> list[tuple[slice, slice, slice]]:
        if length <= side:
            whole = slice(0, length)
            return [(whole, whole, whole)]
        core = (side - 2 * margin) // STRIDE * STRIDE
        if core < STRIDE:
            raise ValueError(
                f"a model of input size {size} cannot tile a {height}x{width} image with a "
                f"{margin}-pixel margin: a side must be at least {STRIDE + 2 * margin} pixels "
                "(export it at a larger size, or pass a smaller margin)"
            )
        return _axis(length, core, margin)

    return [
        Tile((rs, cs), (rk, ck), (rr, cr))
        for rs, rk, rr in axis(height, size[0])
        for cs, ck, cr in axis(width, size[1])
    ]


def pad_window(window: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """``window`` (h, w, 3) uint8, h and w at most ``size``, as (1, H, W, 3): filled at the
    bottom and right with [`fcn.preprocessing.MEAN_RGB`][].

    Examples:
        >>> padded = pad_window(np.zeros((2, 3, 3), np.uint8), (4, 4))
        >>> padded.shape, padded[0, 0, 0].tolist(), padded[0, 3, 3].tolist()
        ((1, 4, 4, 3), [0, 0, 0], [124, 117, 104])
    """
    height, width = window.shape[:2]
    if height > size[0] or width > size[1]:
        raise ValueError(f"a {height}x{width} window does not fit a model of input size {size}")
    padded = np.empty((1, *size, 3), np.uint8)
    padded[...] = MEAN_RGB
    padded[0, :height, :width] = window
    return padded


def predict_tiled(
    model: keras.Model,
    image: np.ndarray,
    max_pixels: int,
    margin: int = DEFAULT_MARGIN,
    output: Output = "logits",
    precision: Precision | None = "auto",
) -> Iterator[tuple[tuple[slice, slice], np.ndarray]]:
    """Run ``model`` on one image tile by tile and yield ``(region, output)`` per tile.

    Args:
        model: an FCN from [`fcn.build_model`][] (RGB (N, H, W, 3) -> logits (N, H, W, C)).
        image: one RGB image, (H, W, 3), uint8 or float in 0..255.
        max_pixels: most input pixels (rows x columns) per forward pass.
        margin: context around each kept part, pixels, a multiple of 32.
        output: ``"logits"`` or ``"labels"``, as in
            [`fcn.inference.streamed.compiled_forward`][].
        precision: ``"auto"``, ``"float32"`` or ``"bfloat16"``, or None for the model as it is
            ([`fcn.inference.precision.in_precision`][]).

    Yields:
        ``region``, a (rows, cols) pair of slices of the image, and the output for that region:
        float32 logits (h, w, C) or class indices (h, w). The regions partition the image;
        nothing image-sized is allocated, so a caller can reduce each piece (argmax, confusion
        counts) before the next one is made.

    Examples:
        >>> from fcn import build_model
        >>> model, image = build_model("fcn8s", weights=None, width=1 / 16), np.zeros((200, 150, 3))
        >>> pieces = list(predict_tiled(model, image, max_pixels=20_000, margin=32))
        >>> len(pieces), sum(logits.shape[0] * logits.shape[1] for _, logits in pieces)
        (12, 30000)
    """
    forward = compiled_forward(in_precision(model, precision), output)
    for tile in plan_tiles(image.shape[0], image.shape[1], max_pixels, margin):
        result = forward(image[None, tile.source[0], tile.source[1]])[0]
        yield tile.region, np.asarray(result[tile.keep[0], tile.keep[1]])
