"""The per-layer learning rates that keep SGD on the loss (`fcn.training.loss`) stable
from ImageNet weights: the staged nets' skip-layer multipliers, and score_fr's factor measured
from the energy of its input.

The three zero-initialised score layers read features of very different energies, so one rate
cannot suit them all; the reasoning and the figures are in `docs/design.md#training-fcntraining`
("Skip-layer rates", "score_fr's rate from its input").
"""

from __future__ import annotations

import keras
import tensorflow as tf

from fcn.model import ATONCE_SCALES, HEAD_LAYERS, skip_layer_names
from fcn.training.recipes import Recipe

HEAD_SCORE = HEAD_LAYERS[-1]
"""score_fr: the score layer whose rate [`set_head_rate`][] measures."""


def caffe_sgd(model: keras.Model):
    """The optimizer of a model compiled by [`fcn.training.train.compile_for_training`][] (a
    [`fcn.training.optimizer.CaffeSGD`][]): ``model.optimizer``, or the one inside it where
    Keras wrapped it in a ``LossScaleOptimizer`` (``mixed_float16``). Here, below the optimizer
    module, because [`set_head_rate`][] needs it and the optimizer imports this module.

    Examples:
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile(keras.optimizers.SGD(0.1), "mse")
        >>> caffe_sgd(model) is model.optimizer
        True
    """
    return getattr(model.optimizer, "inner_optimizer", model.optimizer)


def skip_kernel_lr_mults(model: keras.Model) -> dict[str, float]:
    """Learning-rate multipliers that give the skip score layers of a staged FCN (fcn16s, fcn8s)
    the at-once FCN-8s's scaling of their inputs: ``s**2`` for each scale ``s`` of
    [`fcn.model.ATONCE_SCALES`][] whose branch ``model`` has unscaled ({} for fcn32s and for
    fcn8s_atonce, which scales in the model). See the module docstring for why.

    Examples:
        >>> from fcn import build_model
        >>> skip_kernel_lr_mults(build_model("fcn8s", weights=None, width=1 / 16))
        {'score_pool4': 0.0001, 'score_pool3': 1e-08}
    """
    names = {layer.name for layer in model.layers}
    mults = {}
    for pool, scale in ATONCE_SCALES.items():
        scale_name, score_name = skip_layer_names(pool)
        if score_name in names and scale_name not in names:
            mults[score_name] = scale**2
    return mults


def stable_rate_factor(
    energy: float, learning_rate: float, momentum: float, classes: int, margin: float = 1.0
) -> float:
    """The factor on a zero-initialised linear score layer's rate that keeps SGD on it stable at
    the start: ``min(1, 2 (1 + momentum) classes / (learning_rate * energy))``, ``energy``
    being the mean ||x||^2 per pixel of its input. A zero kernel gives every class ``1 /
    classes``, where the softmax cross-entropy's Hessian in the logits is ``(I - 1 1^T /
    classes) / classes``; averaged over pixels, the curvature along the kernel is then at most
    ``energy / classes`` (``E[x x^T]``'s largest eigenvalue is at most its trace), and
    heavy-ball SGD on a curvature ``c`` converges for ``rate * c < 2 (1 + momentum)``. Tight:
    at 1.5x that rate such a layer's loss rises to a multiple of chance
    (``tests/test_rates.py``). The notop body's glorot fc7 (energy ~4.4e4 through the dropouts,
    21 classes) is inside it at lr 1e-3; features of more energy (a full VGG16 file's, an
    ``init_from`` model's) or fewer classes get a lower rate instead of a blow-up. ``margin``
    (0..1] keeps the rate at that share of the bound, at most 1 ([`HEAD_RATE_MARGIN`][]).

    Examples:
        >>> stable_rate_factor(4.4e4, 1e-3, 0.9, 21)  # the notop body: the rate as it is
        1.0
        >>> round(stable_rate_factor(8e5, 1e-3, 0.9, 21), 3)  # 18x the energy
        0.1
        >>> round(stable_rate_factor(4.4e4, 1e-3, 0.9, 21, margin=HEAD_RATE_MARGIN), 3)
        0.907
    """
    return min(1.0, margin * 2 * (1 + momentum) * classes / (learning_rate * energy))


HEAD_RATE_MARGIN = 0.5
"""The share of [`stable_rate_factor`][]'s bound [`set_head_rate`][] gives score_fr. The
bound is the curvature at the start, with every class at ``1 / classes``; once the predictions
leave it the softmax's curvature grows (``p (1 - p)`` along a class, up to 1/4 against the
start's ``1 / classes``), and at the whole bound a full VGG16 file's score_fr oscillated around
chance. Figures: `docs/design.md#training-fcntraining` ("score_fr's rate from its input")."""


def head_input_energy(model: keras.Model, images) -> float:
    """The energy of score_fr's input as a training step computes it, for a batch of ``images``
    (RGB 0..255, ``(batch, height, width, 3)``): the mean over drop7's output positions of
    ||x||^2 (4096 channels), with one draw of the dropout masks. Dropout raises it: drop7 keeps
    a share ``1 - rate`` of the channels scaled by its inverse (x ``1 / (1 - rate)`` in
    expectation), and drop6 widens fc7's pre-activations (x 2 more for glorot fc6/fc7 at rate
    0.5, measured). A batch of crops has thousands of positions: one draw is within a few
    percent of the mean over draws.

    Examples:
        >>> import numpy as np
        >>> from fcn import build_model
        >>> model = build_model("fcn8s", weights=None, width=1 / 16, dropout=0.5)
        >>> head_input_energy(model, np.full((1, 64, 64, 3), 128.0)) > 0
        True
    """
    drop7 = HEAD_LAYERS[3]
    features = keras.Model(model.input, model.get_layer(drop7).output)(images, training=True)
    return float(tf.reduce_mean(tf.reduce_sum(tf.square(tf.cast(features, tf.float32)), -1)))


HEAD_ENERGY_IMAGES = 8
"""The images [`fcn.train`][] measures score_fr's input energy on: its first batches
until they hold this many (the energy depends on the crops' content, and two crops alone
misjudged it: `docs/design.md#training-fcntraining`)."""


def set_head_rate(model: keras.Model, batches, recipe: Recipe) -> tuple[float, float]:
    """Measure score_fr's input energy on ``batches`` of images ([`head_input_energy`][] of
    each, weighted by its images) and set its [`fcn.training.optimizer.CaffeSGD.rate_factors`][]
    to [`stable_rate_factor`][] at ``recipe``'s base rate and [`HEAD_RATE_MARGIN`][]
    (``model`` compiled by [`fcn.training.train.compile_for_training`][]).
    Returns (energy, factor).

    Examples:
        >>> import numpy as np
        >>> from fcn import build_model
        >>> from fcn.training.recipes import RECIPES
        >>> from fcn.training.train import compile_for_training
        >>> model = build_model("fcn8s", weights=None, width=1 / 16)
        >>> model = compile_for_training(model, RECIPES["practical"], total_batches=10)
        >>> batches = [np.full((2, 64, 64, 3), 128.0), np.full((1, 96, 96, 3), 64.0)]
        >>> energy, factor = set_head_rate(model, batches, RECIPES["practical"])
        >>> factor == float(model.optimizer.rate_factors["score_fr"])
        True
    """
    sizes = [len(images) for images in batches]
    energies = [head_input_energy(model, images) for images in batches]
    energy = sum(e * n for e, n in zip(energies, sizes)) / sum(sizes)
    classes = model.get_layer(HEAD_SCORE).filters
    factor = stable_rate_factor(
        energy, recipe.learning_rate, recipe.momentum, classes, margin=HEAD_RATE_MARGIN
    )
    caffe_sgd(model).rate_factors[HEAD_SCORE].assign(factor)
    return energy, factor
