"""Pascal VOC facts, defined once: class names, the ignore label and the colour palette."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

VOC_CLASSES: tuple[str, ...] = (
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat",
    "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
    "sheep", "sofa", "train", "tvmonitor",
)  # fmt: skip
NUM_CLASSES: int = len(VOC_CLASSES)

IGNORE_LABEL: int = 255
"""Label of 'void' pixels (object borders, difficult regions): never a class, never scored."""


def default_class_names(num_classes: int) -> tuple[str, ...]:
    """[`VOC_CLASSES`][fcn.classes] for 21 classes, else ``class_0``, ``class_1``, ...

    Examples:
        >>> default_class_names(3)
        ('class_0', 'class_1', 'class_2')
    """
    if num_classes == NUM_CLASSES:
        return VOC_CLASSES
    return tuple(f"class_{i}" for i in range(num_classes))


def read_class_names(names: Sequence[str] | str | os.PathLike) -> tuple[str, ...]:
    """Class names from a sequence, or from a text file of one name per line (class 0 first;
    blank lines and ``#`` comments skipped). Names must be unique and non-empty.

    Examples:
        >>> read_class_names(["background", "cat", "dog"])
        ('background', 'cat', 'dog')
    """
    where = "class names"
    if isinstance(names, (str, os.PathLike)):
        where = os.fspath(names)
        try:
            lines = Path(names).read_text().splitlines()
        except (OSError, UnicodeDecodeError) as err:
            raise ValueError(f"{where}: cannot read class names ({err})") from err
        names = [line.split("#")[0].strip() for line in lines]
        names = [name for name in names if name]
    names = tuple(str(name) for name in names)
    if not names or any(not name.strip() for name in names):
        raise ValueError(f"{where}: needs one non-empty name per class, got {list(names)}")
    if len(set(names)) != len(names):
        repeated = sorted(name for name in set(names) if names.count(name) > 1)
        raise ValueError(f"{where}: names repeat: {repeated}")
    if len(names) > IGNORE_LABEL:
        raise ValueError(f"{where}: {len(names)} classes; labels 0..254 (255 is void) allow 255")
    return names


def voc_palette() -> np.ndarray:
    """The VOC colour map as a (256, 3) uint8 array (index 255, void, is (224, 224, 192)).

    It is the bit-interleaving map of the VOC devkit's ``labelcolormap.m``.

    Examples:
        >>> palette = voc_palette()
        >>> palette.shape, palette[1].tolist(), palette[15].tolist(), palette[255].tolist()
        ((256, 3), [128, 0, 0], [192, 128, 128], [224, 224, 192])
    """
    palette = np.zeros((256, 3), dtype=np.uint8)
    for index in range(256):
        c, r, g, b = index, 0, 0, 0
        for shift in range(7, -1, -1):
            r |= (c & 1) << shift
            g |= ((c >> 1) & 1) << shift
            b |= ((c >> 2) & 1) << shift
            c >>= 3
        palette[index] = (r, g, b)
    return palette
