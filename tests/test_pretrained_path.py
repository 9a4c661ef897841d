"""fcn.train from VGG16 weights, on every clone: a random-weight 'notop' file written here stands
for Keras' ImageNet file (the real one is 57 MB and lives outside the repository:
tests/test_convergence.py), so the pretrained path runs in every suite: the notop warning, VGG
blocks 1-5 frozen, fc6/fc7 and the score layers trained, and score_fr's rate set from the
energy of its input (with the warning where that energy is past the stability bound)."""

from __future__ import annotations

import re
import warnings

import h5py
import keras
import numpy as np
import pytest
from conftest import TINY, sum_tolerance, width_reduced_build

import fcn
import fcn.training.train as train_module
from fcn.data import sample_voc_root
from fcn.layout import FC_LAYERS
from fcn.training.recipes import RECIPES
from fcn.vgg16 import vgg16_to_fcn_names

SCORE_LAYERS = ("score_fr", "score_pool4", "score_pool3")
VGG_CONVS = [name for name in vgg16_to_fcn_names().values() if name not in FC_LAYERS]
CROP, BATCH = 64, 2
HEAD_RATE_MARGIN = train_module.HEAD_RATE_MARGIN
"""The share of the stability bound that score_fr's rate is kept at, and below which fcn.train
warns (fcn.training's documented setting)."""


def file_weights(path) -> dict[str, list[np.ndarray]]:
    """The arrays of every layer of a legacy Keras HDF5 weights file, read with h5py alone
    (keyed by the FCN layer each VGG16 layer becomes)."""
    names = vgg16_to_fcn_names()
    with h5py.File(path, "r") as f:
        return {
            names[layer]: [f[layer][w][()] for w in f[layer].attrs["weight_names"]]
            for layer in f.attrs["layer_names"]
            if len(f[layer].attrs["weight_names"])
        }


def head_energy(model: keras.Model, batches) -> tuple[float, int]:
    """The mean ||x||^2 over the positions of score_fr's input x (every image of ``batches``,
    dropout off: the test trains with dropout 0) in float64, and how many squares it sums."""
    features = keras.Model(model.input, model.get_layer("score_fr").input)
    squares = [np.square(np.asarray(features(b, training=False), np.float64)) for b in batches]
    per_position = np.concatenate([s.sum(-1).ravel() for s in squares])
    return float(per_position.mean()), sum(s.size for s in squares)


def stable_factor(energy: float, classes: int, recipe=RECIPES["practical"]) -> float:
    """score_fr's rate factor as documented (fcn.training.rates.stable_rate_factor): a zero
    score layer's loss curvature is at most ``energy / classes``; heavy-ball SGD on a curvature
    c is stable while ``lr * c < 2 (1 + momentum)``; the factor keeps the rate at
    HEAD_RATE_MARGIN of that bound, and at most 1."""
    bound = 2 * (1 + recipe.momentum) * classes / (recipe.learning_rate * energy)
    return min(1.0, HEAD_RATE_MARGIN * bound)


@pytest.mark.parametrize(
    "conv5_scale, low, high",
    [(4.0, HEAD_RATE_MARGIN, 1.0), (8.0, 0.0, HEAD_RATE_MARGIN)],
    ids=["lowered", "below-the-margin"],
)
def test_a_notop_file_trains_the_head_alone_at_score_frs_measured_rate(
    vgg16_notop_file, tmp_path, monkeypatch, conv5_scale, low, high
):
    """One step of ``fcn.train``'s defaults from a random VGG16 'notop' file of the tiny width
    (conv5_3 scaled to put score_fr's input energy where wanted): it warns that fc6/fc7 start
    random; VGG blocks 1-5 are not trainable and keep the file's weights bit for bit, while
    fc6, fc7 and the three score layers move; score_fr's rate factor is the documented bound
    at the energy this test measures itself on the crops the rate was set from; and the
    energy warning (with both figures) comes exactly where that factor is below the margin."""
    path = vgg16_notop_file(TINY, seed=3, conv5_scale=conv5_scale)
    seen = {}
    real_set_head_rate = train_module.set_head_rate

    def set_head_rate(model, batches, recipe):
        seen["before"] = {layer.name: [np.array(w) for w in layer.get_weights()]
                          for layer in model.layers}  # fmt: skip
        seen["energy"], seen["terms"] = head_energy(model, batches)
        seen["classes"] = model.get_layer("score_fr").filters
        return real_set_head_rate(model, batches, recipe)

    monkeypatch.setattr(train_module, "build_model", width_reduced_build)
    monkeypatch.setattr(train_module, "set_head_rate", set_head_rate)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = fcn.train(
            sample_voc_root(), weights=str(path), width=TINY, dropout=0.0, val_files=(),
            run_dir=tmp_path / "run", epochs=1, steps_per_epoch=1, crop_size=CROP,
            batch_size=BATCH, verbose=0,
        )  # fmt: skip
    said = [str(w.message) for w in caught]
    assert any("has no fully connected layers ('notop' file)" in s for s in said), said

    # score_fr's rate: the bound at the energy measured here (float32 sums of nonnegative
    # squares in another order: relative rounding sum_tolerance(terms, 1))
    assert "energy" in seen, "fcn.train did not set score_fr's rate from the weights' features"
    energy, rtol = seen["energy"], float(sum_tolerance(seen["terms"], 1.0))
    factor = stable_factor(energy, seen["classes"])
    assert low <= factor < high, (energy, factor)  # the file put the energy where intended
    set_factor = float(result.model.optimizer.rate_factors["score_fr"])
    assert set_factor == pytest.approx(factor, rel=rtol), (set_factor, factor, energy)

    warned = [s for s in said if s.startswith("score_fr's input")]
    if factor >= HEAD_RATE_MARGIN:
        assert not warned, warned
    else:
        assert len(warned) == 1, said
        figures = re.search(r"energy of (\S+) per pixel.* lr 0.001 .* scaled by (\S+) ", warned[0])
        assert figures, warned[0]
        said_energy, said_factor = map(float, figures.groups())  # to 3 significant digits
        assert said_energy == pytest.approx(energy, rel=5e-3 + rtol), (warned[0], energy)
        assert said_factor == pytest.approx(factor, rel=5e-3 + rtol), (warned[0], factor)

    # VGG blocks 1-5 frozen: as the file holds them, bit for bit; the head trained
    stored, model = file_weights(path), result.model
    assert sorted(stored) == sorted(VGG_CONVS)  # a notop file: no fc1/fc2
    for name in VGG_CONVS:
        layer = model.get_layer(name)
        assert not layer.trainable, name
        for ours, theirs in zip(layer.get_weights(), stored[name], strict=True):
            np.testing.assert_array_equal(ours, theirs, err_msg=name)
    for name in (*FC_LAYERS, *SCORE_LAYERS):
        layer = model.get_layer(name)
        assert layer.trainable, name
        before, after = seen["before"][name], layer.get_weights()
        assert not all(np.array_equal(a, b) for a, b in zip(after, before, strict=True)), name
    assert not np.any(seen["before"]["score_fr"][0])  # the score layers start at zero
