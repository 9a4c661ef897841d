"""The 20 real VOC 2012 image/label pairs that ship with the package (see resources/voc_sample)."""

from __future__ import annotations

from pathlib import Path

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "resources" / "voc_sample"
"""Folder of the embedded sample: README.md (provenance), SHA256SUMS, VOCdevkit/VOC2012."""


def sample_voc_root() -> Path:
    """``VOCdevkit/VOC2012`` of the embedded sample: 12 train and 8 val ids, all 20 classes.

    Examples:
        >>> root = sample_voc_root()
        >>> root.name, len(list((root / "JPEGImages").glob("*.jpg")))
        ('VOC2012', 20)
    """
    return SAMPLE_DIR / "VOCdevkit" / "VOC2012"
