"""Synthetic Pascal-VOC-layout folders of any size, for benchmarks, notebooks and tests."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from fcn.classes import IGNORE_LABEL, NUM_CLASSES
from fcn.data.atomic import write_whole
from fcn.data.decode import write_label

VOC_SHAPES: tuple[tuple[int, int], ...] = ((375, 500), (375, 500), (375, 500), (500, 375))
"""(H, W) cycled through: VOC's two commonest sizes, landscape three times in four."""


def write_synthetic_voc(
    root: str | os.PathLike,
    count: int,
    splits: dict[str, int] | None = None,
    *,
    shapes: Sequence[tuple[int, int]] = VOC_SHAPES,
    seed: int = 0,
    num_classes: int = NUM_CLASSES,
) -> Path:
    """Write ``count`` JPEG / palette-PNG pairs under ``root/VOCdevkit/VOC2012``.

    Images are smooth random colour fields; labels are 50-pixel blocks of random classes with
    a void (255) row between blocks. Pairs already written are kept (growing a folder is cheap),
    so write a new folder for other settings. Every file appears whole (written under a
    temporary name, then renamed): processes that write and read the same folder at once, such
    as the workers of a cluster on one machine, see each file's old content or its new one,
    never an empty or partial file.

    Args:
        root: folder to write into.
        count: number of pairs (ids ``2026_000000``, ...).
        splits: split name -> number of leading ids it lists; default ``{"train": count}``.
        shapes: (H, W) of the images, cycled.
        seed: random seed (pair ``i`` depends on ``seed`` and ``i`` only).
        num_classes: labels are drawn from ``0..num_classes-1`` (and void).

    Returns:
        The VOC2012 root, ready for [`fcn.data.voc_pairs`][].

    Examples:
        >>> import tempfile
        >>> from fcn.data import read_pair, voc_pairs
        >>> root = write_synthetic_voc(tempfile.mkdtemp(), 3, {"train": 2, "val": 1},
        ...                            shapes=[(60, 80)])
        >>> files = voc_pairs(root, "train")
        >>> len(files), read_pair(files.images[0], files.labels[0])[1].shape
        (2, (60, 80))
    """
    voc = Path(root) / "VOCdevkit" / "VOC2012"
    for sub in ("ImageSets/Segmentation", "JPEGImages", "SegmentationClass"):
        (voc / sub).mkdir(parents=True, exist_ok=True)
    ids = [f"2026_{i:06d}" for i in range(count)]
    for i, name in enumerate(ids):
        label_path = voc / "SegmentationClass" / f"{name}.png"
        if label_path.exists():
            continue
        rng = np.random.default_rng([seed, i])
        h, w = shapes[i % len(shapes)]
        coarse = rng.integers(0, 256, (h // 25 + 1, w // 25 + 1, 3), dtype=np.uint8)
        image = Image.fromarray(coarse).resize((w, h), Image.BILINEAR)
        write_whole(voc / "JPEGImages" / f"{name}.jpg", image.save, "JPEG", quality=90)
        blocks = rng.integers(0, num_classes, (h // 50 + 1, w // 50 + 1)).astype(np.uint8)
        label = np.kron(blocks, np.ones((50, 50), np.uint8))[:h, :w]
        label[::50] = IGNORE_LABEL
        write_whole(label_path, write_label, label)  # last: the pair is whole
    for split, size in (splits or {"train": count}).items():
        text = "\n".join(ids[:size]) + "\n"
        write_whole(voc / "ImageSets" / "Segmentation" / f"{split}.txt", Path.write_text, text)
    return voc

