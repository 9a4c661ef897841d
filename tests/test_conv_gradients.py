"""The lean convolution gradients equal TensorFlow's to float rounding, under both CPU kernel sets;
kernels stay in their own buffers: reads share them and a training step updates them in place."""

from __future__ import annotations

from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_within, sum_tolerance
from hypothesis import given, settings
from hypothesis import strategies as st

import fcn
from fcn import conv_gradients
from fcn._compat import host_view
from fcn.conv_gradients import (
    ROW_PRODUCT_COLUMNS,
    banded_gradients,
    conv2d,
    lean_conv2d,
    patch_gradients,
)
from fcn.training.recipes import RECIPES
from fcn.training.train import compile_for_training

EPS = np.finfo(np.float32).eps

# (N, H, W, Cin, Cout, k, padding, band bytes): one-row bands, bands of several rows, one band,
# 7x7 valid (fc6's shape), a 1x1 map, a kernel as large as the image
CASES = [
    (1, 9, 10, 5, 7, 3, "SAME", 1),
    (2, 13, 7, 4, 6, 3, "SAME", 3_000),
    (2, 13, 7, 4, 6, 3, "VALID", 5_000),
    (3, 17, 11, 3, 8, 3, "SAME", 10**9),
    (1, 22, 22, 8, 16, 7, "VALID", 20_000),
    (1, 5, 5, 3, 4, 5, "SAME", 1),
    (1, 1, 1, 2, 3, 3, "SAME", 1),
    (1, 7, 7, 2, 3, 7, "VALID", 1),
]


def _reference(x, kernel, dy, padding):
    """float64 gradients and, elementwise, the same sums over absolute values (the scale of
    each sum's rounding error)."""
    def grads(x, kernel, dy):
        x, kernel, dy = (tf.constant(v, tf.float64) for v in (x, kernel, dy))
        with tf.GradientTape() as tape:
            tape.watch([x, kernel])
            y = tf.nn.conv2d(x, kernel, 1, padding)
        return [g.numpy() for g in tape.gradient(y, [x, kernel], output_gradients=dy)]

    return grads(x, kernel, dy), grads(np.abs(x), np.abs(kernel), np.abs(dy))


def _assert_within_rounding(got, exact, scale, terms):
    """float32 sums of ``terms`` products err by at most ~terms * eps of their absolute sum."""
    bound = 2 * terms * EPS * scale + 1e-30
    assert got.shape == exact.shape
    assert np.all(np.abs(got - exact) <= bound), np.max(np.abs(got - exact) / bound)


@pytest.mark.parametrize("case", CASES)
def test_banded_and_patch_gradients_equal_the_exact_ones(case):
    n, h, w, cin, cout, k, padding, band = case
    rng = np.random.default_rng(sum(case[:6]))
    x = rng.standard_normal((n, h, w, cin)).astype(np.float32)
    kernel = rng.standard_normal((k, k, cin, cout)).astype(np.float32)
    oh, ow = (h, w) if padding == "SAME" else (h - k + 1, w - k + 1)
    dy = rng.standard_normal((n, oh, ow, cout)).astype(np.float32)
    (dx, dk), (dx_scale, dk_scale) = _reference(x, kernel, dy, padding)

    # eager, and traced with unknown sizes (whole images: the band count is a tensor)
    spec = [tf.TensorSpec([None] * 4), tf.TensorSpec(kernel.shape), tf.TensorSpec([None] * 4)]
    traced = tf.function(lambda *a: banded_gradients(*a, padding, band), input_signature=spec)
    results = [banded_gradients(x, kernel, dy, padding, band), traced(x, kernel, dy)]
    if padding == "VALID":
        results.append(patch_gradients(x, kernel, dy))
    with tf.GradientTape() as tape:  # whichever way this kernel set takes
        tape.watch(inputs := [tf.constant(x), tf.constant(kernel)])
        y = lean_conv2d(*inputs, padding.lower())
    results.append(tape.gradient(y, inputs, output_gradients=tf.constant(dy)))
    for got_dx, got_dk in results:
        _assert_within_rounding(np.asarray(got_dx), dx, dx_scale, k * k * cout)
        _assert_within_rounding(np.asarray(got_dk), dk, dk_scale, n * oh * ow)


def _addresses(model: keras.Model) -> dict[str, int]:
    """Where each kernel's buffer lives, as two reads of it see it (None if they differ)."""
    out = {}
    for variable in model.trainable_variables:
        reads = [host_view(tf.convert_to_tensor(variable.value)).ctypes.data for _ in range(2)]
        out[variable.path] = reads[0] if reads[0] == reads[1] else None
    return out


def test_kernels_are_read_without_copies_and_updated_in_place(tmp_path):
    keras.utils.set_random_seed(0)
    model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
    path = tmp_path / "m.keras"
    model.save(path)
    for built in (model, fcn.load_model(path)):
        before = _addresses(built)
        assert None not in before.values(), [k for k, v in before.items() if v is None]
    compile_for_training(model, RECIPES["practical"], total_batches=10, pretrained=False)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (2, 64, 64, 3), dtype=np.uint8)
    labels = rng.integers(0, 21, (2, 64, 64), dtype=np.uint8)
    before = _addresses(model)
    kernel = model.get_layer("fc6").kernel.numpy()
    for _ in range(2):
        model.train_on_batch(images, labels)
    assert not np.array_equal(model.get_layer("fc6").kernel.numpy(), kernel)  # it trained
    assert _addresses(model) == before


@settings(max_examples=10)
@given(
    shape=st.tuples(st.integers(1, 2), st.integers(0, 5), st.integers(0, 5), st.integers(1, 6),
                    st.integers(1, 5)),  # fmt: skip
    k=st.sampled_from([7, 9]),
    dtype=st.sampled_from(["float32", "bfloat16"]),
    columns=st.sampled_from([1, 2, 3, ROW_PRODUCT_COLUMNS]),
)
def test_row_products_forward_equals_a_float64_convolution(shape, k, dtype, columns):
    """fc6's forward (`row_products`, through `conv2d`) for any batch, size, channels and band
    of output channels (all of them in one, or bands of 1-3 with a last one narrower): the
    float64 convolution of the same (rounded) inputs, to the rounding of sums of k * k * Cin
    products in float32, and in bf16 the rounding of each of the k row products and of each of
    the k running sums (bf16's unit roundoff: 2**-8)."""
    n, extra_h, extra_w, cin, cout = shape
    rng = np.random.default_rng(sum(shape) * k)
    x = tf.cast(rng.standard_normal((n, k + extra_h, k + extra_w, cin)), dtype)
    kernel = tf.cast(rng.standard_normal((k, k, cin, cout)), dtype)
    with mock.patch.object(conv_gradients, "ROW_PRODUCT_COLUMNS", columns):
        out = tf.cast(conv2d(x, kernel, "VALID"), tf.float64).numpy()
    x64, k64 = tf.cast(x, tf.float64), tf.cast(kernel, tf.float64)
    exact = tf.nn.conv2d(x64, k64, 1, "VALID").numpy()
    magnitude = tf.nn.conv2d(abs(x64), abs(k64), 1, "VALID").numpy()
    tolerance = sum_tolerance(k * k * cin, magnitude)
    if dtype == "bfloat16":
        tolerance += sum_tolerance(2 * k, magnitude, 2.0**-8)
    assert_within(out, exact, tolerance, f"row products {dtype}")


@pytest.mark.parametrize("static", [True, False])
def test_fc6s_gradient_is_chosen_when_traced_where_its_shapes_are_known(static):
    """Fixed crops (shapes known when traced): fc6's gradient is its patch matrix's products,
    chosen in Python, so an input gradient that nothing reads (a frozen VGG body) is pruned
    from the graph; unknown shapes keep the choice in the graph (a conditional), where both of
    its gradients are computed (under Eigen 2.0 s instead of 0.7 for fc6's kernel gradient at
    two 320x320 crops)."""
    kernel = tf.random.normal((7, 7, 4, 8))
    spec = tf.TensorSpec((2, 9, 9, 4) if static else (None, None, None, 4), tf.float32)

    @tf.function(input_signature=[spec])
    def kernel_gradient(x):
        with tf.GradientTape() as tape:
            tape.watch(kernel)
            total = tf.reduce_sum(lean_conv2d(x, kernel, "valid"))
        return tape.gradient(total, kernel)

    graph = kernel_gradient.get_concrete_function().graph
    conditionals = [op for op in graph.get_operations() if op.type in ("If", "StatelessIf")]
    assert bool(conditionals) == (not static)
    x = tf.random.normal((2, 9, 9, 4))
    with tf.GradientTape() as tape:
        tape.watch(kernel)
        total = tf.reduce_sum(tf.nn.conv2d(x, kernel, 1, "VALID"))
    expected = tape.gradient(total, kernel)
    np.testing.assert_allclose(kernel_gradient(x), expected, rtol=1e-4, atol=1e-4)
