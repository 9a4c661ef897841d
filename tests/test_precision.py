"""bf16 inference and training: which hardware "auto" picks it on, the model held in the precision
that runs, bf16 results within bf16's rounding of float32's, and the entry points that take it."""

from __future__ import annotations

import gc
import weakref

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY, clear_of_ties, network_tolerance, randomize
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

import fcn
import fcn.device
from fcn.cli import main
from fcn.device import BF16_CPU_FLAGS, CPU_FLAGS, native_bf16, resolve_precision
from fcn.inference.precision import _COPIES, in_precision, model_precision, trunk_layers
from fcn.inference.streamed import compiled_forward

BF16_UNIT_ROUNDOFF = 2.0**-8
"""u of bfloat16 (8 significant bits): rounding to nearest moves x by at most u |x|."""


@pytest.fixture(scope="module")
def bf16_model(tiny_fcn8s) -> keras.Model:
    return in_precision(tiny_fcn8s, "bfloat16")


@given(
    flags=st.sets(st.sampled_from(sorted({*CPU_FLAGS, "sse4_2", "avx2"}))),
    kernels=st.sampled_from(["oneDNN", "Eigen"]),
)
def test_auto_is_bfloat16_exactly_where_a_cpu_runs_it_natively(flags, kernels):
    """Any CPU's flags under either kernel set: native bf16 is AMX before AVX512-BF16, and
    "auto" is bfloat16 only with one of them under oneDNN (Eigen computes bf16 in float32)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(fcn.device, "cpu_info", lambda: ("a CPU", frozenset(flags)))
        patch.setattr(fcn.device, "cpu_kernels", lambda: kernels)
        patch.setattr(tf.config, "list_physical_devices", lambda kind=None: [])
        native = "AMX" if "amx_bf16" in flags else "AVX512-BF16" if "avx512_bf16" in flags else None
        assert native_bf16() == native
        expected = "bfloat16" if native and kernels == "oneDNN" else "float32"
        assert resolve_precision("auto") == expected
        assert fcn.device.auto_mixed_precision() == (
            "mixed_bfloat16" if expected == "bfloat16" else None
        )
        assert f"native bf16: {native or 'none'};" in fcn.device.cpu_summary()
        for given_precision in ("float32", "bfloat16"):
            assert resolve_precision(given_precision) == given_precision


@pytest.mark.parametrize("capability, expected", [((7, 5), None), ((8, 0), "GPU"), ((9, 0), "GPU")])
def test_a_gpu_has_native_bf16_from_ampere(monkeypatch, capability, expected):
    gpu = tf.config.PhysicalDevice("/physical_device:GPU:0", "GPU")
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind=None: [gpu])
    monkeypatch.setattr(
        tf.config.experimental, "get_device_details", lambda d: {"compute_capability": capability}
    )
    assert native_bf16() == expected
    assert resolve_precision("auto") == ("bfloat16" if expected else "float32")


def test_this_machine_is_named_with_its_native_bf16():
    """This host's answer, found here the documented way: a GPU that TensorFlow sees decides
    (bf16 from compute capability 8.0, Ampere); without one, the CPU's flags in /proc/cpuinfo
    (AMX before AVX512-BF16)."""
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        details = tf.config.experimental.get_device_details(gpus[0])
        major, minor = details.get("compute_capability") or (0, 0)
        expected = "GPU" if (major, minor) >= (8, 0) else None
    else:
        with open("/proc/cpuinfo") as f:
            line = next(line for line in f if line.startswith("flags"))
        flags = set(line.split(":")[1].split())
        names = [name for flag, name in BF16_CPU_FLAGS.items() if flag in flags]
        expected = names[0] if names else None
    assert native_bf16() == expected


@pytest.mark.parametrize("bad", ["fp16", "float16", "", "BFLOAT16"])
def test_an_unknown_precision_is_refused_by_name(tiny_fcn8s, bad):
    with pytest.raises(ValueError, match=r"precision must be one of auto, float32, bfloat16"):
        fcn.predict(np.zeros((40, 40, 3), np.uint8), tiny_fcn8s, precision=bad)


def test_the_bf16_copy_holds_the_trunk_in_bf16_and_the_scores_in_float32(tiny_fcn8s, bf16_model):
    assert in_precision(tiny_fcn8s, "float32") is tiny_fcn8s
    assert in_precision(bf16_model, "bfloat16") is bf16_model  # already: no copy of a copy
    assert model_precision(bf16_model) == "bfloat16"
    trunk = trunk_layers(tiny_fcn8s)
    assert {"conv1_1", "pool5", "fc6", "fc7"} <= trunk
    assert not trunk & {"score_fr", "score_pool4", "score_pool3", "upscore2", "upscore8"}
    for source, layer in zip(tiny_fcn8s.layers, bf16_model.layers):
        want = "bfloat16" if layer.name in trunk else "float32"
        assert layer.compute_dtype == want, layer.name
        for original, copied in zip(source.weights, layer.weights):
            assert copied.dtype == want, copied.path
            value = np.asarray(tf.cast(copied, tf.float64))
            exact = np.asarray(original, np.float64)  # bf16 rounds to nearest: within u |x|
            assert np.all(np.abs(value - exact) <= BF16_UNIT_ROUNDOFF * np.abs(exact)), layer.name


def test_the_copy_takes_the_models_new_weights_at_every_call(tiny_fcn8s):
    model = randomize(fcn.build_model("fcn8s", weights=None, width=TINY), seed=3)
    first = in_precision(model, "bfloat16")
    kernel = model.get_layer("fc7").kernel
    kernel.assign(kernel * 2.0)
    again = in_precision(model, "bfloat16")
    assert again is first  # one copy per model
    np.testing.assert_array_equal(
        np.asarray(tf.cast(again.get_layer("fc7").kernel, tf.float32)),
        np.asarray(tf.cast(tf.cast(kernel, tf.bfloat16), tf.float32)),
    )


@pytest.mark.parametrize("size", [(70, 90), (200, 220)])  # whole, and streamed in bands
def test_bf16_labels_are_float32s_wherever_float32_is_clear_of_bf16_rounding(
    tiny_fcn8s, bf16_model, size
):
    """Wherever the float32 logits' top two are further apart than bf16's rounding of every
    weight and layer can move them (:func:`network_tolerance` with bf16's unit roundoff), the
    bf16 labels equal float32's; the bf16 logits stay within that tolerance everywhere."""
    image = np.random.default_rng(size[0]).integers(0, 256, (1, *size, 3), np.uint8)
    reference = np.asarray(compiled_forward(tiny_fcn8s, "logits")(image))[0]
    logits = compiled_forward(bf16_model, "logits")(image)
    assert logits.dtype == tf.float32
    tolerance = network_tolerance(tiny_fcn8s, np.abs(reference).max(), "bfloat16")
    assert np.abs(np.asarray(logits)[0] - reference).max() <= tolerance
    clear = clear_of_ties(reference, tolerance)  # a random model's classes are close: few
    assert clear.sum() >= 20, clear.sum()  # (a trained one: tests/test_train.py, mean IoU)
    labels = np.asarray(fcn.predict(image[0], tiny_fcn8s, precision="bfloat16"))
    np.testing.assert_array_equal(labels[clear], reference.argmax(-1)[clear])


def test_a_models_copy_in_another_precision_goes_with_it():
    """The copy is kept while its model lives and freed with it (collected once the model's
    entry is gone: a second collection)."""
    model = fcn.build_model("fcn8s", weights=None, width=TINY)
    copy = weakref.ref(in_precision(model, "bfloat16"))
    assert model in _COPIES and copy() is in_precision(model, "bfloat16")
    gone = weakref.ref(model)
    del model
    gc.collect()
    gc.collect()
    assert gone() is None and copy() is None


def test_load_model_converts_on_load_and_holds_the_weights_once(tiny_fcn8s, tmp_path):
    path = tmp_path / "tiny.keras"
    tiny_fcn8s.save(path)
    model = fcn.load_model(path, precision="bfloat16")  # read straight into bf16 variables
    assert model_precision(model) == "bfloat16"
    assert model not in _COPIES  # no float32 model behind it
    copy = in_precision(tiny_fcn8s, "bfloat16")  # the same values as a copy's
    for read, copied in zip(model.weights, copy.weights):
        assert read.dtype == copied.dtype
        np.testing.assert_array_equal(np.asarray(tf.cast(read, tf.float32)),
                                      np.asarray(tf.cast(copied, tf.float32)))  # fmt: skip
    assert model_precision(fcn.load_model(path)) == "float32"  # the default: the file's own
    bf16_path = tmp_path / "bf16.keras"
    model.save(bf16_path)
    assert model_precision(fcn.load_model(bf16_path)) == "bfloat16"
    assert model_precision(fcn.load_model(bf16_path, precision="float32")) == "float32"


def assert_labels_of(model: keras.Model, image: np.ndarray, labels: np.ndarray, precision: str):
    """``labels`` are Keras' float32 argmax of ``model`` on ``image`` wherever its top two
    logits are further apart than ``precision``'s rounding can move them
    (:func:`network_tolerance`: for bfloat16, its 8-bit significand, u = 2**-8, in every weight
    and layer output; for float32, only the sums' order), on 20 pixels or more."""
    logits = np.asarray(model(image[None].astype("float32"), training=False)[0])
    tolerance = network_tolerance(model, np.abs(logits).max(), precision)
    clear = clear_of_ties(logits, tolerance)
    assert labels.shape == clear.shape and clear.sum() >= 20, clear.sum()
    np.testing.assert_array_equal(labels[clear], logits.argmax(-1)[clear])


def test_bf16_saved_model_is_half_the_size_and_litert_refuses_bf16(tiny_fcn8s, tmp_path):
    sizes, trunk = {}, trunk_layers(tiny_fcn8s)
    halved = sum(2 * w.numpy().size for layer in tiny_fcn8s.layers if layer.name in trunk
                 for w in layer.weights)  # fmt: skip
    image = np.random.default_rng(4).integers(0, 256, (1, 70, 90, 3), np.uint8)
    for precision in ("float32", "bfloat16"):
        folder = fcn.export_model(tiny_fcn8s, tmp_path / precision, precision=precision)
        sizes[precision] = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        served = tf.saved_model.load(str(folder)).signatures["serving_default"]
        labels = served(image=tf.constant(image))["labels"]
        assert labels.shape == (1, 70, 90) and labels.dtype == tf.uint8
        assert_labels_of(tiny_fcn8s, image[0], np.asarray(labels)[0], precision)
    assert sizes["float32"] - sizes["bfloat16"] >= 0.95 * halved, (sizes, halved)
    with pytest.raises(ValueError, match="precision='float32'"):
        fcn.export_model(tiny_fcn8s, tmp_path / "m.tflite", "litert", size=(64, 64),
                         precision="bfloat16")  # fmt: skip
    assert not (tmp_path / "m.tflite").exists()


def test_the_command_line_takes_precision_and_refuses_others(tiny_fcn8s, tmp_path, capsys):
    path = tmp_path / "tiny.keras"
    tiny_fcn8s.save(path)
    image = tmp_path / "a.png"
    pixels = np.random.default_rng(5).integers(0, 256, (70, 90, 3), np.uint8)
    Image.fromarray(pixels).save(image)
    assert main(["predict", str(image), "--model", str(path), "--out", str(tmp_path / "out"),
                 "--precision", "bfloat16"]) == 0  # fmt: skip
    written = np.asarray(Image.open(tmp_path / "out" / "a.png"))  # a palette PNG: the indices
    assert_labels_of(tiny_fcn8s, pixels, written, "bfloat16")
    with pytest.raises(SystemExit):
        main(["predict", str(image), "--model", str(path), "--out", "x", "--precision", "fp16"])
    assert "invalid choice: 'fp16'" in capsys.readouterr().err


@pytest.mark.parametrize("native", [True, False])
def test_auto_mixed_precision_trains_in_bf16_where_native_and_records_the_choice(
    native, tmp_path, monkeypatch
):
    """"auto" is decided when training starts and recorded as decided: a resume that says
    "auto" again on the same hardware continues it; bf16 trains without loss scaling."""
    from conftest import write_shapes

    from fcn.training.checkpoint import read_state

    monkeypatch.setattr(fcn.device, "bf16_runs_natively", lambda: native)
    shapes = write_shapes(tmp_path / "shapes", 4, size=48)
    run = dict(train_files=shapes, val_files=(), run_dir=tmp_path / "run", weights=None,
               width=TINY, num_classes=3, steps_per_epoch=1, crop_size=32, batch_size=2,
               mixed_precision="auto", verbose=0)  # fmt: skip
    result = fcn.train(**run, epochs=1)
    policy = "mixed_bfloat16" if native else None
    assert read_state(tmp_path / "run")["settings"]["mixed_precision"] == policy
    model = result.model
    assert model.get_layer("fc6").compute_dtype == ("bfloat16" if native else "float32")
    assert model.get_layer("fc6").kernel.dtype == "float32"  # master weights stay float32
    assert not isinstance(model.optimizer, keras.optimizers.LossScaleOptimizer)
    assert model(np.zeros((1, 40, 50, 3), np.uint8)).dtype == tf.float32
    resumed = fcn.train(**{**run, "resume": True}, epochs=2)
    assert [row["epoch"] for row in resumed.history] == [0, 1]
    assert np.isfinite([row["loss"] for row in resumed.history]).all()
    assert resumed.model.get_layer("conv1_1").compute_dtype == model.get_layer(
        "conv1_1"
    ).compute_dtype
