"""Training recipes, as plain data: the two ways to train an FCN, and why their numbers.

* ``practical`` (default): batches of fixed-size augmented crops, SGD momentum 0.9, learning
  rate 1e-3 with a poly schedule, VGG blocks 1-5 of a pretrained body frozen; what most
  modern segmentation code does, tuned to learn fastest from ImageNet weights (below).
* ``paper``: the FCN paper's recipe, one whole image per step at native size, no augmentation,
  SGD momentum 0.99, a fixed rate of 1e-10 per summed pixel (1.9e-5 for our mean loss).

Both use Caffe's weight decay 5e-4 on kernels and twice the learning rate without decay for biases
([`fcn.training.optimizer.CaffeSGD`][], built by
[`fcn.training.optimizer.recipe_optimizer`][]), and, for the staged FCN-16s/FCN-8s, the skip-layer
rates of [`fcn.training.rates.skip_kernel_lr_mults`][].

Why these rates (measured from the real ImageNet VGG16 conv weights on real VOC crops, 320x320,
batch 1; ``benchmarks/convergence.py`` and ``benchmarks/README.md``). With Caffe's 0..255 input
the pretrained features are large, and the three score layers see inputs of very different
energy: mean ||x||^2 per pixel 9.7e6 at pool3, 8.1e5 at pool4, 3.0e3 at fc7 (random fc6/fc7,
dropout off). For a zero-initialised linear score layer the curvature of the loss along its
kernel grows with its input's energy (at most energy / classes at the start:
[`fcn.training.rates.stable_rate_factor`][]), so no single learning rate suits all three: at the
old default 1e-3, score_pool3's first step alone (gradient 1.7e3) made logits of 1.8e4 (loss 5,007
at step 2), their gradients wrecked the body (conv1_1's gradient 9.4e3 for a kernel of norm 8.6) and
the loss was NaN at step 5; at 1e-4 it spiked to 500 before settling on the majority class; the
paper's 1.9e-5 with momentum 0.99 went to 346 and never learned. The paper itself never trains
FCN-8s from ImageNet with one rate: it trains FCN-32s at 1e-10, then FCN-16s at 1e-12, then FCN-8s
at 1e-14, or scales pool4 by 1e-2 and pool3 by 1e-4 in the at-once net. For SGD from a zero kernel,
scaling a layer's input by ``s`` is the same as multiplying its kernel's gradient by ``s**2``, so
[`fcn.training.rates.skip_kernel_lr_mults`][] gives the staged nets the at-once scaling without
changing the model (its weights stay those of ``voc-fcn8s``). With it, 30 steps at 1e-4 (momentum
0.9) and at 1.9e-5 (0.99) never exceeded a loss of 6.1; 1e-3 still spiked to 29. From a random
initialisation (``weights=None``) the imbalance is mild (pool3 and pool4 energies
20-30x and 6-8x fc7's, measured) and one rate serves all layers:
[`fcn.training.train.compile_for_training`][] applies the multipliers to pretrained bodies only.

What learns fastest from ImageNet weights (issue 24; ``benchmarks/time_to_accuracy.py``, mean IoU on
30 held-out real VOC images after 10 minutes of training on a 2-core CPU in bf16, figures in
``benchmarks/README.md``). The old practical rate, 1e-4 at batch 8, moved 1.25e-4 per image seen (lr
/ (1 - momentum) / batch), 15x less than the paper's 1.9e-3 at batch 1: in 10 minutes it had learned
the class prior only (background everywhere, mean IoU 0.037), and so had 1e-3 with every layer
trained (0.038). Freezing the convolutions of VGG blocks 1-4 (``frozen_blocks=4``: the ImageNet
features stay as they are, and the backward pass stops at conv5_1) makes a step 2.3x cheaper (0.76 s
per 320x320 crop instead of 1.74) and learned objects at 1e-3: 0.099 (person 0.37, bus 0.33, dog
0.33), at batch 2 and 2.5e-4 0.089; freezing fewer blocks is 1.2x (2) and 1.6x (3) cheaper. The rate
is bounded by score_fr's curvature (below), not by the batch: at the same 1e-3, batch 2 takes 4x the
steps of batch 8 for the same crops and reached 0.131 in 10 minutes (person 0.60, bus 0.47, dog
0.25, cat 0.25), batch 1 0.102 (more steps, but each crop 1.2x dearer and the noisiest): batch 2 it
is. Initialising fc6/fc7 of a 'notop' body to pass pool5's centre through (512 of their channels)
instead of glorot gave 0.091: not taken. At 1e-3 score_fr was at 0.55 of its stability bound
([`fcn.training.rates.stable_rate_factor`][]: 2 (1 + momentum) x 21 classes / 4.4e4) in these
measurements; the skip-layer multipliers keep score_pool3/4 far inside theirs.

On an Intel Xeon with AMX (bf16, oneDNN, Dec 5) a crop of this recipe costs 0.39-0.46 s
(0.34-0.39 with block 5 frozen too), 1.7-1.9x less than on the AVX512-BF16 EPYC; the same
defaults reached 0.153 after 10 minutes in a screen, 0.212 and 0.218 after 30 (six and seven
object classes above 0.2) in two runs, and the second 0.260 when its 50 epochs ended at 45 min.
Ending the poly schedule with the budget (``epochs=9``: the rate reaches 0 at 9.3 minutes) did
not help: 0.119 at its end, with a lower training loss (0.95 against 1.13): not
taken, the 50 epochs stay.

Freezing block 5 too (``frozen_blocks=5``, the default since Dec 6: only fc6, fc7 and the score
layers train; it held with a full VGG16 file once score_fr's measured rate took half its
stability bound, [`fcn.training.rates.HEAD_RATE_MARGIN`][])
generalises far better from the 118 training images: on the same AMX Xeon, a screen
with ``--set frozen_blocks=5 epochs=76`` reached 0.266 after 15 minutes (nine object classes above
0.2) and 0.319 after 30 (eleven), where blocks 1-4 frozen had 0.143-0.183 and 0.212-0.221 (six or
seven), at about the same crops per minute (2,244 and 4,506 crops; the step is 10-15% cheaper, the
evaluation the same), and with the same training loss (0.18 after 30 minutes, 0.20 with block 5
trained): what conv5 learns from 118 images fits them as well and transfers worse than its
ImageNet features (a reading of these two curves, not a measured mechanism).

score_fr's rate is measured at the start of every run from a pretrained body
([`fcn.training.rates.set_head_rate`][]): the energy of its input on the first 8 images, through
the dropouts, sets [`fcn.training.rates.stable_rate_factor`][] on its kernel. The notop body's
glorot fc7 (4.4e4-5.2e4 on batches of real VOC crops) took the full rate in every figure above
(measured before Dec 6 15:20 UTC, when the factor was the whole bound, at most 1); since then
[`fcn.training.rates.HEAD_RATE_MARGIN`][] gives it half the bound, 0.61-0.91 of the base rate
(0.884 in the Dec 6 AMX run of the defaults: 0.307 after 30 minutes, ten object classes above
0.2, and 0.319 at the schedule's end, 41 minutes; PyTorch with the same recipe 0.305 after 30
and 0.319 after 60; on the AVX512-BF16 EPYC, the same factor, 0.325 after 30 and 0.322 at the
end, 37 minutes, PyTorch 0.279 and 0.327 after 30 and 60; with another fc6/fc7 draw, ``--seed 1``,
factor 0.611, 0.298 and 0.305, PyTorch 0.293 and 0.308: ``benchmarks/README.md``). A synthetic
full VGG16 file (fc1/fc2 drawn He-normal, 8.1e5) had spiked to a loss of 24 at step 2 at the full
rate and oscillated around chance at the whole bound; it trains at 0.08-0.09 of the base rate
instead (``tests/test_convergence.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from fcn.layout import VGG_BLOCKS, conv_name

PAPER_PIXELS_PER_IMAGE = 500 * 375
"""Typical VOC image size: converts the paper's learning rate for a summed loss to our mean."""


@dataclass(frozen=True)
class Recipe:
    """How to train: data shape, batch and optimiser settings.

    Attributes:
        crop_size: side of the square training crops (pixels); None trains on whole images at
            native size, one per step.
        batch_size: global batch (split across replicas). Those of [`RECIPES`][fcn.training.recipes]
            count per replica: without a ``batch_size`` of its own, [`fcn.train`][] trains
            at that times the replicas (4 GPUs: 8 crops of the practical recipe).
        learning_rate: base learning rate for the mean-over-pixels loss.
        momentum: SGD momentum.
        poly_power: exponent of the poly schedule ``lr * (1 - step / steps) ** power``; None
            keeps the rate fixed.
        augment: random scale 0.5-2 before cropping (only with crops; the crop position and
            the horizontal flip are random either way).
        frozen_blocks: the first VGG blocks (0-5) whose convolutions are not trained (no
            gradient, no update, and no backward pass through them); only with a pretrained
            body.

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
        augment=True, frozen_blocks=5,
    ),
    "paper": Recipe(
        crop_size=None, batch_size=1, learning_rate=1e-10 * PAPER_PIXELS_PER_IMAGE,
        momentum=0.99, poly_power=None, augment=False,
    ),
}  # fmt: skip
