"""Caffe's SGD (fcn.training.optimizer): bias rate and decay, the in-place momentum step, a
layer's rate factor (the body's rate), gradient accumulation."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import tensorflow as tf
from conftest import (
    UNIT_ROUNDOFF,
    assert_within,
    sum_tolerance,
)
from hypothesis import given
from hypothesis import strategies as st

import fcn
from fcn.training.loss import segmentation_loss
from fcn.training.optimizer import CaffeSGD, recipe_optimizer
from fcn.training.recipes import RECIPES


def test_caffe_sgd_doubles_bias_rate_and_decays_kernels_only():
    kernel = keras.Variable(np.full((2, 2), 2.0, np.float32))
    bias = keras.Variable(np.full((2,), 2.0, np.float32))
    optimizer = CaffeSGD(learning_rate=0.1, momentum=0.0, caffe_weight_decay=0.5)
    optimizer.apply([tf.ones((2, 2)), tf.ones((2,))], [kernel, bias])
    np.testing.assert_allclose(kernel.numpy(), 2.0 - 0.1 * (1.0 + 0.5 * 2.0))
    np.testing.assert_allclose(bias.numpy(), 2.0 - 2 * 0.1 * 1.0)


def test_caffe_sgd_in_place_momentum_step_is_caffes_formula():
    """Three steps of the in-place update against m <- mu m - lr (mult g + decay w), w += m
    (kernels), m <- mu m - 2 lr g (biases), in float64 from the same float32 start."""
    rng = np.random.default_rng(2)

    def f32(shape):
        return rng.normal(size=shape).astype(np.float32)

    layer = keras.layers.Dense(4, name="score_pool3")
    layer.build((None, 3))
    layer.kernel.assign(f32((3, 4)))
    layer.bias.assign(f32((4,)))
    grads = [(f32((3, 4)), f32((4,))) for _ in range(3)]
    lr, mu, decay, mult = 0.1, 0.9, 5e-2, 1e-2
    optimizer = CaffeSGD(learning_rate=lr, momentum=mu, caffe_weight_decay=decay,
                         kernel_lr_mults={"score_pool3": mult})  # fmt: skip
    w, b = layer.kernel.numpy().astype(np.float64), layer.bias.numpy().astype(np.float64)
    mw, mb = np.zeros_like(w), np.zeros_like(b)
    for gw, gb in grads:
        optimizer.apply([tf.constant(gw), tf.constant(gb)], [layer.kernel, layer.bias])
        mw = mu * mw - lr * (mult * gw + decay * w)
        w = w + mw
        mb = mu * mb - 2 * lr * gb
        b = b + mb
    # each of 3 steps rounds ~8 float32 products and sums of values at most |w| (+ |m|)
    for ours, exact in ((layer.kernel, w), (layer.bias, b)):
        bound = 3 * 8 * UNIT_ROUNDOFF * (np.abs(exact).max() + 1)
        np.testing.assert_allclose(ours.numpy(), exact, rtol=0, atol=bound)


@given(share=st.floats(1e-3, 1.0), momentum=st.sampled_from([0.0, 0.9]), seed=st.integers(0, 99))
def test_layer_lr_mult_scales_the_whole_step_of_that_layer_alone(share, momentum, seed):
    """Two layers, one with a ``layer_lr_mults`` share: two steps of each against the formula
    with ``lr * share`` (decay included) for that layer and ``lr`` for the other, in float64
    from the same float32 start; both update paths (momentum 0: Keras' plain step)."""
    rng = np.random.default_rng(seed)
    layers = {}
    for name in ("conv1_1", "fc6"):
        layers[name] = keras.layers.Dense(3, name=name)
        layers[name].build((None, 2))
        layers[name].kernel.assign(rng.normal(size=(2, 3)).astype(np.float32))
    variables = [v for layer in layers.values() for v in (layer.kernel, layer.bias)]
    lr, decay = 0.1, 5e-2
    optimizer = CaffeSGD(learning_rate=lr, momentum=momentum, caffe_weight_decay=decay,
                         layer_lr_mults={"conv1_1": share})  # fmt: skip
    exact = [v.numpy().astype(np.float64) for v in variables]
    moments = [np.zeros_like(w) for w in exact]
    rates = [lr * share, 2 * lr * share, lr, 2 * lr]  # conv1_1's kernel, bias; fc6's
    for _ in range(2):
        grads = [rng.normal(size=v.shape).astype(np.float32) for v in variables]
        optimizer.apply([tf.constant(g) for g in grads], variables)
        for i, (g, rate) in enumerate(zip(grads, rates)):
            step = g + (decay * exact[i] if exact[i].ndim > 1 else 0.0)
            moments[i] = momentum * moments[i] - rate * step
            exact[i] = exact[i] + moments[i]
    for ours, want in zip(variables, exact):  # 2 steps of ~8 rounded float32 operations
        bound = 2 * 8 * UNIT_ROUNDOFF * (np.abs(want).max() + 1)
        np.testing.assert_allclose(ours.numpy(), want, rtol=0, atol=bound)


def test_recipe_optimizer_puts_the_body_at_the_recipes_body_rate():
    recipe = dataclasses.replace(RECIPES["practical"], body_rate=0.25)
    body = recipe.frozen_layers()
    optimizer = recipe_optimizer(recipe, total_batches=10, body=body)
    assert optimizer.layer_lr_mults == dict.fromkeys(body, 0.25)
    assert CaffeSGD.from_config(optimizer.get_config()).layer_lr_mults == optimizer.layer_lr_mults
    whole = dataclasses.replace(recipe, body_rate=1.0)  # the schedule's rate: nothing to scale
    assert recipe_optimizer(whole, total_batches=10, body=body).layer_lr_mults == {}


def test_gradient_accumulation_equals_the_larger_batch():
    """Two accumulated batches of 2 make the same update as one batch of 4 (fixed learning rate:
    Keras evaluates a schedule per batch; no dropout: its masks differ between the batchings)."""
    recipe = dataclasses.replace(RECIPES["paper"], learning_rate=0.01)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (4, 64, 64, 3)).astype(np.uint8)
    labels = rng.integers(0, 3, (4, 64, 64)).astype(np.uint8)

    def train_once(batch_size, accumulate):
        keras.utils.set_random_seed(0)
        model = fcn.build_model("fcn8s", 3, None, width=1 / 16, dropout=0.0)
        optimizer = recipe_optimizer(recipe, total_batches=4 // batch_size, accumulate=accumulate)
        model.compile(optimizer=optimizer, loss=segmentation_loss())
        model.fit(images, labels, batch_size=batch_size, shuffle=False, verbose=0)
        assert model.optimizer.iterations.numpy() == 1
        return model.get_weights()

    big, accumulated = train_once(4, 1), train_once(2, 2)
    keras.utils.set_random_seed(0)
    initial = fcn.build_model("fcn8s", 3, None, width=1 / 16, dropout=0.0).get_weights()
    moved = 0
    for a, b, init in zip(big, accumulated, initial):
        # The gradients sum over every pixel of the batch in another order; the update is
        # then added to the weight (one more rounding of its size).
        update = np.abs(a - init).max()
        assert_within(b, a, sum_tolerance(labels.size, update) + 2 * UNIT_ROUNDOFF * np.abs(a))
        moved += int(update > 0)
    assert moved >= 6  # the score layers and biases really moved
