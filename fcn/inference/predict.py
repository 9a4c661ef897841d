"""``fcn.predict``: label maps at the original resolution for paths, PIL images or arrays.

Every image is read by [`fcn.data.read_image`][] (RGB, EXIF orientation applied), run through
the model whole (streamed in bands of rows, [`fcn.inference.streamed`][]) or, above the
budget's ``max_pixels``, in the overlapping tiles of [`fcn.inference.tiling`][], and reduced
to class indices band by band, so no full-size float array exists unless probabilities are
asked for.
[`predict_files`][] streams a folder of any size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import overload

import keras
import numpy as np
from PIL import Image

from fcn.data.decode import read_image
from fcn.data.files import IMAGE_SUFFIXES
from fcn.inference.budget import Budget
from fcn.inference.model_files import load_model
from fcn.inference.precision import in_precision
from fcn.inference.streamed import streams
from fcn.inference.tiling import DEFAULT_MARGIN, predict_tiled
from fcn.layers import label_dtype
from fcn.options import Precision

ImageLike = str | os.PathLike | Image.Image | np.ndarray


def _predict_one(
    model, image, probabilities, max_pixels, margin
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:  # model: in its precision
    """``image``'s labels, or with ``probabilities`` (labels, probabilities)."""
    rgb = read_image(image)
    max_pixels = Budget.default(streams(model), max_pixels).max_pixels
    labels = np.empty(rgb.shape[:2], label_dtype(model.output_shape[-1]).as_numpy_dtype)
    if not probabilities:
        for region, part in predict_tiled(model, rgb, max_pixels, margin, "labels", None):
            labels[region] = part
        return labels
    probs = np.empty((*rgb.shape[:2], model.output_shape[-1]), np.float32)
    for region, logits in predict_tiled(model, rgb, max_pixels, margin, precision=None):
        labels[region] = logits.argmax(-1)
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        probs[region] = shifted / shifted.sum(-1, keepdims=True)
    return labels, probs


ModelLike = keras.Model | str | os.PathLike | None
"""What `predict` and `predict_proba` take as a model: a Keras model, a ``.keras`` path, a
known model's name, or None for the default."""


@overload
def predict(
    image: ImageLike,
    model: ModelLike = None,
    *,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
    precision: Precision = "auto",
) -> np.ndarray: ...


@overload
def predict(
    image: list[ImageLike],
    model: ModelLike = None,
    *,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
    precision: Precision = "auto",
) -> list[np.ndarray]: ...


def predict(
    image: ImageLike | list[ImageLike],
    model: ModelLike = None,
    *,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
    precision: Precision = "auto",
) -> np.ndarray | list[np.ndarray]:
    """Segment one image (its label map) or a list of images (a list of label maps).

    Args:
        image: a path, a ``PIL.Image``, an (H, W, 3) uint8 RGB array (grayscale and RGBA
            converted), or a list of these.
        model: a Keras model, a ``.keras`` path, or None for the default model
            ([`fcn.inference.model_files.load_model`][]).
        max_pixels: most input pixels per forward pass; larger images run in tiles.
            Default: [`fcn.inference.budget.Budget.default`][].
        margin: tile context, pixels (see [`fcn.inference.tiling`][]).
        precision: ``"auto"`` (bfloat16 where the hardware has it natively, else float32),
            ``"float32"`` or ``"bfloat16"`` ([`fcn.inference.precision`][]). A model loaded
            here is loaded in that precision; a Keras model given runs as a copy in it where
            it computes in another (once per model, taking its weights at every call).

    Returns:
        The (H, W) label map (uint8; int32 above 256 classes) at the image's original
        resolution (EXIF-upright); for a list, a list of those. For the per-class
        probabilities too use `predict_proba`; for many files [`predict_files`][], which
        streams.

    Examples:
        >>> import fcn
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> labels = predict(np.zeros((50, 70, 3), np.uint8), model)
        >>> labels.shape, labels.dtype
        ((50, 70), dtype('uint8'))
        >>> [m.shape for m in predict([np.zeros((20, 30, 3), np.uint8)] * 2, model)]
        [(20, 30), (20, 30)]
    """
    model = _model_in(model, precision)
    if isinstance(image, list):
        return [_predict_one(model, i, False, max_pixels, margin) for i in image]
    return _predict_one(model, image, False, max_pixels, margin)


def predict_proba(
    image: ImageLike,
    model: ModelLike = None,
    *,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
    precision: Precision = "auto",
) -> tuple[np.ndarray, np.ndarray]:
    """Segment one image and keep the per-class softmax probabilities: ``(labels,
    probabilities)``, the (H, W) label map of `predict` and (H, W, C) float32 probabilities
    that sum to 1 over the classes. The arguments are `predict`'s (one image). The
    probabilities are a full-size float array (C values per pixel), which `predict` never
    holds: ask for them only where they are wanted.

    Examples:
        >>> import fcn
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> labels, probs = predict_proba(np.zeros((50, 70, 3), np.uint8), model)
        >>> labels.shape, labels.dtype, probs.shape, bool(np.allclose(probs.sum(-1), 1, atol=1e-4))
        ((50, 70), dtype('uint8'), (50, 70, 21), True)
    """
    return _predict_one(_model_in(model, precision), image, True, max_pixels, margin)


def _model_in(model, precision: Precision) -> keras.Model:
    """The Keras model of ``model`` (a model, a path, a name or None) in ``precision``."""
    if isinstance(model, keras.Model):
        return in_precision(model, precision)
    return load_model(model, precision=precision)


def expand_images(
    items: Iterable[str | os.PathLike] | str | os.PathLike,
) -> Iterator[Path]:
    """Each of ``items`` (or ``items`` itself) as a path, a folder standing for the images
    directly in it ([`list_images`][fcn.inference.predict.list_images]); lazily, in order.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name in ("b.png", "a.jpg"): (folder / name).touch()
        >>> [path.name for path in expand_images([folder / "b.png", folder])]
        ['b.png', 'a.jpg', 'b.png']
    """
    for item in [items] if isinstance(items, (str, os.PathLike)) else items:
        yield from list_images(item) if os.path.isdir(item) else [Path(item)]


def list_images(folder: str | os.PathLike) -> list[Path]:
    """Image files directly in ``folder``, sorted by name.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> for name in ("b.png", "a.JPG", "notes.txt"): (folder / name).touch()
        >>> [path.name for path in list_images(folder)]
        ['a.JPG', 'b.png']
    """
    return sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def predict_files(
    paths: Iterable[str | os.PathLike] | str | os.PathLike,
    model: keras.Model | str | os.PathLike | None = None,
    *,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
    precision: Precision = "auto",
) -> Iterator[tuple[Path, np.ndarray]]:
    """Yield ``(path, labels)`` for each file (or each image in a folder), one at a time.

    Memory holds one image and its label map whatever the number of files, so a folder of
    10,000 photos streams. A file that is not a readable image raises ValueError naming it;
    the label maps already yielded are the caller's to keep. ``precision`` as in
    [`predict`][].

    Examples:
        >>> import fcn, tempfile
        >>> folder = tempfile.mkdtemp(); Image.new("RGB", (60, 40)).save(folder + "/a.png")
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> [(path.name, labels.shape) for path, labels in predict_files(folder, model)]
        [('a.png', (40, 60))]
    """
    model = _model_in(model, precision)
    for path in expand_images(paths):
        yield path, _predict_one(model, path, False, max_pixels, margin)
