"""The images an int8 export is calibrated on, streamed as the exported model will see them.

Post-training quantisation ([`fcn.export_model`][] with ``quantize="int8"``) runs the float
model on sample inputs and records each activation's range, which fixes its int8 scale. The
samples here are ``count`` training images spread evenly over the given list (a VOC root's
``train`` split, a folder or files; never scored images), each read when the converter asks
for it, so memory holds one image whatever ``count`` is. A file of fixed input size sees each
image in windows of that size ([`fcn.inference.tiling.plan_windows`][] without a margin: the
same pixels and scale as the deployed tiles, each pixel once), filled with the mean colour as
[`fcn.inference.tiling.pad_window`][] fills them at run time; a file of any size sees each image
whole.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from fcn.data.decode import read_image
from fcn.data.errors import DataError
from fcn.data.voc import voc_pairs, voc_root
from fcn.inference.predict import expand_images
from fcn.inference.tiling import pad_window, plan_windows

CalibrationSource = str | os.PathLike | Sequence[str | os.PathLike]
"""A VOC root (its ``train`` split's images), a folder of images, an image file, or a list of
image files and folders (a folder in a list stands for the images directly in it)."""


def calibration_files(source: CalibrationSource, count: int) -> list[Path]:
    """``count`` image files of ``source``, evenly spaced over it in its order (all of them when
    it holds fewer).

    Raises:
        ValueError: ``count`` below 1, or no image in ``source`` (naming it).

    Examples:
        >>> from fcn.data import sample_voc_root
        >>> [path.stem for path in calibration_files(sample_voc_root(), 3)]
        ['2007_000515', '2007_004003', '2008_000238']
    """
    if count < 1:
        raise ValueError(f"calibration_images must be at least 1, got {count}")
    files = _source_files(source)
    if not files:
        named = os.fspath(source) if isinstance(source, (str, os.PathLike)) else source
        raise ValueError(
            f"calibration: no images in {named} (give a VOC root, a folder of .jpg/.png "
            "images, or image files)"
        )
    if count >= len(files):
        return files
    return [files[i * len(files) // count] for i in range(count)]


def _source_files(source: CalibrationSource) -> list[Path]:
    """A VOC root's ``train`` images, else the images of the files and folders given."""
    if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
        try:
            root = voc_root(source)
        except DataError:  # no ImageSets/Segmentation: a folder of images
            root = None
        if root is not None:  # a VOC root, whose errors are the user's to see
            return [Path(image) for image in voc_pairs(root, "train").images]
    items: Iterable = [source] if isinstance(source, (str, os.PathLike)) else source
    files = list(expand_images(items))
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"calibration: {path}: no such image file")
    return files


def calibration_inputs(
    files: Sequence[str | os.PathLike], size: tuple[int, int] | None
) -> Callable[[], Iterator[np.ndarray]]:
    """A function that yields, on each call, the (1, H, W, 3) uint8 inputs of ``files``: the
    windows of ``size`` (H, W), filled to it, or each image whole when ``size`` is None. A
    converter calls it once (LiteRT) or reads it once (ONNX Runtime); images are read lazily.

    Examples:
        >>> from fcn.data import sample_voc_root
        >>> files = calibration_files(sample_voc_root(), 2)
        >>> [x.shape for x in calibration_inputs(files, (256, 256))()][:3]
        [(1, 256, 256, 3), (1, 256, 256, 3), (1, 256, 256, 3)]
    """

    def inputs() -> Iterator[np.ndarray]:
        for path in files:
            try:
                image = read_image(path)
            except (OSError, ValueError) as err:
                raise DataError(f"calibration image {path}: {err}") from err
            if size is None:
                yield image[None]
                continue
            for tile in plan_windows(image.shape[0], image.shape[1], size, margin=0):
                yield pad_window(image[tile.source[0], tile.source[1]], size)

    return inputs
