"""Training augmentation (albumentations): scale, pad, crop, flip, optional colour jitter.

Label maps are only ever resampled with nearest neighbour and padded with IGNORE_LABEL, so an
augmented label holds only values of the original one (plus 255 where padding was added).
"""

from __future__ import annotations

import os
import threading

import cv2
import numpy as np

from fcn._compat import import_albumentations
from fcn.classes import IGNORE_LABEL
from fcn.preprocessing import MEAN_RGB

os.environ.setdefault("NO_ALBUMENTATIONS_UPDATE", "1")  # no network check on import
A = import_albumentations()  # without PyTorch, which its __init__ would import


LABEL_INTERPOLATION = cv2.INTER_NEAREST_EXACT
"""How label maps are resampled: nearest neighbour at pixel centres, as ``INTER_LINEAR`` samples
the image. (``cv2.INTER_NEAREST`` floors the source coordinate instead: up to half a source
pixel off the image: 43.9% of scaled crops' labels in ``benchmarks/augment_alignment.py``.)"""


class Augmenter:
    """Random scale -> pad to the crop (image with MEAN_RGB, label with 255) -> random crop ->
    horizontal flip -> optional photometric jitter, driven only by a per-sample seed.

    Thread-safe: each thread builds its own albumentations pipeline, and the same
    ``(image, label, seed)`` always gives the same output, whatever thread runs it.

    Args:
        crop_size: side of the square output, pixels.
        scale_range: (min, max) scale factor, sampled uniformly per sample.
        jitter: also randomise brightness, contrast, saturation and hue (image only).

    Examples:
        >>> augment = Augmenter(crop_size=64)
        >>> image, label = augment(np.zeros((50, 80, 3), np.uint8), np.ones((50, 80), np.uint8), 7)
        >>> image.shape, label.shape, set(np.unique(label)) <= {1, 255}  # 255: padding
        ((64, 64, 3), (64, 64), True)
    """

    def __init__(
        self,
        crop_size: int = 320,
        scale_range: tuple[float, float] = (0.5, 2.0),
        jitter: bool = False,
    ) -> None:
        low, high = scale_range
        if not 0 < low <= high:
            raise ValueError(f"scale_range must be 0 < min <= max, got {scale_range}")
        self.crop_size, self.scale_range, self.jitter = crop_size, (low, high), jitter
        self._local = threading.local()

    def _pipeline(self) -> A.Compose:
        if not hasattr(self._local, "pipeline"):
            low, high = self.scale_range
            size = self.crop_size
            steps = [
                A.RandomScale(scale_limit=(low - 1, high - 1), interpolation=cv2.INTER_LINEAR,
                              mask_interpolation=LABEL_INTERPOLATION, p=1.0),
                A.PadIfNeeded(size, size, border_mode=cv2.BORDER_CONSTANT, fill=MEAN_RGB,
                              fill_mask=IGNORE_LABEL),
                A.RandomCrop(size, size),
                A.HorizontalFlip(p=0.5),
            ]  # fmt: skip
            if self.jitter:
                steps.append(A.ColorJitter(0.3, 0.3, 0.3, 0.05, p=0.8))
            self._local.pipeline = A.Compose(steps, mask_interpolation=LABEL_INTERPOLATION)
        return self._local.pipeline

    def __call__(
        self, image: np.ndarray, label: np.ndarray, seed: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(image uint8 (H, W, 3), label uint8 (H, W)) -> the same at (crop, crop)."""
        pipeline = self._pipeline()
        # One independent stream per step: a shared seed would correlate e.g. scale and flip.
        streams = np.random.SeedSequence(seed).generate_state(len(pipeline.transforms))
        for step, stream in zip(pipeline.transforms, streams, strict=True):
            step.set_random_seed(int(stream))
        out = pipeline(image=image, mask=label)
        return out["image"], out["mask"]
