"""fcn.training.rates: the skip layers' rates, and score_fr's rate from the energy of its
input."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import pytest
from conftest import (
    assert_within,
    network_tolerance,
    randomize,
    sum_tolerance,
)
from hypothesis import given
from hypothesis import strategies as st

import fcn
from fcn import build_model
from fcn.model import ATONCE_SCALES
from fcn.training.rates import (
    HEAD_SCORE,
    head_input_energy,
    skip_kernel_lr_mults,
    stable_rate_factor,
)
from fcn.training.recipes import RECIPES
from fcn.training.train import compile_for_training


def heavy_ball_losses(
    x: np.ndarray, classes: int, rate: float, momentum: float, steps: int
) -> np.ndarray:
    """Softmax regression written out in numpy: a zero kernel, labels ``i % classes`` for the
    rows of ``x``, the cross-entropy averaged over the rows, Keras' momentum step (``v <- m v -
    rate g``, ``w <- w + v``); the loss before each step."""
    labels = np.arange(len(x)) % classes
    kernel, velocity, losses = np.zeros((x.shape[1], classes)), np.zeros((x.shape[1], classes)), []
    for _ in range(steps):
        logits = x @ kernel
        logits -= logits.max(1, keepdims=True)
        log_p = logits - np.log(np.exp(logits).sum(1, keepdims=True))
        losses.append(-log_p[np.arange(len(x)), labels].mean())
        gradient = x.T @ (np.exp(log_p) - np.eye(classes)[labels]) / len(x)
        velocity = momentum * velocity - rate * gradient
        kernel = kernel + velocity
    return np.array(losses)


def features(energy: float, rows: int, spread: float, seed: int) -> np.ndarray:
    """``rows`` rows of 8 non-negative features (as after a ReLU) around a common direction,
    each of squared norm ``energy``: nearly all of ``E[x x^T]``'s trace in one direction, the
    case where the curvature bound ``energy / classes`` is tight."""
    x = np.abs(1 + spread * np.random.default_rng(seed).standard_normal((rows, 8)))
    return x * np.sqrt(energy) / np.linalg.norm(x, axis=1, keepdims=True)


@given(
    exponent=st.floats(1, 8), rate_exponent=st.floats(-6, -1), momentum=st.floats(0, 0.99),
    classes=st.integers(2, 21), spread=st.floats(0.05, 1), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_the_stable_factor_keeps_sgd_on_a_score_layer_from_rising_above_chance(
    exponent, rate_exponent, momentum, classes, spread, seed
):
    """At ``rate * stable_rate_factor(energy, rate, momentum, classes)`` a zero-initialised
    softmax layer on inputs of any energy (1e1..1e8 per pixel), for 2 to 21 classes, never
    rises above the chance loss ln(classes), and ends below it."""
    energy, rate = 10.0**exponent, 10.0**rate_exponent
    x = features(energy, 4 * classes, spread, seed)
    factor = stable_rate_factor(energy, rate, momentum, classes)
    losses = heavy_ball_losses(x, classes, rate * factor, momentum, 200)
    chance = np.log(classes)
    assert np.isfinite(losses).all() and losses.max() <= chance * (1 + 1e-9), losses.max()
    assert losses[-1] < chance, losses[-1]


@pytest.mark.parametrize("classes", [4, 21])
def test_one_and_a_half_times_the_stable_rate_blows_up(classes):
    """The bound is tight: at 1.5x the factor's rate the same layer (fc7-like energy 1e5, lr
    1e-3, momentum 0.9) rises to over twice the chance loss."""
    x = features(1e5, 4 * classes, 0.3, 0)
    factor = stable_rate_factor(1e5, 1e-3, 0.9, classes)
    losses = heavy_ball_losses(x, classes, 1.5 * 1e-3 * factor, 0.9, 200)
    assert losses.max() > 2 * np.log(classes), losses.max()


@pytest.mark.parametrize("dropout", [0.0, 0.5])
def test_head_input_energy_is_that_of_fc7_through_dropout(dropout):
    """Without dropout :func:`head_input_energy` is the numpy mean over fc7's positions of the
    squared channel norms; with dropout one draw is within 5% of the mean over 16 draws (here
    1024 channels x 16 positions) and at least twice the dropout-free energy (drop7 doubles it
    in expectation, and drop6's noise cannot lower a ReLU's mean square: it is convex)."""
    keras.utils.set_random_seed(0)
    model = build_model("fcn8s", weights=None, dropout=dropout, width=1 / 4)
    images = np.random.default_rng(0).uniform(0, 255, (1, 96, 96, 3)).astype("float32")
    fc7 = np.asarray(keras.Model(model.input, model.get_layer("fc7").output)(images), np.float64)
    plain = np.mean(np.sum(fc7**2, -1))
    draws = [head_input_energy(model, images) for _ in range(16)]
    if dropout == 0:
        assert draws[0] == pytest.approx(plain, rel=1e-5)
        return
    assert draws[0] == pytest.approx(np.mean(draws), rel=0.05), draws
    assert np.mean(draws) > 2 * plain * 0.95, (np.mean(draws), plain)


def test_score_fr_rate_factor_is_saved_and_restored_with_the_optimizer(tmp_path):
    """The factor lives in the optimiser's state: a model compiled anew and loaded from a
    checkpoint has the factor the saved run had (a resumed run does not measure it again)."""
    def compiled():
        return compile_for_training(
            build_model("fcn8s", weights=None, width=1 / 16), RECIPES["practical"], 10
        )

    model = compiled()
    assert float(model.optimizer.rate_factors[HEAD_SCORE]) == 1.0
    model.optimizer.rate_factors[HEAD_SCORE].assign(0.125)
    model.save_weights(tmp_path / "run.weights.h5")
    restored = compiled()
    restored.load_weights(tmp_path / "run.weights.h5")
    assert float(restored.optimizer.rate_factors[HEAD_SCORE]) == 0.125


def test_the_factor_scales_the_step_of_score_fr_kernel_and_of_nothing_else():
    """One step of two identical models (no dropout, the same batch), score_fr's factor 0.25 in
    one: its kernel moves by 0.25 times the other's (a zero kernel: no decay in the first step);
    every other variable moves alike."""
    images = np.random.default_rng(0).uniform(0, 255, (2, 64, 64, 3)).astype("float32")
    labels = np.random.default_rng(1).integers(0, 21, (2, 64, 64))
    steps = []
    for factor in (1.0, 0.25):
        keras.utils.set_random_seed(0)
        model = compile_for_training(
            build_model("fcn8s", weights=None, width=1 / 16, dropout=0.0), RECIPES["practical"],
            10, pretrained=False,
        )  # fmt: skip
        model.optimizer.rate_factors[HEAD_SCORE].assign(factor)
        before = {v.path: np.array(v) for v in model.trainable_variables}
        model.train_on_batch(images, labels)
        steps.append({v.path: np.array(v) - before[v.path] for v in model.trainable_variables})
    full, quarter = steps
    for path, step in full.items():
        expected = 0.25 * step if path == f"{HEAD_SCORE}/kernel" else step
        scale = np.abs(step).max() or 1.0
        np.testing.assert_allclose(quarter[path], expected, atol=1e-5 * scale, err_msg=path)
    assert np.abs(full[f"{HEAD_SCORE}/kernel"]).max() > 0


def test_skip_rates_train_a_staged_fcn8s_exactly_as_the_atonce_scaling():
    """fcn8s with skip_kernel_lr_mults and fcn8s_atonce (pool4 x 1e-2, pool3 x 1e-4 in the
    model) started from the same function (at-once skip kernels = staged / scale) stay the same
    function through training: the same logits, staged kernel = scale x at-once kernel."""
    staged = randomize(fcn.build_model("fcn8s", 3, None, width=1 / 16, dropout=0.0), seed=9)
    atonce = fcn.build_model("fcn8s_atonce", 3, None, width=1 / 16, dropout=0.0)
    fcn.transfer_weights(staged, atonce)
    for pool, scale in ATONCE_SCALES.items():
        kernel, bias = staged.get_layer(f"score_{pool}").get_weights()
        atonce.get_layer(f"score_{pool}").set_weights([kernel / scale, bias])
    assert skip_kernel_lr_mults(staged) == {"score_pool4": 1e-4, "score_pool3": 1e-8}
    assert skip_kernel_lr_mults(atonce) == {}
    rng = np.random.default_rng(9)
    images = rng.integers(0, 256, (6, 64, 64, 3)).astype(np.uint8)
    labels = rng.integers(0, 3, (6, 64, 64)).astype(np.uint8)
    recipe = dataclasses.replace(RECIPES["practical"], learning_rate=0.01)
    for model in (staged, atonce):
        compile_for_training(model, recipe, total_batches=3)
        model.fit(images, labels, batch_size=2, shuffle=False, verbose=0)
    whole = np.asarray(staged(images[:2], training=False))
    ours = np.asarray(atonce(images[:2], training=False))
    assert_within(ours, whole, network_tolerance(staged, np.abs(whole).max()), "logits")
    for pool, scale in ATONCE_SCALES.items():
        trained = staged.get_layer(f"score_{pool}").kernel.numpy()
        assert_within(scale * atonce.get_layer(f"score_{pool}").kernel.numpy(), trained,
                      sum_tolerance(labels.size, np.abs(trained).max()), pool)  # fmt: skip
