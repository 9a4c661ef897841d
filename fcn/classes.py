"""Pascal VOC facts, defined once: class names, the ignore label and the colour palette."""

from __future__ import annotations

import numpy as np

VOC_CLASSES: tuple[str, ...] = (
    "background", "aeroplane", "bicycle", "bird", "boat", "bottle", "bus", "car", "cat",
    "chair", "cow", "diningtable", "dog", "horse", "motorbike", "person", "pottedplant",
    "sheep", "sofa", "train", "tvmonitor",
)  # fmt: skip
NUM_CLASSES: int = len(VOC_CLASSES)

IGNORE_LABEL: int = 255
"""Label of 'void' pixels (object borders, difficult regions): never a class, never scored."""


def voc_palette() -> np.ndarray:
    """The VOC colour map as a (256, 3) uint8 array (index 255, void, is (224, 224, 192)).

    It is the bit-interleaving map of the VOC devkit's ``labelcolormap.m``.
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
