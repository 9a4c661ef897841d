"""Shared test helpers: small models with non-trivial weights."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from pathlib import Path  # noqa: E402

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PIL import Image  # noqa: E402

TINY = 1 / 16
"""Width multiplier of the topology-preserving test model (VGG body 4..32 channels, fc 256)."""


def randomize(model: keras.Model, seed: int = 0) -> keras.Model:
    """Give every weight of ``model`` random He-scaled values (score layers start at zero)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        weight.assign(rng.normal(0, np.sqrt(2 / fan_in), shape).astype(weight.dtype))
    return model


@pytest.fixture(scope="session")
def tiny_fcn8s() -> keras.Model:
    """A width-reduced FCN-8s with random non-zero weights (same graph and offsets as the paper)."""
    from fcn import build_model

    return randomize(build_model("fcn8s", weights=None, width=TINY), seed=1)


def write_shapes(root: Path, count: int, size: int = 96, seed: int = 0):
    """A learnable synthetic set: grey noise (class 0) with a red box (1) and a blue box (2).

    PNG images and index PNG labels in ``root/images`` and ``root/labels``; returns the
    :class:`fcn.data.SegmentationFiles`. No void pixels, so every image has size**2 labels.
    """
    from fcn.data import SegmentationFiles

    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(exist_ok=True)
    for i in range(count):
        image = rng.integers(90, 140, (size, size, 3)).astype(np.uint8)
        label = np.zeros((size, size), np.uint8)
        for cls, colour in [(1, (220, 30, 30)), (2, (30, 30, 220))]:
            h, w = rng.integers(size // 4, size // 2, 2)
            y, x = rng.integers(0, size - h), rng.integers(0, size - w)
            image[y : y + h, x : x + w] = colour
            label[y : y + h, x : x + w] = cls
        Image.fromarray(image).save(root / "images" / f"{i:03d}.png")
        Image.fromarray(label).save(root / "labels" / f"{i:03d}.png")
    return SegmentationFiles.from_folders(root / "images", root / "labels")
