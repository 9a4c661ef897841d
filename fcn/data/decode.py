"""Reading one image/label pair from disk into checked uint8 arrays (no TensorFlow here)."""

from __future__ import annotations

import io
import os

import numpy as np
import scipy.io
from PIL import Image, ImageOps

from fcn.classes import IGNORE_LABEL, NUM_CLASSES, voc_palette
from fcn.data.errors import DataError

LABEL_MODES: tuple[str, ...] = ("P", "L", "I;16", "I", "1")
"""PIL modes whose pixel values are class indices: palette PNGs (VOC), grayscale PNGs (8 and
16 bits) and bilevel ones (classes 0 and 1)."""


ImageLike = str | os.PathLike | Image.Image | np.ndarray
"""What [`read_image`][] takes: a path, a PIL image or an array."""


def read_image(image: ImageLike) -> np.ndarray:
    """An image as RGB uint8, shape (H, W, 3), upright: the one image reader of the package
    (training pairs, evaluation, prediction, plots).

    Args:
        image: a file path (read whole and decoded at once), a ``PIL.Image``, or an array
            (H, W), (H, W, 1), (H, W, 3) or (H, W, 4).

    What each input becomes (the README's contract table):

    - Arrays by dtype: uint8 as it is; bool False/True as 0/255; uint16 as a 16-bit image,
      scaled to 8 bits (``round(v * 255 / 65535)``, relative values kept); other integers must
      lie in 0..255; floats must be finite and lie either in 0..1 (scaled by 255, the
      convention of matplotlib and scikit-image: an array whose values all lie in 0..1 is
      taken as 0..1) or in 0..255, and are rounded to the nearest level.
    - Arrays by shape: (H, W) and (H, W, 1) are grey (repeated to RGB); (H, W, 4) drops alpha.
    - Files and PIL images are turned by their EXIF orientation (as a photo viewer shows
      them). Modes 1, L, LA, P, PA, RGB, RGBA (alpha dropped) and CMYK go through PIL's
      conversion to RGB (as does any other mode PIL converts); 16-bit and 32-bit integer
      modes (I;16*, I) are 16-bit images, scaled as uint16 arrays; F follows the float rule.

    Raises:
        DataError: a file that is empty, truncated or not an image, naming it; an array with
            no pixels, of another shape (channels first, a batch: naming the fix), or with
            values its dtype does not allow (saying which range was expected).

    Examples:
        >>> read_image(np.zeros((2, 3), np.uint8)).shape
        (2, 3, 3)
        >>> read_image(np.full((1, 1, 3), 0.5))[0, 0].tolist()  # a float image in 0..1
        [128, 128, 128]
    """
    name = os.fspath(image) if isinstance(image, (str, os.PathLike)) else "the image array"
    if isinstance(image, (str, os.PathLike)):
        image = _open(image)
    if isinstance(image, Image.Image):
        image = ImageOps.exif_transpose(image)
        if image.mode in WIDE_MODES:
            image = np.asarray(image)
            if image.dtype.kind in "iu":  # 16-bit samples in any integer container
                image = _in_range(image, 0, 65535, name, "a 16-bit image").astype(np.uint16)
        else:
            try:
                image = image if image.mode == "RGB" else image.convert("RGB")
            except ValueError as error:
                raise DataError(f"{name}: cannot convert mode {image.mode!r} to RGB") from error
    return _to_rgb8(np.asarray(image), name)


WIDE_MODES: frozenset[str] = frozenset({"I", "I;16", "I;16B", "I;16L", "I;16N", "F"})
"""PIL modes of more than 8 bits per sample, read by value (PIL's own conversion to RGB clips
them at 255)."""


def _to_rgb8(array: np.ndarray, name: str) -> np.ndarray:
    """``array`` (see [`read_image`][] for the shapes and dtypes) as (H, W, 3) uint8."""
    if array.ndim == 2:
        array = array[..., None]
    if array.ndim != 3 or array.shape[-1] not in (1, 3, 4):
        hint = ""
        if array.ndim == 3 and array.shape[0] in (1, 3, 4) and array.shape[-1] > 4:
            hint = ": it looks channels-first, pass np.moveaxis(image, 0, -1)"
        elif array.ndim == 4:
            hint = ": that is a batch, pass one image at a time (fcn.predict takes a list)"
        raise DataError(
            f"{name} must be (H, W), (H, W, 1), (H, W, 3) or (H, W, 4), got {array.shape}{hint}"
        )
    if 0 in array.shape[:2]:
        raise DataError(f"{name} must have at least one pixel, got {array.shape[:2]}")
    if array.dtype == np.uint8:
        pass
    elif array.dtype == bool:
        array = array.astype(np.uint8) * np.uint8(255)
    elif array.dtype == np.uint16:
        array = _scaled(array, 65535)
    elif array.dtype.kind in "iu":
        array = _in_range(array, 0, 255, name, "an integer image that is not uint16")
        array = array.astype(np.uint8)
    elif array.dtype.kind == "f":
        if not np.isfinite(array).all():
            raise DataError(f"{name} holds NaN or infinite values")
        low, high = float(array.min()), float(array.max())
        if low < 0 or high > 255:
            raise DataError(
                f"{name} holds values in {low:g}..{high:g}; a float image must lie in 0..1 or "
                "in 0..255"
            )
        array = _scaled(array, 1.0) if high <= 1 else np.rint(array).astype(np.uint8)
    else:
        raise DataError(f"{name} has dtype {array.dtype}; pass uint8, uint16, bool or floats")
    if array.shape[-1] == 1:
        array = np.repeat(array, 3, axis=-1)
    return array[..., :3]


def _scaled(array: np.ndarray, full: float) -> np.ndarray:
    """``array`` whose full scale is ``full``, rounded to 8 bits (0 -> 0, full -> 255)."""
    return np.rint(array.astype(np.float64) * (255.0 / full)).astype(np.uint8)


def _in_range(array: np.ndarray, low: int, high: int, name: str, what: str) -> np.ndarray:
    found_low, found_high = int(array.min()), int(array.max())
    if found_low < low or found_high > high:
        raise DataError(
            f"{name} holds values in {found_low}..{found_high}; {what} must lie in {low}..{high}"
        )
    return array


def check_label(label, num_classes: int, name: str, shape: tuple[int, int] | None = None):
    """``label`` as a (H, W) uint8 class index map, checked: integer (or bool) values in
    ``0..num_classes-1`` or [`IGNORE_LABEL`][] (void), of ``shape`` (the image's
    height and width) where given; (H, W, 1) is taken as (H, W).

    Raises:
        DataError: naming ``name``, the problem and what was expected.

    Examples:
        >>> check_label(np.array([[0, 1], [255, 2]]), 3, "a label").dtype
        dtype('uint8')
        >>> check_label(np.array([[0, 4]]), 3, "a label")
        Traceback (most recent call last):
        ...
        fcn.data.errors.DataError: a label: label values [4] are neither classes 0..2 nor the
        ignore label 255
    """
    label = np.asarray(label)
    if label.ndim == 3 and label.shape[-1] == 1:
        label = label[..., 0]
    if label.ndim != 2:
        raise DataError(f"{name}: a label must be (H, W) class indices, got shape {label.shape}")
    if shape is not None and label.shape != tuple(shape):
        raise DataError(
            f"{name}: the label is {label.shape[1]}x{label.shape[0]} but its image is "
            f"{shape[1]}x{shape[0]} (width x height)"
        )
    if label.dtype == bool:
        label = label.astype(np.uint8)
    if label.dtype.kind not in "iu":
        raise DataError(f"{name}: label class indices must be integers, got dtype {label.dtype}")
    if label.dtype == np.uint8:  # the usual case: one pass, no sort
        values = np.flatnonzero(np.bincount(label.ravel(), minlength=256))
    else:
        values = np.unique(label)
    bad = [int(v) for v in values if (v < 0 or v >= num_classes) and v != IGNORE_LABEL]
    if bad:
        raise DataError(
            f"{name}: label values {bad[:5]} are neither classes 0..{num_classes - 1} "
            f"nor the ignore label {IGNORE_LABEL}"
        )
    return label.astype(np.uint8, copy=False)


def read_label(path: str | os.PathLike, num_classes: int = NUM_CLASSES) -> np.ndarray:
    """The class index map at ``path`` as uint8, shape (H, W); IGNORE_LABEL (255) marks void.

    A ``.mat`` file is read as SBD's ``GTcls.Segmentation``; anything else must be an image
    whose pixel values are the indices: palette ('P'), grayscale ('L'), 16-bit grayscale
    ('I;16', 'I': values must still lie in 0..255) or bilevel ('1': classes 0 and 1), turned
    by its EXIF orientation like [`read_image`][] (a label drawn on the upright photo stays
    aligned). Palette colours are never looked at; a colour (RGB) label is refused. Raises
    [`DataError`][] naming the file if it cannot be read or holds a value outside
    ``0..num_classes-1`` and 255.

    Examples:
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
                f"{os.fspath(path)}: label images must hold class indices (mode "
                f"{', '.join(repr(m) for m in LABEL_MODES)}), got mode {image.mode!r}"
            )
        label = np.asarray(ImageOps.exif_transpose(image))
    return check_label(label, num_classes, os.fspath(path))


def write_label(path: str | os.PathLike, label: np.ndarray) -> None:
    """Save a (H, W) uint8 class index map as a VOC-style palette PNG (readable by read_label).

    Examples:
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

    Examples:
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
