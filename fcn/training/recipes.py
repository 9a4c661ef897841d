"""Training recipes, as plain data: the two ways to train an FCN, each a named set of defaults.

* ``practical`` (default): batches of fixed-size augmented crops, SGD momentum 0.9, learning
  rate 1e-3 with a poly schedule, VGG blocks 1-5 of a pretrained body frozen until the head
  has learned, then trained at a tenth of the schedule's rate (``unfreeze="auto"``,
  ``body_rate``: [`fcn.training.phases`][]); what most modern segmentation code does, tuned to
  learn fastest from ImageNet weights.
* ``paper``: the FCN paper's recipe, one whole image per step at native size, no augmentation,
  SGD momentum 0.99, a fixed rate of 1e-10 per summed pixel (1.9e-5 for our mean loss).

Both use Caffe's weight decay 5e-4 on kernels and twice the learning rate without decay for biases
([`fcn.training.optimizer.CaffeSGD`][], built by
[`fcn.training.optimizer.recipe_optimizer`][]) and, from a pretrained body, the per-layer rates
of [`fcn.training.rates`][]. A recipe's crop, batch, rate, augmentation and frozen blocks are
defaults: [`TrainConfig`][fcn.training.config.TrainConfig]'s fields of those names (their
meaning and range are there) replace them.

Why these numbers: the ImageNet features feed the three score layers inputs of very different
energies, and the rate that learns fastest is bounded by score_fr's curvature, not by the batch;
the reasoning is in `docs/design.md#training-fcntraining` ("Skip-layer rates", "Time to
accuracy"), the measurements in `benchmarks/README.md` (and, for earlier defaults,
`benchmarks/HISTORY.md`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from fcn.layout import VGG_BLOCKS, conv_name

PAPER_PIXELS_PER_IMAGE = 500 * 375
"""Typical VOC image size: converts the paper's learning rate for a summed loss to our mean."""

SCHEDULE_PASSES = 50
"""The default schedule's passes over the training files, where that stays within the paper's
pixels ([`schedule_epochs`][])."""

PAPER_SCHEDULE_IMAGES = 100_000
"""Images of one of the paper's training runs: the reference solvers' 25 rounds of 4,000
iterations at batch 1 (``voc-fcn*/solve.py``), whole images of about
[`PAPER_PIXELS_PER_IMAGE`][]."""


@dataclass(frozen=True)
class Recipe:
    """How to train: data shape, batch and optimiser settings.

    ``crop_size``, ``batch_size``, ``learning_rate``, ``augment``, ``frozen_blocks`` and
    ``body_rate`` are
    the [`TrainConfig`][fcn.training.config.TrainConfig] fields of those names (their meaning
    and range there), a recipe's values standing for those a config leaves None
    ([`TrainConfig.effective_recipe`][fcn.training.config.TrainConfig.effective_recipe]); a
    ``crop_size`` of None trains on whole images at native size, one per step, and the
    ``batch_size`` of [`RECIPES`][fcn.training.recipes] counts per replica.

    Attributes:
        momentum: SGD momentum.
        poly_power: exponent of the poly schedule ``lr * (1 - step / steps) ** power``; None
            keeps the rate fixed.
        body_rate: the share of the schedule's rate at which the convolutions of
            ``frozen_blocks`` train once they do (``unfreeze="auto"``'s second phase:
            [`fcn.training.phases`][]); a [`TrainConfig`][fcn.training.config.TrainConfig]
            field too.

    Examples:
        >>> RECIPES["practical"].crop_size, RECIPES["paper"].crop_size
        (320, None)
        >>> RECIPES["practical"].momentum, RECIPES["paper"].momentum
        (0.9, 0.99)
    """

    crop_size: int | None
    batch_size: int
    learning_rate: float
    momentum: float
    poly_power: float | None
    augment: bool
    frozen_blocks: int = 0
    body_rate: float = 1.0

    def frozen_layers(self) -> tuple[str, ...]:
        """The convolutions that [`frozen_blocks`][fcn.training.recipes.Recipe] keeps as initialised
        (of a pretrained body: [`fcn.training.train.compile_for_training`][] freezes them).

        Examples:
            >>> RECIPES["practical"].frozen_layers()[-2:], RECIPES["paper"].frozen_layers()
            (('conv5_2', 'conv5_3'), ())
        """
        return tuple(
            conv_name(block, index)
            for block in range(1, self.frozen_blocks + 1)
            for index in range(1, VGG_BLOCKS[block - 1][0] + 1)
        )


RECIPES: dict[str, Recipe] = {
    "practical": Recipe(
        crop_size=320, batch_size=2, learning_rate=1e-3, momentum=0.9, poly_power=0.9,
        augment=True, frozen_blocks=5, body_rate=0.1,
    ),
    "paper": Recipe(
        crop_size=None, batch_size=1, learning_rate=1e-10 * PAPER_PIXELS_PER_IMAGE,
        momentum=0.99, poly_power=None, augment=False,
    ),
}  # fmt: skip


def schedule_epochs(recipe: Recipe, batches_per_epoch: int) -> int:
    """The default schedule's epochs of ``batches_per_epoch`` batches of ``recipe``: as many as
    train on the paper's pixels ([`PAPER_SCHEDULE_IMAGES`][] images of
    [`PAPER_PIXELS_PER_IMAGE`][]), at most [`SCHEDULE_PASSES`][], at least one. A few hundred
    images get 50 passes (the schedule measured on 118: `benchmarks/README.md`); SBD's
    train_aug (10,582 images, 5,291 batches of two 320x320 crops) gets 18 epochs, 95,238
    batches: the paper's pixels, not 50 passes (2.8 times them).

    Examples:
        >>> schedule_epochs(RECIPES["practical"], 59)  # 118 images
        50
        >>> schedule_epochs(RECIPES["practical"], 5291), schedule_epochs(RECIPES["paper"], 10582)
        (18, 10)
    """
    side_pixels = PAPER_PIXELS_PER_IMAGE if recipe.crop_size is None else recipe.crop_size**2
    pixels = side_pixels * recipe.batch_size * batches_per_epoch
    paper = math.ceil(PAPER_SCHEDULE_IMAGES * PAPER_PIXELS_PER_IMAGE / pixels)
    return max(1, min(SCHEDULE_PASSES, paper))
