"""fcn.train with its defaults converges from the real ImageNet VGG16 weights on real VOC images.

Uses the real ImageNet VGG16 convolution weights of ``shared/vgg16_imagenet_notop/`` beside the
checkout (provenance in its README; 57 MB, not part of the package) or ``FCN_VGG16_WEIGHTS``.
"""

from __future__ import annotations

import os
from pathlib import Path

import keras
import numpy as np
import pytest

import fcn
from fcn.data import sample_voc_root, voc_pairs

WEIGHTS = Path(
    os.environ.get(
        "FCN_VGG16_WEIGHTS",
        Path(__file__).resolve().parents[2]
        / "shared/vgg16_imagenet_notop/vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5",
    )
)
CHANCE = float(np.log(21))
"""The loss of the zero-initialised score layers: uniform over 21 classes."""


class BatchLosses(keras.callbacks.Callback):
    """The loss of every batch (Keras logs the running mean of the epoch)."""

    def __init__(self):
        super().__init__()
        self.means: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append(float(logs["loss"]))

    @property
    def losses(self) -> np.ndarray:
        running = np.array(self.means) * np.arange(1, len(self.means) + 1)
        return np.diff(running, prepend=0.0)


@pytest.mark.skipif(not WEIGHTS.exists(), reason=f"no real VGG16 weights at {WEIGHTS}")
def test_default_recipe_converges_from_real_imagenet_weights(tmp_path):
    """The full FCN-8s, everything as ``fcn.train`` sets it but the crop (64, for time) and
    the batch (2), on the 12 real training images: every step's loss is finite, none rises far
    above chance, and the last 8 average well below it. With the defaults before the skip-layer
    rates (lr 1e-3): loss 2,308 at step 2, NaN from step 6; lr 1e-4 alone: 230-940 in the first
    ten steps, then the majority class (2.8). Measured: last 8 steps 1.89 (oneDNN and Eigen)."""
    recorder = BatchLosses()
    with pytest.warns(UserWarning, match="no fully connected layers"):  # fc6/fc7 start random
        result = fcn.train(
            train_files=voc_pairs(sample_voc_root(), "train"), val_files=(), run_dir=tmp_path,
            weights=str(WEIGHTS), crop_size=64, batch_size=2, epochs=1, steps_per_epoch=16,
            callbacks=[recorder], verbose=0,
        )  # fmt: skip
    losses = recorder.losses
    assert result.failure is None and len(losses) == 16
    assert np.isfinite(losses).all(), losses
    assert losses.max() < 1.5 * CHANCE, losses  # no blow-up on the way
    assert losses[-8:].mean() < 0.8 * CHANCE, losses
    assert result.model.count_params() == 134_489_759
    assert result.model.optimizer.iterations.numpy() == 16
    assert result.model.get_layer("score_fr").get_weights()[0].any()  # moved off its zero init
