"""fcn.training.loss: the loss over labelled pixels."""

from __future__ import annotations

import numpy as np

from fcn.classes import IGNORE_LABEL
from fcn.training import loss
from fcn.training.loss import segmentation_loss


def test_loss_ignores_void_and_averages_over_labelled_pixels():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(2, 5, 6, 4)).astype(np.float32)
    labels = rng.integers(0, 4, (2, 5, 6)).astype(np.uint8)
    labels[0, :2] = IGNORE_LABEL
    log_softmax = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    valid = labels != IGNORE_LABEL
    picked = np.take_along_axis(log_softmax, np.where(valid, labels, 0)[..., None], -1)[..., 0]
    expected = -picked[valid].mean()
    np.testing.assert_allclose(float(segmentation_loss()(labels, logits)), expected, rtol=1e-5)


def test_the_loss_module_holds_the_loss_only():
    """The per-layer rates live in `fcn.training.rates`, not beside the loss."""
    moved = {"HEAD_SCORE", "HEAD_RATE_MARGIN", "HEAD_ENERGY_IMAGES", "skip_kernel_lr_mults",
             "stable_rate_factor", "head_input_energy", "set_head_rate"}  # fmt: skip
    assert not moved & set(vars(loss))
