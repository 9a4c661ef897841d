"""Training recipes: the loss, Caffe's SGD, and the two ways to train an FCN.

* ``practical`` (default): batches of fixed-size augmented crops, SGD momentum 0.9, a poly
  learning-rate schedule; fast on a GPU and what most modern segmentation code does.
* ``paper``: the FCN paper's recipe, one whole image per step at native size, no augmentation,
  SGD momentum 0.99, a fixed learning rate.

Both use Caffe's weight decay 5e-4 on kernels and twice the learning rate without decay for
biases (:class:`CaffeSGD`).
"""

from __future__ import annotations

from dataclasses import dataclass

import keras

from fcn.classes import IGNORE_LABEL

PAPER_PIXELS_PER_IMAGE = 500 * 375
"""Typical VOC image size: converts the paper's learning rate for a summed loss to our mean."""


def segmentation_loss() -> keras.losses.Loss:
    """Softmax cross-entropy from logits on sparse labels, void (255) excluded.

    The loss is averaged over the labelled pixels of the batch (Keras' ``ignore_class`` masks
    void pixels and renormalises by the number of valid ones). The paper sums the per-pixel loss
    instead ("unnormalized"); the two differ by the factor of labelled pixels per batch, which the
    ``paper`` recipe folds into its learning rate (1e-10 x ~187,500 pixels).
    """
    return keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, ignore_class=IGNORE_LABEL, name="cross_entropy"
    )


@keras.saving.register_keras_serializable(package="fcn")
class CaffeSGD(keras.optimizers.SGD):
    """SGD with Caffe's solver conventions of the FCN ``solver.prototxt`` files.

    Kernels get L2 weight decay coupled into the gradient (``g + decay * w``, as Caffe does;
    Keras' own ``weight_decay`` is decoupled); biases (1-D variables) get ``bias_lr_mult`` times
    the learning rate and no decay.
    """

    def __init__(self, *args, caffe_weight_decay: float = 5e-4, bias_lr_mult: float = 2.0, **kw):
        super().__init__(*args, **kw)
        self.caffe_weight_decay = caffe_weight_decay
        self.bias_lr_mult = bias_lr_mult

    def update_step(self, gradient, variable, learning_rate):
        if len(variable.shape) == 1:
            gradient = gradient * keras.ops.cast(self.bias_lr_mult, gradient.dtype)
        elif self.caffe_weight_decay:
            decay = keras.ops.cast(self.caffe_weight_decay, gradient.dtype)
            gradient = gradient + decay * keras.ops.cast(variable, gradient.dtype)
        super().update_step(gradient, variable, learning_rate)

    def get_config(self):
        return {
            **super().get_config(),
            "caffe_weight_decay": self.caffe_weight_decay,
            "bias_lr_mult": self.bias_lr_mult,
        }


@dataclass(frozen=True)
class Recipe:
    """How to train: data shape, batch and optimiser settings.

    Attributes:
        crop_size: side of the square training crops (pixels); None trains on whole images at
            native size, one per step.
        batch_size: global batch (split across replicas).
        learning_rate: base learning rate for the mean-over-pixels loss.
        momentum: SGD momentum.
        poly_power: exponent of the poly schedule ``lr * (1 - step / steps) ** power``; None
            keeps the rate fixed.
        augment: random scale 0.5-2 before cropping (only with crops; the crop position and
            the horizontal flip are random either way).
    """

    crop_size: int | None
    batch_size: int
    learning_rate: float
    momentum: float
    poly_power: float | None
    augment: bool

    def optimizer(self, total_batches: int, accumulate: int = 1) -> CaffeSGD:
        """The optimiser for a run of ``total_batches`` batches, averaging ``accumulate`` batches
        per update. (Keras evaluates a schedule at every batch, accumulated or not, so the poly
        schedule spans batches, not updates.)"""
        lr = self.learning_rate
        if self.poly_power is not None:
            lr = keras.optimizers.schedules.PolynomialDecay(
                lr, max(total_batches, 1), end_learning_rate=0.0, power=self.poly_power
            )
        return CaffeSGD(
            learning_rate=lr,
            momentum=self.momentum,
            gradient_accumulation_steps=accumulate if accumulate > 1 else None,
        )


RECIPES: dict[str, Recipe] = {
    "practical": Recipe(
        crop_size=320, batch_size=8, learning_rate=1e-3, momentum=0.9, poly_power=0.9,
        augment=True,
    ),
    "paper": Recipe(
        crop_size=None, batch_size=1, learning_rate=1e-10 * PAPER_PIXELS_PER_IMAGE,
        momentum=0.99, poly_power=None, augment=False,
    ),
}  # fmt: skip
