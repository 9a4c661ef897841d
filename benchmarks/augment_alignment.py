"""Label alignment and speed of the training augmentation, by label interpolation, side by side.

Alignment: the image is a ramp of its own coordinates (8 levels per pixel in x and y), the label
a random class per pixel; after each random scale, pad, crop and flip, a labelled pixel is
aligned when its label is the class of the source pixel whose centre the image there came from
(pixels at a tie of two sources are left out), as ``tests/test_properties.py`` checks. Speed:
the augmentation of VOC-sized pairs (500x375, crop 320), rounds of each interpolation in turn.

    python benchmarks/augment_alignment.py [--samples 400] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import time

import cv2
import numpy as np

from fcn.classes import IGNORE_LABEL
from fcn.data import augment
from fcn.device import cpu_summary

INTERPOLATIONS = {"INTER_NEAREST (before)": cv2.INTER_NEAREST,
                  "INTER_NEAREST_EXACT (now)": cv2.INTER_NEAREST_EXACT}  # fmt: skip
RAMP = 8


def misaligned(interpolation: int, samples: int) -> float:
    """Share of the clearly attributable labelled pixels whose label is another pixel's."""
    augment.LABEL_INTERPOLATION = interpolation
    rng = np.random.default_rng(0)
    ys, xs = np.mgrid[0:32, 0:32]
    image = np.stack([RAMP * xs, RAMP * ys, np.zeros_like(xs)], -1).astype(np.uint8)
    wrong = total = 0
    augmenter = augment.Augmenter(24, (0.5, 2.0))
    for seed in range(samples):
        table = rng.integers(0, 21, (32, 32)).astype(np.uint8)
        out, label = augmenter(image, table, seed)
        x, y = out[..., 0] / RAMP, out[..., 1] / RAMP
        clear = (np.abs(x - np.rint(x)) < 0.3) & (np.abs(y - np.rint(y)) < 0.3)
        clear &= label != IGNORE_LABEL
        rows, cols = np.clip(np.rint(y), 0, 31), np.clip(np.rint(x), 0, 31)
        source = table[rows.astype(int), cols.astype(int)]
        wrong += int((source[clear] != label[clear]).sum())
        total += int(clear.sum())
    return wrong / total


def seconds_per_sample(interpolation: int, samples: int) -> float:
    augment.LABEL_INTERPOLATION = interpolation
    rng = np.random.default_rng(1)
    image = rng.integers(0, 256, (375, 500, 3)).astype(np.uint8)
    label = rng.integers(0, 21, (375, 500)).astype(np.uint8)
    augmenter = augment.Augmenter(320)
    start = time.perf_counter()
    for seed in range(samples):
        augmenter(image, label, seed)
    return (time.perf_counter() - start) / samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    print(json.dumps({"cpu": cpu_summary()}))
    times: dict[str, list[float]] = {name: [] for name in INTERPOLATIONS}
    for _ in range(args.rounds):
        for name, flag in INTERPOLATIONS.items():
            times[name].append(seconds_per_sample(flag, args.samples))
    for name, flag in INTERPOLATIONS.items():
        row = {"labels": name, "misaligned": round(misaligned(flag, args.samples), 4),
               "ms_per_sample_median": round(1000 * float(np.median(times[name])), 3)}  # fmt: skip
        print(json.dumps(row))


if __name__ == "__main__":
    main()
