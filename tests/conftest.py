"""Shared test helpers: small models with non-trivial weights, float tolerances, the seed."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402

import h5py  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402
from PIL import Image  # noqa: E402

# Property tests (hypothesis): "ci", the default, is derandomized and bounded to fit the suite's
# time budget; HYPOTHESIS_PROFILE=thorough draws 20x as many new examples each run (.ci/run runs
# it once on the @given tests, -m hypothesis, seeded from the commit: --hypothesis-seed).
settings.register_profile(
    "ci", max_examples=25, derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
settings.register_profile(
    "thorough", max_examples=500, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)  # fmt: skip
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

UNIT_ROUNDOFF = float(np.finfo(np.float32).eps) / 2
"""u = 2**-24: the relative error of one float32 rounding."""

LAMBDA = 6.0
"""Confidence of the probabilistic rounding bound below: a sum of n products rounded in float32,
in any order, is off by more than LAMBDA * sqrt(n) * u * sum(|x_i * w_i|) with probability
below 2 exp(-LAMBDA**2 / 2) = 3e-8 per value (Higham & Mary, SIAM J. Sci. Comput. 2019). The
deterministic worst case, n * u, is far from what real summation orders do."""


def sum_tolerance(terms: int, magnitude, unit_roundoff: float = UNIT_ROUNDOFF) -> np.ndarray:
    """Largest difference expected between two evaluations of the same sums of ``terms``
    products, in different orders (two kernel sets, two band sizes), whose absolute products
    add up to ``magnitude`` (an array: one per value; or the layer's largest)."""
    return 2 * LAMBDA * np.sqrt(terms) * unit_roundoff * np.asarray(magnitude)


def assert_within(actual, desired, tolerance, what: str = "") -> None:
    """|actual - desired| <= tolerance everywhere (``tolerance`` an array or a number)."""
    actual, desired = np.asarray(actual, np.float64), np.asarray(desired, np.float64)
    assert actual.shape == desired.shape, what
    excess = np.abs(actual - desired) - tolerance
    worst = np.unravel_index(np.argmax(excess), excess.shape)
    limit = np.broadcast_to(tolerance, excess.shape)[worst]
    assert excess[worst] <= 0, (
        f"{what}: off by {excess[worst] + limit:.3g} at {worst} > {limit:.3g}"
    )


def network_tolerance(model: keras.Model, magnitude: float, dtype: str = "float32") -> float:
    """How far two evaluations of ``model`` (different summation orders) may differ, for an
    output whose largest absolute value is ``magnitude``.

    Each layer adds independent rounding errors, which an initialisation that keeps the
    activations' scale (He) carries to the output at the same relative size, so variances
    add up: float32 sums of every kernel's terms per output value (sqrt of their total replaces
    sqrt(n) of :func:`sum_tolerance`) and, for a ``dtype`` narrower than float32, one rounding
    of every layer's output to it (sqrt of the number of layers).
    """
    terms = layers = 0
    for layer in model.layers:
        if isinstance(layer, keras.layers.Conv2DTranspose):  # kernel (kh, kw, out, in)
            (kh, kw), (sh, sw) = layer.kernel_size, layer.strides
            terms += -(-kh // sh) * -(-kw // sw) * layer.kernel.shape[3]
        elif isinstance(layer, keras.layers.Conv2D):  # kernel (kh, kw, in, out)
            terms += int(np.prod(layer.kernel.shape[:-1]))
        layers += bool(layer.weights)
    tolerance = sum_tolerance(terms, magnitude)
    if np.finfo(dtype).bits < 32:
        tolerance += sum_tolerance(layers, magnitude, float(np.finfo(dtype).eps) / 2)
    return float(tolerance)


def clear_of_ties(logits: np.ndarray, tolerance: float) -> np.ndarray:
    """Pixels whose top two logits are more than 2 ``tolerance`` apart: the argmax of any other
    evaluation within ``tolerance`` picks the same class there."""
    top2 = np.sort(logits, -1)[..., -2:]
    return top2[..., 1] - top2[..., 0] > 2 * tolerance


def whole_logits(model: keras.Model, image: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Keras' own pass over one (H, W, 3) image: its logits (H, W, C) and the pixels whose
    class any evaluation within :func:`network_tolerance` of it agrees on."""
    logits = np.asarray(model(np.asarray(image)[None].astype("float32"), training=False)[0])
    return logits, clear_of_ties(logits, network_tolerance(model, np.abs(logits).max()))


def void_near_ties(model: keras.Model, pairs) -> list[tuple[np.ndarray, np.ndarray]]:
    """``pairs`` with the near-tie pixels of ``model`` (see :func:`whole_logits`) made void:
    every way of evaluating them (batches, bands, tiles, kernels) must give one confusion."""
    out = []
    for image, label in pairs:
        label = np.array(label, np.uint8)
        label[~whole_logits(model, image)[1]] = 255
        out.append((np.asarray(image), label))
    return out


def assert_confusion_of(model: keras.Model, pairs, confusion: np.ndarray) -> None:
    """``confusion`` is ``model``'s on ``pairs``: each labelled pixel whose class is clear counts
    in (truth, Keras' argmax), each near-tie somewhere in its truth's row."""
    n = model.output_shape[-1]
    expected, ties = np.zeros((n, n), np.int64), np.zeros(n, np.int64)
    for image, label in pairs:
        logits, clear = whole_logits(model, image)
        label = np.asarray(label)
        labelled = label < n
        np.add.at(expected, (label[labelled & clear], logits.argmax(-1)[labelled & clear]), 1)
        ties += np.bincount(label[labelled & ~clear], minlength=n)
    extra = np.asarray(confusion) - expected
    assert (extra >= 0).all() and (extra.sum(1) == ties).all(), (extra.sum(1), ties)
    assert ties.sum() < 0.01 * expected.sum()  # a real comparison: nearly every pixel is clear


TINY = 1 / 16
"""Width multiplier of the topology-preserving test model (VGG body 4..32 channels, fc 256)."""


def randomize(model: keras.Model, seed: int = 0) -> keras.Model:
    """Give every weight of ``model`` random He-scaled values (score layers start at zero)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        weight.assign(rng.normal(0, np.sqrt(2 / fan_in), shape).astype(weight.dtype))
    return model


def write_legacy_h5(model: keras.Model, path) -> Path:
    """Write ``model``'s weights in the legacy HDF5 layout of Keras' published VGG16 files (a
    group per layer, by name: what :func:`fcn.vgg16.load_vgg16_weights` reads); returns
    ``path``."""
    from keras.src.legacy.saving import legacy_h5_format

    with h5py.File(path, "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, model)
    return Path(path)


def vgg16_notop(width: float = 1.0, seed: int = 0) -> keras.Model:
    """Keras' VGG16 without its top (``include_top=False``: its layer names, 3x3 'same' ReLU
    convolutions and 2x2 pools) with every block's channels scaled by ``width`` as
    :func:`fcn.build_model` scales them, holding random weights (:func:`randomize`)."""
    from fcn.layout import VGG_BLOCKS

    x = image = keras.Input((None, None, 3))
    for block, (convs, filters) in enumerate(VGG_BLOCKS, 1):
        for i in range(1, convs + 1):
            channels = max(1, int(round(filters * width)))
            x = keras.layers.Conv2D(channels, 3, padding="same", activation="relu",
                                    name=f"block{block}_conv{i}")(x)  # fmt: skip
        x = keras.layers.MaxPooling2D(2, name=f"block{block}_pool")(x)
    return randomize(keras.Model(image, x, name="vgg16"), seed)


def width_reduced_build(variant, num_classes=None, weights=None, **kwargs) -> keras.Model:
    """:func:`fcn.build_model` for a width-reduced net from a weights file of its width (in
    place of ``fcn.training.train.build_model``): ``build_model`` itself refuses weights below
    width 1 (Keras' files are full width), so the net is built at random and the file, if
    any, read in by :func:`fcn.vgg16.load_vgg16_weights`, as ``build_model`` does for a
    full-width one (the notop warning included)."""
    from fcn import build_model
    from fcn.vgg16 import load_vgg16_weights

    model = build_model(variant, num_classes, None, **kwargs)
    if weights is not None:
        load_vgg16_weights(model, str(weights))
    return model


@pytest.fixture
def vgg16_notop_file(tmp_path) -> Callable[..., Path]:
    """A writer of random-weight VGG16 'notop' files (:func:`vgg16_notop`, written by
    :func:`write_legacy_h5`): ``write(width, seed, conv5_scale)`` returns the file's path;
    ``conv5_scale`` multiplies conv5_3's kernel and bias, and so (ReLU and max pooling being
    positively homogeneous) the features that fc6 and fc7 see."""

    def write(width: float = 1.0, seed: int = 0, conv5_scale: float = 1.0) -> Path:
        model = vgg16_notop(width, seed)
        layer = model.get_layer("block5_conv3")
        layer.set_weights([w * np.float32(conv5_scale) for w in layer.get_weights()])
        return write_legacy_h5(model, tmp_path / f"vgg16_notop_{width:g}_{seed}_{conv5_scale:g}.h5")

    return write


def pytest_report_header(config) -> str:
    from fcn.device import cpu_summary

    return f"cpu: {cpu_summary()}"


@pytest.fixture(autouse=True)
def seed():
    """Every test starts from the same Keras, NumPy and Python random state (the models it
    builds, dropout, tf.data seeds left None)."""
    keras.utils.set_random_seed(0)


@pytest.fixture(scope="session")
def tiny_fcn8s() -> keras.Model:
    """A width-reduced FCN-8s with random non-zero weights (same graph and offsets as the paper)."""
    from fcn import build_model

    return randomize(build_model("fcn8s", weights=None, width=TINY), seed=1)


def write_shapes(root: Path, count: int, size: int = 96, seed: int = 0):
    """A learnable synthetic set: grey noise (class 0) with a red box (1) and a blue box (2).

    PNG images and index PNG labels in ``root/images`` and ``root/labels``; returns the
    :class:`fcn.data.SegmentationFiles`. No void pixels, so every image has size**2 labels.
    """
    from fcn.data import SegmentationFiles

    rng = np.random.default_rng(seed)
    (root / "images").mkdir(parents=True, exist_ok=True)
    (root / "labels").mkdir(exist_ok=True)
    for i in range(count):
        image = rng.integers(90, 140, (size, size, 3)).astype(np.uint8)
        label = np.zeros((size, size), np.uint8)
        for cls, colour in [(1, (220, 30, 30)), (2, (30, 30, 220))]:
            h, w = rng.integers(size // 4, size // 2, 2)
            y, x = rng.integers(0, size - h), rng.integers(0, size - w)
            image[y : y + h, x : x + w] = colour
            label[y : y + h, x : x + w] = cls
        Image.fromarray(image).save(root / "images" / f"{i:03d}.png")
        Image.fromarray(label).save(root / "labels" / f"{i:03d}.png")
    return SegmentationFiles.from_folders(root / "images", root / "labels")


COMPUTING = "fcn: computing on "
"""How the machine line that a computing command says once starts (fcn.device.compute_summary)."""


def said(err: str) -> list[str]:
    """The lines of ``err`` less the machine line, which a computing command says once."""
    lines = err.strip().splitlines()
    assert sum(line.startswith(COMPUTING) for line in lines) <= 1, lines
    return [line for line in lines if not line.startswith(COMPUTING)]
