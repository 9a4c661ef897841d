"""FCN geometry, layer definitions, mixed precision and serialisation."""

from __future__ import annotations

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY, network_tolerance, randomize

from fcn import CROP_OFFSETS, VARIANTS, build_model, convert_caffe, transfer_weights
from fcn.layers import bilinear_filter
from fcn.model import topology

SIZES = [1, 2, 31, 32, 33, 224, 333, 375, 500, 513]


@pytest.mark.parametrize("variant", VARIANTS)
def test_output_size_equals_input_size_for_any_size(variant):
    model = build_model(variant, weights=None, width=TINY)
    shapes = [(s, s) for s in SIZES] + [(1, 513), (333, 500), (500, 375), (2, 31), (97, 64)]
    for h, w in shapes:
        logits = model(np.zeros((1, h, w, 3), np.uint8))
        assert tuple(logits.shape) == (1, h, w, 21), (variant, h, w)
        assert logits.dtype == tf.float32


@pytest.mark.parametrize("variant", VARIANTS)
def test_graph_uses_the_reference_crop_offsets(variant):
    model = build_model(variant, weights=None, width=TINY)
    crops = {layer.name: layer.offset for layer in model.layers if hasattr(layer, "offset")}
    assert crops == CROP_OFFSETS[variant]
    expected_final = {"fcn32s": 19, "fcn16s": 27, "fcn8s": 31, "fcn8s_atonce": 31}[variant]
    assert crops["score"] == expected_final


def _delta_average_pool_clone(variant: str) -> keras.Model:
    """The net with max pools swapped for average pools and every conv a centred delta.

    The net is then linear with a symmetric, exactly known footprint, so an output pixel's
    input-gradient centroid is where its receptive field is centred.
    """

    def clone(layer):
        if isinstance(layer, keras.layers.MaxPooling2D):
            return keras.layers.AveragePooling2D(2, 2, padding="same", name=layer.name)
        return layer.__class__.from_config(layer.get_config())

    model = keras.models.clone_model(
        build_model(variant, weights=None, width=TINY), clone_function=clone
    )
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2D):  # LeanConv2D too
            kh, kw, cin, cout = layer.kernel.shape
            kernel = np.zeros((kh, kw, cin, cout), np.float32)
            kernel[kh // 2, kw // 2] = 1.0 / cin
            layer.set_weights([kernel, np.zeros(cout, np.float32)])
    return model


@pytest.mark.parametrize("variant", VARIANTS)
def test_receptive_field_is_centred_on_its_output_pixel(variant):
    model = _delta_average_pool_clone(variant)
    image = tf.fill((1, 224, 224, 3), 255.0)  # positive after preprocessing: every ReLU is on
    for y, x in [(64, 66), (71, 77), (80, 88), (95, 93), (100, 130), (111, 101), (127, 150)]:
        with tf.GradientTape() as tape:
            tape.watch(image)
            value = model(image)[0, y, x, 0]
        grad = tf.reduce_sum(tf.abs(tape.gradient(value, image)[0]), axis=-1).numpy()
        rows, cols = np.indices(grad.shape)
        centre = (rows * grad).sum() / grad.sum(), (cols * grad).sum() / grad.sum()
        # Exact geometry gives an exact centroid; an off-by-one crop shifts it by >= 1/3 px.
        np.testing.assert_allclose(centre, (y, x), atol=0.02, err_msg=f"{variant} at {(y, x)}")


@pytest.mark.parametrize("size", [4, 16, 32, 64])
def test_bilinear_filter_matches_the_reference_formula(size):
    factor = (size + 1) // 2
    center = factor - 0.5  # even sizes
    expected = np.array(
        [
            [(1 - abs(i - center) / factor) * (1 - abs(j - center) / factor) for j in range(size)]
            for i in range(size)
        ]
    )
    np.testing.assert_allclose(bilinear_filter(size), expected)
    np.testing.assert_allclose(
        bilinear_filter(3), [[0.25, 0.5, 0.25], [0.5, 1, 0.5], [0.25, 0.5, 0.25]]
    )


def test_upsampling_is_diagonal_bilinear_and_frozen_unless_asked():
    model = build_model("fcn8s", weights=None, width=TINY, num_classes=5)
    trainable = {w.path for w in model.trainable_weights}
    for name, size in [("upscore2", 4), ("upscore_pool4", 4), ("upscore8", 16)]:
        layer = model.get_layer(name)
        kernel = layer.kernel.numpy()
        assert kernel.shape == (size, size, 5, 5)
        for i in range(5):
            for j in range(5):
                want = bilinear_filter(size) if i == j else np.zeros((size, size))
                np.testing.assert_allclose(kernel[:, :, i, j], want)
        assert layer.bias is None
        assert layer.kernel.path not in trainable
    learnable = build_model("fcn8s", weights=None, width=TINY, learnable_upsampling=True)
    assert learnable.get_layer("upscore8").kernel.path in {
        w.path for w in learnable.trainable_weights
    }


def test_new_score_layers_start_at_zero():
    model = build_model("fcn8s", weights=None, width=TINY)
    for name in ["score_fr", "score_pool4", "score_pool3"]:
        for weight in model.get_layer(name).get_weights():
            assert not weight.any()


def test_atonce_scales_the_skips():
    model = build_model("fcn8s_atonce", weights=None, width=TINY)
    assert model.get_layer("scale_pool4").factor == 0.01
    assert model.get_layer("scale_pool3").factor == 0.0001
    assert model.get_layer("score_pool4").input.name == model.get_layer("scale_pool4").output.name


def test_parameter_count_is_the_papers_134m():
    model = build_model("fcn8s", weights=None)

    def conv(k, cin, cout, bias=True):
        return k * k * cin * cout + (cout if bias else 0)

    vgg_channels = [3, 64, 64, 128, 128, 256, 256, 256, 512, 512, 512, 512, 512, 512]
    expected = sum(conv(3, a, b) for a, b in zip(vgg_channels, vgg_channels[1:]))
    expected += conv(7, 512, 4096) + conv(1, 4096, 4096)
    expected += conv(1, 4096, 21) + conv(1, 512, 21) + conv(1, 256, 21)
    expected += conv(4, 21, 21, False) * 2 + conv(16, 21, 21, False)
    assert model.count_params() == expected == 134_489_759
    names = [layer.name for layer in model.layers]
    for name in ["conv1_1", "conv5_3", "fc6", "fc7", "score_fr", "upscore2", "score_pool4",
                 "upscore_pool4", "score_pool3", "upscore8", "score"]:  # fmt: skip
        assert name in names


def test_mixed_float16_gives_float32_logits_close_to_float32(tiny_fcn8s):
    image = np.random.default_rng(0).integers(0, 256, (2, 64, 80, 3)).astype(np.uint8)
    reference = tiny_fcn8s(image).numpy()
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        half = build_model("fcn8s", weights=None, width=TINY)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    transfer_weights(tiny_fcn8s, half)
    assert half.get_layer("conv1_1").compute_dtype == "float16"
    logits = half(image)
    assert logits.dtype == tf.float32
    scale = np.abs(reference).max()
    assert scale > 0
    tolerance = network_tolerance(half, scale, "float16")
    np.testing.assert_allclose(logits.numpy(), reference, rtol=0, atol=tolerance)


def test_keras_file_round_trip_is_identical(tiny_fcn8s, tmp_path):
    path = tmp_path / "fcn8s.keras"
    tiny_fcn8s.save(path)
    loaded = keras.models.load_model(path)  # safe_mode: no Lambda layers in the graph
    image = np.random.default_rng(1).integers(0, 256, (1, 45, 61, 3)).astype(np.uint8)
    np.testing.assert_array_equal(loaded(image).numpy(), tiny_fcn8s(image).numpy())
    assert loaded.get_layer("score").offset == 31
    assert not loaded.get_layer("upscore8").trainable


def test_staged_initialisation_copies_shared_layers_only():
    fcn32s = randomize(build_model("fcn32s", weights=None, width=TINY), seed=3)
    fcn16s = build_model("fcn16s", weights=None, width=TINY, init_from=fcn32s)
    for name in ["conv1_1", "conv5_3", "fc6", "fc7", "score_fr"]:
        for a, b in zip(fcn32s.get_layer(name).get_weights(), fcn16s.get_layer(name).get_weights()):
            np.testing.assert_array_equal(a, b)
    assert not fcn16s.get_layer("score_pool4").get_weights()[0].any()
    fcn8s = build_model("fcn8s", weights=None, width=TINY, init_from=fcn16s)
    np.testing.assert_array_equal(
        fcn8s.get_layer("fc7").get_weights()[0], fcn32s.get_layer("fc7").get_weights()[0]
    )


@pytest.mark.parametrize(
    "use",
    [lambda v: build_model(v, weights=None), topology, lambda v: convert_caffe("x.caffemodel", v)],
    ids=["build_model", "topology", "convert_caffe"],
)
def test_an_unknown_variant_is_refused_naming_the_choices(use):
    """One check (fcn.layout.check_variant) for every function that takes a variant: before
    anything is built or read."""
    with pytest.raises(ValueError, match="unknown variant 'fcn4s'; choose one of fcn32s, "):
        use("fcn4s")


def test_bad_arguments_fail_clearly():
    with pytest.raises(ValueError, match="width-reduced"):
        build_model("fcn8s", weights="imagenet", width=0.5)
