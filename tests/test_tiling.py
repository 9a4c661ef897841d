"""Tiles: geometry, and tiled logits equal to whole-image logits on the full-size FCN-8s."""

import numpy as np
import pytest
from conftest import network_tolerance, randomize

from fcn import build_model
from fcn.inference.tiling import DEFAULT_MARGIN, STRIDE, plan_tiles, predict_tiled


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
