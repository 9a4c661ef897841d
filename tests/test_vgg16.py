"""VGG16 ImageNet initialisation: exact transplant, notop files, Keras' cache, offline errors."""

from __future__ import annotations

import hashlib

import h5py
import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_within, randomize, sum_tolerance, write_legacy_h5

import fcn.initialize
import fcn.vgg16
from fcn import build_model
from fcn.vgg16 import WEIGHTS_FILE, WeightsUnavailableError, vgg16_to_fcn_names


@pytest.fixture(scope="module")
def vgg16() -> keras.Model:
    """Keras' own VGG16 (with top) holding random weights that the tests write to files."""
    return randomize(keras.applications.VGG16(weights=None, include_top=True), seed=7)


def _rounding_tolerance(layer: keras.layers.Layer, x) -> np.ndarray:
    """How far two float32 evaluations of Keras ``layer`` (a 'same' conv or a Dense) on ``x``
    may differ, value by value: its sums' size and their absolute magnitude, sum |x w| + |b|."""
    kernel, bias = (np.abs(w) for w in layer.get_weights())
    if kernel.ndim == 2:
        magnitude = np.abs(np.reshape(x, (1, -1))) @ kernel + bias
    else:
        magnitude = tf.nn.conv2d(tf.abs(x), kernel, 1, "SAME").numpy() + bias
    return sum_tolerance(int(np.prod(kernel.shape[:-1])), magnitude)


def test_transplant_reproduces_vgg16_activations(vgg16, tmp_path):
    """Each FCN layer, given Keras VGG16's input to the same layer, gives VGG16's output to the
    rounding of its own sums (whatever the kernels' summation order); pools exactly."""
    path = tmp_path / "vgg16.weights.h5"
    vgg16.save_weights(path)
    model = build_model("fcn8s", weights=str(path))
    image = np.random.default_rng(0).integers(0, 256, (1, 224, 224, 3)).astype(np.float32)
    x = keras.applications.vgg16.preprocess_input(image.copy())
    ours = model.get_layer("preprocess")(image)
    np.testing.assert_allclose(ours, x, rtol=0, atol=np.spacing(np.float32(256)))
    names = {**vgg16_to_fcn_names(), **{f"block{b}_pool": f"pool{b}" for b in range(1, 6)}}
    order = [layer.name for layer in vgg16.layers if layer.name in names]
    outputs = keras.Model(vgg16.input, [vgg16.get_layer(n).output for n in order])(x)
    previous = x
    for name, theirs in zip(order, outputs):
        layer, theirs = model.get_layer(names[name]), np.asarray(theirs)
        assert theirs.std() > 0, name  # a real, non-degenerate comparison
        if name.endswith("pool"):  # a max rounds nothing
            np.testing.assert_array_equal(layer(previous), theirs, err_msg=name)
        else:
            inputs = previous
            if name == "block1_conv1":  # valid on the model's 100 px pad; Keras' is 'same'
                inputs = tf.pad(previous, [[0, 0], [1, 1], [1, 1], [0, 0]])
            elif name == "fc2":  # fc7 is a 1x1 conv; fc6 is a 7x7 one and takes pool5 as is
                inputs = tf.reshape(previous, (1, 1, 1, -1))
            ours = np.reshape(layer(inputs), theirs.shape)
            assert_within(ours, theirs, _rounding_tolerance(vgg16.get_layer(name), previous), name)
        previous = theirs


def test_fc6_and_fc7_are_fc1_and_fc2_in_sliced_reads(vgg16, tmp_path, monkeypatch):
    """The file is read in row blocks (here of 1,000 values, so blocks split fc1's rows
    between fc6's kernel positions); the result is the net surgery, value for value."""
    monkeypatch.setattr(fcn.initialize, "SLICE_ELEMENTS", 1000)
    path = tmp_path / "vgg16.h5"
    write_legacy_h5(vgg16, path)
    model = build_model("fcn32s", weights=str(path))
    for fc, dense in (("fc6", "fc1"), ("fc7", "fc2")):
        kernel, bias = vgg16.get_layer(dense).get_weights()
        ours = model.get_layer(fc).get_weights()
        np.testing.assert_array_equal(ours[0], kernel.reshape(ours[0].shape), fc)
        np.testing.assert_array_equal(ours[1], bias, fc)
    np.testing.assert_array_equal(
        model.get_layer("conv3_2").get_weights()[0],
        vgg16.get_layer("block3_conv2").get_weights()[0],
    )


def test_a_file_with_a_wrong_layer_shape_names_it(tmp_path):
    small = keras.applications.VGG16(weights=None, include_top=False, input_shape=(32, 32, 3))
    path = tmp_path / "vgg16.h5"
    write_legacy_h5(small, path)
    with h5py.File(path, "a") as f:
        del f["block4_conv2/block4_conv2/kernel"]
        f["block4_conv2/block4_conv2"].create_dataset("kernel", data=np.zeros((3, 3, 512, 7)))
    with pytest.raises(ValueError, match=r"block4_conv2 holds \(3, 3, 512, 7\)"):
        build_model("fcn8s", weights=str(path))
    text = tmp_path / "not-hdf5.h5"
    text.write_text("hello")
    with pytest.raises(ValueError, match="not-hdf5.h5 is not a Keras VGG16 weights file"):
        build_model("fcn8s", weights=str(text))


def test_every_vgg16_layer_is_mapped(vgg16):
    mapped = set(vgg16_to_fcn_names())
    weighted = {layer.name for layer in vgg16.layers if layer.weights}
    assert weighted - mapped == {"predictions"}  # fc8 is dropped, everything else is used


def test_notop_file_loads_convs_and_warns(vgg16, tmp_path):
    notop = keras.applications.VGG16(weights=None, include_top=False)
    for layer in notop.layers[1:]:
        layer.set_weights(vgg16.get_layer(layer.name).get_weights())
    path = tmp_path / "vgg16_notop.h5"
    write_legacy_h5(notop, path)
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
    write_legacy_h5(vgg16, path)
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
    write_legacy_h5(vgg16, path)
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
