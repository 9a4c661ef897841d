"""Tiles: geometry, and tiled logits equal to whole-image logits on the full-size FCN-8s; the
windows of a fixed-size model and their fill."""

import numpy as np
import pytest
from conftest import network_tolerance, randomize
from hypothesis import given
from hypothesis import strategies as st

from fcn import build_model
from fcn.inference.tiling import (
    DEFAULT_MARGIN,
    STRIDE,
    pad_window,
    plan_tiles,
    plan_windows,
    predict_tiled,
)
from fcn.preprocessing import MEAN_RGB


@pytest.mark.parametrize("height, width, max_pixels, margin", [
    (1000, 700, 300_000, 64), (3000, 4000, 500_000, 256), (96, 5000, 60_000, 256),
])  # fmt: skip
def test_tiles_partition_the_image_within_budget(height, width, max_pixels, margin):
    tiles = plan_tiles(height, width, max_pixels, margin)
    assert len(tiles) > 1
    covered = np.zeros((height, width), int)
    for source, keep, region in tiles:
        covered[region] += 1
        rows, cols = source
        assert rows.start % STRIDE == 0 and cols.start % STRIDE == 0
        assert (rows.stop - rows.start) * (cols.stop - cols.start) <= max_pixels
        for axis, full in ((0, height), (1, width)):
            # the kept part has `margin` context on every side inside the image
            assert region[axis].start - source[axis].start in (region[axis].start, margin)
            assert source[axis].stop - region[axis].stop in (full - region[axis].stop, margin)
            assert keep[axis].start == region[axis].start - source[axis].start
    assert (covered == 1).all()


def test_small_image_is_one_tile_and_tiny_budget_fails():
    whole = (slice(0, 20), slice(0, 30))
    assert plan_tiles(20, 30, 600) == [(whole, whole, whole)]
    with pytest.raises(ValueError, match="too small"):
        plan_tiles(1000, 1000, 100_000, margin=256)
    with pytest.raises(ValueError, match="multiple of 32"):
        plan_tiles(1000, 1000, 100_000, margin=100)


def test_tiled_logits_equal_whole_image():
    """Full-size FCN-8s, random He weights: 2 tiles with the default 256 px margin agree with
    whole-image inference to float rounding (measured 1e-7 of the logit range at 224 px and
    above; 2e-4 at 192 px, 2e-3 at 160 px, so 224 is the smallest exact margin)."""
    model = randomize(build_model("fcn8s", weights=None), seed=5)
    image = np.random.default_rng(5).integers(0, 256, (32, 1088, 3), dtype=np.uint8)
    whole = np.asarray(model(image[None], training=False)[0])
    max_pixels = 32 * (544 + 2 * DEFAULT_MARGIN)  # a core of 544 px: 2 tiles along the width
    stitched = np.full_like(whole, np.nan)
    pieces = list(predict_tiled(model, image, max_pixels, precision="float32"))
    assert len(pieces) == 2
    for (rows, cols), logits in pieces:
        stitched[rows, cols] = logits
    scale = np.abs(whole).max()
    assert scale > 0
    np.testing.assert_allclose(stitched, whole, rtol=0, atol=network_tolerance(model, scale))


@given(
    height=st.integers(1, 3000), width=st.integers(1, 3000),
    size=st.tuples(st.integers(1, 1200), st.integers(1, 1200)),
    margin=st.sampled_from([0, 32, 128, 224, 256]),
)  # fmt: skip
def test_windows_partition_the_image_each_within_the_model_size(height, width, size, margin):
    """Any image, any fixed size: the kept parts cover every pixel once, each window's source is
    at most the size, starts on the pooling grid, and gives its kept part ``margin`` pixels of
    the image on every side (or the image's own edge); a size too small to keep 32 pixels with
    the margins on an axis the image is longer than is refused, naming the least side."""
    least = STRIDE + 2 * margin
    too_small = [side < least for side, full in zip(size, (height, width)) if full > side]
    if any(too_small):
        with pytest.raises(ValueError, match=f"at least {least} pixels"):
            plan_windows(height, width, size, margin)
        return
    covered = np.zeros((height, width), np.int8)
    for source, keep, region in plan_windows(height, width, size, margin):
        covered[region] += 1
        for axis, full in ((0, height), (1, width)):
            assert source[axis].stop - source[axis].start <= size[axis]
            assert source[axis].start % STRIDE == 0
            assert keep[axis].start == region[axis].start - source[axis].start
            assert region[axis].start - source[axis].start >= min(margin, region[axis].start)
            after = source[axis].stop - region[axis].stop
            assert after >= min(margin, full - region[axis].stop)
    assert (covered == 1).all()


def test_a_window_is_filled_with_the_mean_colour_below_and_to_the_right():
    window = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    padded = pad_window(window, (8, 9))
    assert padded.shape == (1, 8, 9, 3) and padded.dtype == np.uint8
    np.testing.assert_array_equal(padded[0, :5, :7], window)
    fill = np.ones((8, 9), bool)
    fill[:5, :7] = False
    assert (padded[0][fill] == MEAN_RGB).all()
    with pytest.raises(ValueError, match="does not fit a model of input size"):
        pad_window(window, (4, 9))
