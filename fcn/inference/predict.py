"""``fcn.predict``: label maps at the original resolution for paths, PIL images or arrays.

Every image is read by :func:`fcn.data.read_image` (RGB, EXIF orientation applied), run through
the model whole (streamed in bands of rows, :mod:`fcn.inference.streamed`) or, above the
budget's ``max_pixels``, in the overlapping tiles of :mod:`fcn.inference.tiling`, and reduced
to class indices band by band, so no full-size float array exists unless probabilities are
asked for.
:func:`predict_files` streams a folder of any size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path

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


def _predict_one(model, image, probabilities, max_pixels, margin):  # model: in its precision
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


def predict(
    image: ImageLike | list[ImageLike],
    model: keras.Model | str | os.PathLike | None = None,
    *,
    probabilities: bool = False,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
    precision: Precision = "auto",
):
    """Segment one image or a list of images.

    Args:
        image: a path, a ``PIL.Image``, an (H, W, 3) uint8 RGB array (grayscale and RGBA
            converted), or a list of these.
        model: a Keras model, a ``.keras`` path, or None for the default model
            (:func:`fcn.inference.model_files.load_model`).
        probabilities: also return per-class softmax probabilities, (H, W, C) float32.
        max_pixels: most input pixels per forward pass; larger images run in tiles.
            Default: :meth:`fcn.inference.budget.Budget.default`.
        margin: tile context, pixels (see :mod:`fcn.inference.tiling`).
        precision: ``"auto"`` (bfloat16 where the hardware has it natively, else float32),
            ``"float32"`` or ``"bfloat16"`` (:mod:`fcn.inference.precision`). A model loaded
            here is loaded in that precision; a Keras model given runs as a copy in it where
            it computes in another (once per model, taking its weights at every call).

    Returns:
        The (H, W) label map (uint8; int32 above 256 classes) at the image's original
        resolution (EXIF-upright), or ``(labels, probabilities)``; a list of those for a
        list. For many files use :func:`predict_files`, which streams.

    Examples:
        >>> import fcn
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> labels, probs = predict(np.zeros((50, 70, 3), np.uint8), model, probabilities=True)
        >>> labels.shape, labels.dtype, probs.shape, bool(np.allclose(probs.sum(-1), 1, atol=1e-4))
        ((50, 70), dtype('uint8'), (50, 70, 21), True)
    """
    model = _model_in(model, precision)
    if isinstance(image, list):
        return [_predict_one(model, i, probabilities, max_pixels, margin) for i in image]
    return _predict_one(model, image, probabilities, max_pixels, margin)


def _model_in(model, precision: Precision) -> keras.Model:
    """The Keras model of ``model`` (a model, a path, a name or None) in ``precision``."""
    if isinstance(model, keras.Model):
        return in_precision(model, precision)
    return load_model(model, precision=precision)


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
    :func:`predict`.

    Examples:
        >>> import fcn, tempfile
        >>> folder = tempfile.mkdtemp(); Image.new("RGB", (60, 40)).save(folder + "/a.png")
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> [(path.name, labels.shape) for path, labels in predict_files(folder, model)]
        [('a.png', (40, 60))]
    """
    if isinstance(paths, (str, os.PathLike)) and Path(paths).is_dir():
        paths = list_images(paths)
    model = _model_in(model, precision)
    for path in paths:
        yield Path(path), _predict_one(model, path, False, max_pixels, margin)
