"""``fcn.predict``: label maps at the original resolution for paths, PIL images or arrays.

Every image is read as RGB (EXIF orientation applied; grayscale, palette, RGBA and CMYK
converted), run through the model whole (streamed in bands of rows, :mod:`fcn.forward`) or,
above ``max_pixels``, in the overlapping tiles of :mod:`fcn.tiling`, and reduced to class
indices band by band, so no full-size float array exists unless probabilities are asked for.
:func:`predict_files` streams a folder of any size.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

import keras
import numpy as np
from PIL import Image, ImageOps

from fcn.data.files import IMAGE_SUFFIXES
from fcn.forward import default_max_pixels, label_dtype
from fcn.initialize import load_keras_in_place
from fcn.tiling import DEFAULT_MARGIN, predict_tiled

DEFAULT_MODEL_FILE = "fcn8s-voc.keras"
"""Name of the trained VOC model that :func:`load_model` looks for in ``weights/``."""

ImageLike = str | os.PathLike | Image.Image | np.ndarray


def weights_dirs() -> list[Path]:
    """Where :func:`load_model` looks: ``$FCN_WEIGHTS_DIR``, ``./weights``, the checkout's."""
    dirs = [Path(os.environ["FCN_WEIGHTS_DIR"])] if "FCN_WEIGHTS_DIR" in os.environ else []
    return [*dirs, Path.cwd() / "weights", Path(__file__).resolve().parents[1] / "weights"]


def _check_sum(path: Path) -> None:
    """Compare ``path`` with its line in the ``SHA256SUMS`` beside it, if it has one."""
    sums = path.parent / "SHA256SUMS"
    if not sums.exists():
        return
    listed = dict(line.split()[::-1] for line in sums.read_text().splitlines() if line.strip())
    if path.name not in listed:
        return
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != listed[path.name]:
        raise ValueError(f"{path}: SHA-256 differs from {sums}: the file is damaged or replaced")


def load_model(path: str | os.PathLike | None = None) -> keras.Model:
    """Load a ``.keras`` FCN in Keras' safe mode (no arbitrary code), checking its SHA-256 if
    ``SHA256SUMS`` beside it lists it. ``None``: ``weights/fcn8s-voc.keras`` (:func:`weights_dirs`).
    """
    if path is None:
        candidates = [d / DEFAULT_MODEL_FILE for d in weights_dirs()]
        found = [p for p in candidates if p.exists()]
        if not found:
            raise FileNotFoundError(
                f"no model given and no {DEFAULT_MODEL_FILE} in "
                f"{', '.join(str(d) for d in weights_dirs())}. Train one "
                "(`fcn train VOC_ROOT`, then copy RUN_DIR/best.keras to "
                f"weights/{DEFAULT_MODEL_FILE}) or pass model='path/to/model.keras'."
            )
        path = found[0]
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model file not found: {path}")
    _check_sum(path)
    return load_keras_in_place(path, safe_mode=True)


def read_rgb(image: ImageLike) -> np.ndarray:
    """Any supported image as (H, W, 3) uint8 RGB, upright per its EXIF orientation."""
    if isinstance(image, (str, os.PathLike)):
        try:
            with Image.open(image) as opened:
                return read_rgb(opened)
        except (OSError, SyntaxError) as err:
            raise ValueError(f"{os.fspath(image)}: not a readable image ({err})") from err
    if isinstance(image, Image.Image):
        array = np.asarray(ImageOps.exif_transpose(image).convert("RGB"))
    else:
        array = np.asarray(image)
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=-1)
    if array.ndim != 3 or array.shape[-1] not in (3, 4):
        raise ValueError(
            f"an image array must be (H, W), (H, W, 3) or (H, W, 4), got {array.shape}"
        )
    if 0 in array.shape[:2]:
        raise ValueError(f"an image must have at least one pixel, got {array.shape[:2]}")
    if array.dtype != np.uint8:
        if array.min() < 0 or array.max() > 255:
            raise ValueError("a non-uint8 image array must hold values in 0..255")
        array = array.astype(np.uint8)
    return array[..., :3]


def _predict_one(model, image, probabilities, max_pixels, margin):
    rgb = read_rgb(image)
    if max_pixels is None:
        max_pixels = default_max_pixels(model)
    labels = np.empty(rgb.shape[:2], label_dtype(model.output_shape[-1]).as_numpy_dtype)
    if not probabilities:
        for region, part in predict_tiled(model, rgb, max_pixels, margin, "labels"):
            labels[region] = part
        return labels
    probs = np.empty((*rgb.shape[:2], model.output_shape[-1]), np.float32)
    for region, logits in predict_tiled(model, rgb, max_pixels, margin):
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
):
    """Segment one image or a list of images.

    Args:
        image: a path, a ``PIL.Image``, an (H, W, 3) uint8 RGB array (grayscale and RGBA
            converted), or a list of these.
        model: a Keras model, a ``.keras`` path, or None for :func:`load_model`'s default.
        probabilities: also return per-class softmax probabilities, (H, W, C) float32.
        max_pixels: most input pixels per forward pass; larger images run in tiles.
            Default: :func:`fcn.forward.default_max_pixels`.
        margin: tile context, pixels (see :mod:`fcn.tiling`).

    Returns:
        The (H, W) label map (uint8; int32 above 256 classes) at the image's original
        resolution (EXIF-upright), or ``(labels, probabilities)``; a list of those for a
        list. For many files use :func:`predict_files`, which streams.
    """
    if not isinstance(model, keras.Model):
        model = load_model(model)
    if isinstance(image, list):
        return [_predict_one(model, i, probabilities, max_pixels, margin) for i in image]
    return _predict_one(model, image, probabilities, max_pixels, margin)


def list_images(folder: str | os.PathLike) -> list[Path]:
    """Image files directly in ``folder``, sorted by name."""
    return sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)


def predict_files(
    paths: Iterable[str | os.PathLike] | str | os.PathLike,
    model: keras.Model | str | os.PathLike | None = None,
    *,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
) -> Iterator[tuple[Path, np.ndarray]]:
    """Yield ``(path, labels)`` for each file (or each image in a folder), one at a time.

    Memory holds one image and its label map whatever the number of files, so a folder of
    10,000 photos streams. A file that is not a readable image raises ValueError naming it;
    the label maps already yielded are the caller's to keep.
    """
    if isinstance(paths, (str, os.PathLike)) and Path(paths).is_dir():
        paths = list_images(paths)
    if not isinstance(model, keras.Model):
        model = load_model(model)
    for path in paths:
        yield Path(path), _predict_one(model, path, False, max_pixels, margin)
