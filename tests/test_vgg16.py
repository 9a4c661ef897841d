"""VGG16 ImageNet initialisation: exact transplant, notop files, Keras' cache, offline errors."""

from __future__ import annotations

import hashlib

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import randomize
from keras.src.legacy.saving import legacy_h5_format

import fcn.vgg16
from fcn import build_model
from fcn.vgg16 import WEIGHTS_FILE, WeightsUnavailableError, vgg16_to_fcn_names


@pytest.fixture(scope="module")
def vgg16() -> keras.Model:
    """Keras' own VGG16 (with top) holding random weights that the tests write to files."""
    return randomize(keras.applications.VGG16(weights=None, include_top=True), seed=7)


def _write_legacy_h5(model: keras.Model, path) -> None:
    """Write weights in the legacy HDF5 layout of Keras' published VGG16 files."""
    with h5py.File(path, "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, model)


def test_transplant_reproduces_vgg16_activations(vgg16, tmp_path):
    path = tmp_path / "vgg16.weights.h5"
    vgg16.save_weights(path)
    model = build_model("fcn8s", weights=str(path))
    image = np.random.default_rng(0).integers(0, 256, (1, 224, 224, 3)).astype(np.float32)
    x = keras.applications.vgg16.preprocess_input(image.copy())
    # Conv features: the FCN's conv layers on the same input (pad 1 like Keras' 'same') give
    # exactly Keras VGG16's block5_pool.
    ours = model.get_layer("preprocess")(image)
    ours = tf.pad(ours, [[0, 0], [1, 1], [1, 1], [0, 0]])
    for block, convs in enumerate([2, 2, 3, 3, 3], 1):
        for i in range(1, convs + 1):
            ours = model.get_layer(f"conv{block}_{i}")(ours)
        ours = model.get_layer(f"pool{block}")(ours)
    pool5 = keras.Model(vgg16.input, vgg16.get_layer("block5_pool").output)(x)
    np.testing.assert_allclose(ours.numpy(), pool5.numpy(), rtol=1e-4, atol=1e-4)
    # fc6/fc7 applied to VGG16's pool5 reproduce its fc1/fc2 activations.
    fc1 = keras.Model(vgg16.input, vgg16.get_layer("fc1").output)(x).numpy()
    fc2 = keras.Model(vgg16.input, vgg16.get_layer("fc2").output)(x).numpy()
    fc6 = model.get_layer("fc6")(pool5)
    fc7 = model.get_layer("fc7")(fc6)
    assert fc6.shape == (1, 1, 1, 4096)
    np.testing.assert_allclose(fc6.numpy().reshape(1, -1), fc1, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(fc7.numpy().reshape(1, -1), fc2, rtol=1e-4, atol=1e-3)
    assert fc1.std() > 0  # a real, non-degenerate comparison


def test_every_vgg16_layer_is_mapped(vgg16):
    mapped = set(vgg16_to_fcn_names())
    weighted = {layer.name for layer in vgg16.layers if layer.weights}
    assert weighted - mapped == {"predictions"}  # fc8 is dropped, everything else is used


def test_notop_file_loads_convs_and_warns(vgg16, tmp_path):
    notop = keras.applications.VGG16(weights=None, include_top=False)
    for layer in notop.layers[1:]:
        layer.set_weights(vgg16.get_layer(layer.name).get_weights())
    path = tmp_path / "vgg16_notop.h5"
    _write_legacy_h5(notop, path)
    with pytest.warns(UserWarning, match="fc6 and fc7 keep a fresh random initialisation"):
        model = build_model("fcn32s", weights=str(path))
    np.testing.assert_array_equal(
        model.get_layer("conv4_2").get_weights()[0],
        vgg16.get_layer("block4_conv2").get_weights()[0],
    )


def test_imagenet_weights_come_through_keras_cache_with_hash(vgg16, tmp_path, monkeypatch):
    """Offline: a pre-seeded Keras cache is used, after get_file has checked the file's md5."""
    cache = tmp_path / "keras_home" / "models"
    cache.mkdir(parents=True)
    path = cache / WEIGHTS_FILE
    _write_legacy_h5(vgg16, path)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras_home"))
    monkeypatch.setattr(fcn.vgg16, "WEIGHTS_URL", "http://127.0.0.1:9/" + WEIGHTS_FILE)
    calls = []
    real_get_file = keras.utils.get_file

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return real_get_file(*args, **kwargs)

    monkeypatch.setattr(keras.utils, "get_file", spy)
    # The real file's hash does not match the file this test wrote: get_file refuses it and the
    # (unreachable) download fails with the clear error, never a silently random model.
    with pytest.raises(WeightsUnavailableError, match="weights='/path/to/" + WEIGHTS_FILE):
        build_model("fcn8s", weights="imagenet")
    assert calls[0]["file_hash"] == "64373286793e3c8b2b4e3219cbf3544b"
    assert calls[0]["cache_subdir"] == "models"
    # With the hash of the file that is there, the cached file is used as is.
    _write_legacy_h5(vgg16, path)
    monkeypatch.setattr(fcn.vgg16, "WEIGHTS_MD5", hashlib.md5(path.read_bytes()).hexdigest())
    model = build_model("fcn8s", weights="imagenet")
    np.testing.assert_array_equal(
        model.get_layer("fc7").get_weights()[0][0, 0], vgg16.get_layer("fc2").get_weights()[0]
    )


def test_offline_without_a_file_names_the_file_and_the_way_out(tmp_path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    monkeypatch.setattr(fcn.vgg16, "WEIGHTS_URL", "http://127.0.0.1:9/" + WEIGHTS_FILE)
    with pytest.raises(WeightsUnavailableError) as info:
        build_model("fcn8s", weights="imagenet")
    message = str(info.value)
    assert WEIGHTS_FILE in message and str(tmp_path) in message and "weights=" in message


def test_missing_or_wrong_weights_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere.h5"):
        build_model("fcn8s", weights=str(tmp_path / "nowhere.h5"))
    bogus = tmp_path / "bogus.h5"
    with h5py.File(bogus, "w") as f:
        f.create_dataset("x", data=np.zeros(3))
    with pytest.raises(ValueError, match="is not a Keras VGG16 weights file"):
        build_model("fcn8s", weights=str(bogus))
