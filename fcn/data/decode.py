"""Reading one image/label pair from disk into checked uint8 arrays (no TensorFlow here)."""

from __future__ import annotations

import io
import os

import numpy as np
import scipy.io
from PIL import Image, ImageOps

from fcn.classes import IGNORE_LABEL, NUM_CLASSES, voc_palette
from fcn.data.errors import DataError

LABEL_MODES: tuple[str, ...] = ("P", "L")
"""PIL modes whose pixel values are class indices: palette PNGs (VOC) and grayscale PNGs."""


ImageLike = str | os.PathLike | Image.Image | np.ndarray
"""What :func:`read_image` takes: a path, a PIL image or an array."""


def read_image(image: ImageLike) -> np.ndarray:
    """An image as RGB uint8, shape (H, W, 3), upright: the one image reader of the package
    (training pairs, evaluation, prediction, plots).

    Args:
        image: a file path (read whole and decoded at once), a ``PIL.Image``, or an array
            (H, W), (H, W, 3) or (H, W, 4) of values in 0..255.

    Files and PIL images are turned by their EXIF orientation (as a photo viewer shows them);
    grayscale, palette, RGBA (alpha dropped), CMYK and 16-bit images are converted to RGB.

    Raises:
        DataError: a file that is empty, truncated or not an image, naming it; an array of
            another shape, without pixels or with values outside 0..255.

    Example:
        >>> read_image(np.zeros((2, 3), np.uint8)).shape
        (2, 3, 3)
    """
    if isinstance(image, (str, os.PathLike)):
        image = _open(image)
    if isinstance(image, Image.Image):
        image = ImageOps.exif_transpose(image)
        image = image if image.mode == "RGB" else image.convert("RGB")
    array = np.asarray(image)
    if array.ndim == 2:
        array = np.repeat(array[..., None], 3, axis=-1)
    if array.ndim != 3 or array.shape[-1] not in (3, 4):
        raise DataError(f"an image array must be (H, W), (H, W, 3) or (H, W, 4), got {array.shape}")
    if 0 in array.shape[:2]:
        raise DataError(f"an image must have at least one pixel, got {array.shape[:2]}")
    if array.dtype != np.uint8:
        if array.min() < 0 or array.max() > 255:
            raise DataError("a non-uint8 image array must hold values in 0..255")
        array = array.astype(np.uint8)
    return array[..., :3]


def read_label(path: str | os.PathLike, num_classes: int = NUM_CLASSES) -> np.ndarray:
    """The class index map at ``path`` as uint8, shape (H, W); IGNORE_LABEL (255) marks void.

    A ``.mat`` file is read as SBD's ``GTcls.Segmentation``; anything else must be a palette
    ('P') or grayscale ('L') image whose pixel values are the indices, turned by its EXIF
    orientation like :func:`read_image` (a label drawn on the upright photo stays aligned).
    Palette colours are never looked at. Raises :class:`DataError` naming the file if it
    cannot be read or holds a value outside ``0..num_classes-1`` and 255.

    Example:
        >>> from fcn.data import sample_voc_root
        >>> label = read_label(sample_voc_root() / "SegmentationClass" / "2007_000033.png")
        >>> label.shape, label.dtype, np.unique(label).tolist()
        ((366, 500), dtype('uint8'), [0, 1, 255])
    """
    if os.fspath(path).lower().endswith(".mat"):
        label = _read_sbd_mat(path)
    else:
        image = _open(path)
        if image.mode not in LABEL_MODES:
            raise DataError(
                f"{os.fspath(path)}: label images must hold class indices (mode 'P' or 'L'), "
                f"got mode {image.mode!r}"
            )
        label = np.asarray(ImageOps.exif_transpose(image))
    counts = np.bincount(label.ravel(), minlength=256)
    bad = [int(v) for v in np.flatnonzero(counts) if v >= num_classes and v != IGNORE_LABEL]
    if bad:
        raise DataError(
            f"{os.fspath(path)}: label values {bad} are neither classes 0..{num_classes - 1} "
            f"nor the ignore label {IGNORE_LABEL}"
        )
    return label


def write_label(path: str | os.PathLike, label: np.ndarray) -> None:
    """Save a (H, W) uint8 class index map as a VOC-style palette PNG (readable by read_label).

    Example:
        >>> import tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "label.png")
        >>> write_label(path, np.array([[0, 1], [15, 255]], np.uint8))
        >>> read_label(path).tolist(), Image.open(path).mode
        ([[0, 1], [15, 255]], 'P')
    """
    image = Image.fromarray(np.asarray(label, np.uint8), mode="P")
    image.putpalette(voc_palette().ravel().tolist())
    image.save(path, format="PNG")


def read_pair(
    image_path: str | os.PathLike, label_path: str | os.PathLike, num_classes: int = NUM_CLASSES
) -> tuple[np.ndarray, np.ndarray]:
    """(image uint8 (H, W, 3), label uint8 (H, W)), checked to be the same size.

    Example:
        >>> from fcn.data import sample_voc_root
        >>> root = sample_voc_root()
        >>> image, label = read_pair(root / "JPEGImages" / "2007_000033.jpg",
        ...                          root / "SegmentationClass" / "2007_000033.png")
        >>> image.shape, label.shape
        ((366, 500, 3), (366, 500))
    """
    image, label = read_image(image_path), read_label(label_path, num_classes)
    if image.shape[:2] != label.shape:
        raise DataError(
            f"{os.fspath(image_path)} is {image.shape[1]}x{image.shape[0]} but its label "
            f"{os.fspath(label_path)} is {label.shape[1]}x{label.shape[0]} (width x height)"
        )
    return image, label


def _read_bytes(path: str | os.PathLike) -> bytes:
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        raise DataError(f"{os.fspath(path)}: cannot read ({error})") from error
    if not data:
        raise DataError(f"{os.fspath(path)}: empty file (0 bytes)")
    return data


def _open(path: str | os.PathLike) -> Image.Image:
    """The fully decoded PIL image; truncated or corrupt files raise here, not later."""
    data = _read_bytes(path)
    try:
        image = Image.open(io.BytesIO(data))
        image.load()
    except Exception as error:  # PIL raises OSError, SyntaxError, ValueError, ... on bad data
        raise DataError(f"{os.fspath(path)}: cannot decode image ({error})") from error
    return image


def _read_sbd_mat(path: str | os.PathLike) -> np.ndarray:
    data = _read_bytes(path)
    try:
        mat = scipy.io.loadmat(io.BytesIO(data), squeeze_me=True, struct_as_record=False)
        segmentation = mat["GTcls"].Segmentation
    except Exception as error:
        raise DataError(
            f"{os.fspath(path)}: not an SBD class annotation (GTcls.Segmentation): {error!r}"
        ) from error
    label = np.asarray(segmentation)
    if label.ndim != 2 or not np.issubdtype(label.dtype, np.integer) or label.size == 0:
        raise DataError(f"{os.fspath(path)}: GTcls.Segmentation is not a 2-D integer array")
    if label.min() < 0 or label.max() > 255:
        raise DataError(f"{os.fspath(path)}: label values outside 0..255")
    return label.astype(np.uint8)
