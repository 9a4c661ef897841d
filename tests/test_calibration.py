"""Calibration images of an int8 export: spread evenly over the source, training images only,
read lazily, and cut into the windows a file of fixed size will see, each pixel once."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

from fcn.data import sample_voc_root, voc_ids
from fcn.data.decode import read_image
from fcn.inference.calibration import calibration_files, calibration_inputs
from fcn.preprocessing import MEAN_RGB


@given(total=st.integers(1, 60), count=st.integers(1, 80))
def test_files_are_spread_evenly_over_the_source(tmp_path_factory, total, count):
    """``count`` distinct files in the source's order, with gaps between chosen positions that
    differ by at most one (all files when the source holds no more than ``count``)."""
    folder = tmp_path_factory.mktemp("images")
    for i in range(total):
        (folder / f"{i:03d}.png").touch()
    chosen = [int(path.stem) for path in calibration_files(folder, count)]
    assert chosen == sorted(set(chosen)) and chosen[0] == 0
    assert len(chosen) == min(total, count)
    gaps = np.diff([*chosen, total])
    assert gaps.max() - gaps.min() <= 1


def test_a_voc_root_gives_its_training_images_only():
    files = calibration_files(sample_voc_root(), 100)
    assert [path.stem for path in files] == voc_ids(sample_voc_root(), "train")
    assert not set(path.stem for path in files) & set(voc_ids(sample_voc_root(), "val"))


def test_bad_sources_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="calibration_images must be at least 1, got 0"):
        calibration_files(sample_voc_root(), 0)
    with pytest.raises(ValueError, match=f"no images in {tmp_path}"):
        calibration_files(tmp_path, 10)
    with pytest.raises(FileNotFoundError, match="gone.jpg: no such image file"):
        calibration_files([tmp_path / "gone.jpg"], 10)


@pytest.mark.parametrize("size", [(256, 256), (96, 160), None])
def test_inputs_are_the_windows_of_each_image_each_pixel_once(tmp_path, size):
    """Each image's windows hold its pixels, each exactly once, and the mean colour elsewhere;
    without a size each image comes whole. A function: every call reads the files again."""
    rng = np.random.default_rng(0)
    shapes = [(300, 200), (80, 120)]
    for i, (height, width) in enumerate(shapes):
        image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        image[image == MEAN_RGB] = 0  # no pixel of the fill colour: fill and image part
        Image.fromarray(image).save(tmp_path / f"{i}.png")
    files = calibration_files(tmp_path, 10)
    inputs = calibration_inputs(files, size)
    windows = list(inputs())
    assert [w.shape for w in inputs()] == [w.shape for w in windows]
    assert all(w.dtype == np.uint8 and w.shape[0] == 1 for w in windows)
    if size is None:
        assert [w.shape[1:3] for w in windows] == shapes
        return
    assert all(w.shape[1:3] == size for w in windows)
    image_pixels = sum(int((w != MEAN_RGB).all(-1).sum()) for w in windows)
    assert image_pixels == sum(h * w for h, w in shapes)
    colours = np.concatenate([w[(w != MEAN_RGB).all(-1)] for w in windows])
    expected = np.concatenate([read_image(f).reshape(-1, 3) for f in files])
    np.testing.assert_array_equal(np.sort(colours, 0), np.sort(expected, 0))
