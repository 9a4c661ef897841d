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
from fcn.inference.litert import LiteRTModel, is_litert_file
from fcn.inference.model_files import load_model
from fcn.inference.precision import in_precision
from fcn.inference.streamed import streams
from fcn.inference.tiling import DEFAULT_MARGIN, predict_tiled
from fcn.layers import label_dtype
from fcn.options import Output, Precision

ImageLike = str | os.PathLike | Image.Image | np.ndarray


def predict_pieces(
    model: keras.Model | LiteRTModel,
    rgb: np.ndarray,
    max_pixels: int | None,
    margin: int,
    output: Output,
) -> Iterator[tuple[tuple[slice, slice], np.ndarray]]:
    """``(region, output)`` of the (H, W, 3) image ``rgb`` as `predict` runs it: a Keras model
    (as it is: [`inference_model`][]) in the tiles of [`fcn.inference.tiling.predict_tiled`][]
    within the budget of ``max_pixels`` (None: the default), or a LiteRT file in windows of its
    size ([`LiteRTModel.predict_tiled`][fcn.inference.litert.LiteRTModel.predict_tiled]).

    Examples:
        >>> import fcn
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> [(region, labels.shape) for region, labels in predict_pieces(
        ...     model, np.zeros((40, 60, 3), np.uint8), None, 0, "labels")]
        [((slice(0, 40, None), slice(0, 60, None)), (40, 60))]
    """
    if isinstance(model, LiteRTModel):
        return model.predict_tiled(rgb, margin, output)
    max_pixels = Budget.default(streams(model), max_pixels).max_pixels
    return predict_tiled(model, rgb, max_pixels, margin, output, precision=None)


def _predict_one(
    model, image, probabilities, max_pixels, margin
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:  # model: in its precision, or a LiteRTModel
    """``image``'s labels, or with ``probabilities`` (labels, probabilities)."""
    rgb = read_image(image)
    num_classes = num_classes_of(model)
    labels = np.empty(rgb.shape[:2], label_dtype(num_classes).as_numpy_dtype)
    if not probabilities:
        for region, part in predict_pieces(model, rgb, max_pixels, margin, "labels"):
            labels[region] = part
        return labels
    probs = np.empty((*rgb.shape[:2], num_classes), np.float32)
    for region, logits in predict_pieces(model, rgb, max_pixels, margin, "logits"):
        labels[region] = logits.argmax(-1)
        shifted = np.exp(logits - logits.max(-1, keepdims=True))
        probs[region] = shifted / shifted.sum(-1, keepdims=True)
    return labels, probs


ModelLike = keras.Model | LiteRTModel | str | os.PathLike | None
"""What `predict` and `predict_proba` take as a model: a Keras model, a ``.keras`` path, a
known model's name, a LiteRT file (a ``.tflite`` path or a [`LiteRTModel`][]), or None for the
default."""


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
            ([`fcn.inference.model_files.load_model`][]); or a ``.tflite`` file of
            [`fcn.export_model`][] (float or int8), run in windows of its export size
            ([`fcn.inference.litert`][]).
        max_pixels: most input pixels per forward pass; larger images run in tiles.
            Default: [`fcn.inference.budget.Budget.default`][]. A LiteRT file's windows are
            its export size: refused with one.
        margin: tile context, pixels (see [`fcn.inference.tiling`][]).
        precision: ``"auto"`` (bfloat16 where the hardware has it natively, else float32),
            ``"float32"`` or ``"bfloat16"`` ([`fcn.inference.precision`][]). A model loaded
            here is loaded in that precision; a Keras model given runs as a copy in it where
            it computes in another (once per model, taking its weights at every call). A
            LiteRT file runs in the precision it was exported in: only "auto" is taken.

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
    model = inference_model(model, precision, max_pixels)
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
    model = inference_model(model, precision, max_pixels)
    return _predict_one(model, image, True, max_pixels, margin)


def inference_model(
    model: ModelLike, precision: Precision, max_pixels: int | None = None
) -> keras.Model | LiteRTModel:
    """The Keras model of ``model`` (a model, a path, a name or None) in ``precision``, or the
    LiteRT file it names (which takes neither a precision nor a pixel budget: refused).

    Examples:
        >>> import fcn
        >>> inference_model(fcn.build_model("fcn8s", weights=None, width=1 / 16), "float32").name
        'fcn8s'
    """
    if is_litert_file(model):
        model = LiteRTModel(model)
    if isinstance(model, LiteRTModel):
        if precision != "auto" or max_pixels is not None:
            raise ValueError(
                f"{model.path} runs in the precision it was exported in, in windows of its "
                f"export size {model.size}: leave precision at 'auto' and max_pixels unset"
            )
        return model
    if isinstance(model, keras.Model):
        return in_precision(model, precision)
    return load_model(model, precision=precision)


def num_classes_of(model: keras.Model | LiteRTModel) -> int:
    """C, the classes a Keras FCN or a LiteRT file scores.

    Examples:
        >>> import fcn
        >>> num_classes_of(fcn.build_model("fcn8s", 5, weights=None, width=1 / 16))
        5
    """
    return model.num_classes if isinstance(model, LiteRTModel) else model.output_shape[-1]


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
    model: ModelLike = None,
    *,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
    precision: Precision = "auto",
) -> Iterator[tuple[Path, np.ndarray]]:
    """Yield ``(path, labels)`` for each file (or each image in a folder), one at a time.

    Memory holds one image and its label map whatever the number of files, so a folder of
    10,000 photos streams. A file that is not a readable image raises ValueError naming it;
    the label maps already yielded are the caller's to keep. ``model`` and ``precision`` as in
    [`predict`][].

    Examples:
        >>> import fcn, tempfile
        >>> folder = tempfile.mkdtemp(); Image.new("RGB", (60, 40)).save(folder + "/a.png")
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> [(path.name, labels.shape) for path, labels in predict_files(folder, model)]
        [('a.png', (40, 60))]
    """
    model = inference_model(model, precision, max_pixels)
    for path in expand_images(paths):
        yield path, _predict_one(model, path, False, max_pixels, margin)
