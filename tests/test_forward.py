"""Streamed inference (fcn.inference.streamed) equals whole-model inference, in a fraction of the
memory, for exactly the models whose graph is their published Topology."""

import ctypes.util
import gc
import json
import subprocess
import sys
import textwrap
import weakref
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import TINY, clear_of_ties, network_tolerance, randomize

from fcn import build_model
from fcn.inference import budget, streamed
from fcn.inference.precision import in_precision
from fcn.inference.streamed import compiled_forward, streams
from fcn.layout import VARIANTS
from fcn.model import topology, topology_of

SIZES = [(1, 1, 1), (1, 37, 53), (2, 64, 40), (1, 131, 200)]


@pytest.fixture(autouse=True)
def always_stream(monkeypatch):
    """These images are small enough to run whole by default (WHOLE_PIXELS): stream them."""
    monkeypatch.setattr(budget, "WHOLE_PIXELS", 0)


def _check(model, images, labels=True):
    whole = np.asarray(model(images.astype("float32"), training=False))
    logits = np.asarray(compiled_forward(model)(images))
    scale = np.abs(whole).max()
    assert scale > 0 and logits.shape == whole.shape
    tolerance = network_tolerance(model, scale)
    np.testing.assert_allclose(logits, whole, rtol=0, atol=tolerance)
    if labels:
        predicted = np.asarray(compiled_forward(model, "labels")(images))
        assert predicted.dtype == np.uint8
        clear = clear_of_ties(whole, tolerance)
        assert clear.mean() > 0.9
        np.testing.assert_array_equal(predicted[clear], whole.argmax(-1)[clear])


@pytest.mark.parametrize("variant", ["fcn32s", "fcn16s", "fcn8s_atonce", "fcn8s"])
def test_streamed_equals_whole_model(variant, monkeypatch):
    """The smallest bands (2 input rows), so every layer carries rows over many bands and the
    deep layers wait for rows (the default bands hold these images whole: the other tests)."""
    monkeypatch.setattr(budget, "BAND_BYTES", 1)
    model = randomize(build_model(variant, weights=None, width=TINY), seed=2)
    assert streams(model)
    rng = np.random.default_rng(0)
    for size in SIZES:
        _check(model, rng.integers(0, 256, (*size, 3), dtype=np.uint8), labels=variant == "fcn8s")


def test_full_size_fcn8s_streams_exactly(monkeypatch):
    """The paper's widths (512-channel conv5, 4096-channel fc6/fc7), small bands, float input."""
    monkeypatch.setattr(budget, "BAND_BYTES", 2**20)
    model = randomize(build_model("fcn8s", weights=None), seed=3)
    image = np.random.default_rng(3).uniform(0, 255, (1, 150, 90, 3)).astype("float32")
    _check(model, image)
    assert streams(model)


def test_evaluate_and_predict_a_voc_sized_image_with_the_full_fcn8s():
    """A 500x375 photo through fcn.predict and fcn.evaluate with their defaults (the streamed
    path, default bands) gives the classes of the whole model's pass wherever its top two
    logits are clearly apart; the near-ties are void for evaluate, so its accuracy must be 1."""
    import fcn

    model = randomize(build_model("fcn8s", weights=None), seed=6)
    image = np.random.default_rng(6).integers(0, 256, (375, 500, 3), dtype=np.uint8)
    whole = np.asarray(model(image[None].astype("float32"), training=False))[0]
    clear = clear_of_ties(whole, network_tolerance(model, np.abs(whole).max()))
    assert clear.mean() > 0.9
    labels = fcn.predict(image, model, precision="float32")
    np.testing.assert_array_equal(labels[clear], whole.argmax(-1)[clear])
    truth = np.where(clear, whole.argmax(-1), 255).astype(np.uint8)
    scores = fcn.evaluate(model, [(image, truth)], precision="float32")
    assert scores.confusion.sum() == clear.sum()
    assert scores.pixel_accuracy == 1.0


def test_mixed_precision_model_streams():
    keras.mixed_precision.set_dtype_policy("mixed_float16")
    try:
        model = randomize(build_model("fcn8s", weights=None, width=TINY), seed=4)
    finally:
        keras.mixed_precision.set_dtype_policy("float32")
    image = np.random.default_rng(4).integers(0, 256, (1, 70, 50, 3), dtype=np.uint8)
    whole = np.asarray(model(image, training=False))
    logits = np.asarray(compiled_forward(model)(image))
    assert logits.dtype == np.float32
    tolerance = network_tolerance(model, np.abs(whole).max(), "float16")
    np.testing.assert_allclose(logits, whole, rtol=0, atol=tolerance)


def test_no_pixels_run_no_kernel(tiny_fcn8s):
    """oneDNN kernels mishandle empty tensors (a 1x1 conv returned its input's channels):
    an empty batch, or an image without rows, gives an empty result without running any."""
    run, labels = compiled_forward(tiny_fcn8s), compiled_forward(tiny_fcn8s, "labels")
    assert run(np.zeros((0, 64, 64, 3), np.uint8)).shape == (0, 64, 64, 21)
    assert labels(np.zeros((1, 0, 601, 3), np.uint8)).shape == (1, 0, 601)
    assert labels(np.zeros((2, 5, 0, 3), np.float32)).dtype == np.uint8


def test_a_bfloat16_band_holds_twice_the_rows_of_a_float32_one(tiny_fcn8s):
    """Bands are sized in each layer's bytes per value: conv1_1's output rows of a bfloat16
    trunk take 2 bytes a value, so a band of BAND_BYTES holds twice the input rows."""
    width, filters = 300, tiny_fcn8s.get_layer("conv1_1").filters
    padded = width + 2 * streamed._streamed(tiny_fcn8s).pad
    for model, value_bytes in ((tiny_fcn8s, 4), (in_precision(tiny_fcn8s, "bfloat16"), 2)):
        _, chunk = streamed._streamed(model).band_rows(1, width)
        assert int(chunk) == budget.BAND_BYTES // (padded * filters * value_bytes)


def test_the_streamed_caches_let_their_model_go(monkeypatch):
    """A model's streamed form and forward functions are kept while it lives and go with it:
    a model its user drops is freed once its function is dropped too, also after the function
    ran streamed and whole; a function kept runs on, its model held by it."""
    model = build_model("fcn8s", weights=None, width=TINY)
    forward, images = compiled_forward(model, "labels"), np.zeros((1, 40, 60, 3), np.uint8)
    runs = {}
    for whole_pixels in (0, 10**9):  # streamed, then whole (the Keras model traced in)
        monkeypatch.setattr(budget, "WHOLE_PIXELS", whole_pixels)
        runs[whole_pixels] = np.asarray(forward(images))
    assert model in streamed._STREAMED and model in streamed._FORWARDS
    gone = weakref.ref(model)
    del model
    gc.collect()
    for whole_pixels, labels in runs.items():  # its function keeps it alive
        monkeypatch.setattr(budget, "WHOLE_PIXELS", whole_pixels)
        np.testing.assert_array_equal(forward(images), labels)
    del forward
    gc.collect()
    assert gone() is None  # and so are its entries (weak keys)


def test_other_models_run_whole():
    inputs = keras.Input((None, None, 3))
    model = keras.Model(inputs, keras.layers.Conv2D(5, 3, padding="same")(inputs))
    image = np.random.default_rng(0).integers(0, 256, (2, 9, 7, 3), dtype=np.uint8)
    with pytest.warns(UserWarning, match="lacks the layers of an fcn.build_model FCN.*2,000,000"):
        labels = np.asarray(compiled_forward(model, "labels")(image))
    np.testing.assert_array_equal(labels, np.asarray(model(image.astype("float32"))).argmax(-1))
    assert not streams(model)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_is_its_published_topology(variant):
    """The names build_model gives are the ones topology() publishes, and the engine accepts
    the graph (it checks every link of the chain and the branches against it)."""
    model = build_model(variant, weights=None, width=TINY)
    assert topology_of(model) == topology(variant)
    engine = streamed._StreamedFCN(model, topology(variant))
    assert [layer.name for layer in engine.chain] == list(topology(variant).chain)
    names = {layer.name for layer in model.layers}
    assert topology(variant).layer_names() <= names


def test_a_changed_graph_runs_whole_with_a_warning_naming_the_layer():
    """An extra layer between conv3_3 and pool3 (names intact): the engine refuses the graph,
    the warning names the layer and the memory consequence, and the pass is still exact."""
    source = build_model("fcn8s", weights=None, width=TINY)
    config = source.get_config()
    pool3 = next(layer for layer in config["layers"] if layer["name"] == "pool3")
    extra = {
        "module": "keras.layers", "class_name": "Activation", "name": "extra",
        "config": {"name": "extra", "activation": "relu", "dtype": pool3["config"]["dtype"]},
        "build_config": pool3.get("build_config"), "inbound_nodes": pool3["inbound_nodes"],
    }  # fmt: skip
    pool3["inbound_nodes"] = json.loads(
        json.dumps(pool3["inbound_nodes"]).replace('"conv3_3"', '"extra"')
    )
    config["layers"].insert(config["layers"].index(pool3), extra)
    model = keras.Model.from_config(config)
    model.set_weights(randomize(source, seed=4).get_weights())
    image = np.random.default_rng(4).integers(0, 256, (1, 37, 45, 3), dtype=np.uint8)
    with pytest.warns(UserWarning, match="pool3 does not read conv3_3.*2,000,000 pixels"):
        _check(model, image, labels=False)
    assert not streams(model)


MEMORY_SCRIPT = textwrap.dedent("""
    import ctypes, json, os, pathlib, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import numpy as np
    from fcn import build_model
    from fcn.inference.streamed import compiled_forward

    model = build_model("fcn8s", weights=None, width=0.25)  # conv1: 16 channels
    image = np.zeros((1, 1000, 1000, 3), np.uint8)
    if sys.argv[1] == "streamed":
        run = compiled_forward(model, "labels")
        run(image[:, :208, :208])  # above WHOLE_PIXELS: traces the streamed graph
    else:
        run = model.predict_on_batch
        run(image[:, :40, :40])
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    pathlib.Path("/proc/self/clear_refs").write_text("5")  # VmHWM := VmRSS
    start = int(pathlib.Path("/proc/self/statm").read_text().split()[1]) * 4096
    run(image)
    peak = int(pathlib.Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0])
    print(json.dumps((peak * 1024 - start) / 2**20))
""")


def test_streaming_needs_a_fraction_of_the_memory():
    """A quarter-width FCN-8s, one 1000x1000 image, traced first: the growth of the peak RSS of
    a streamed pass is under a third of that of Keras' own forward pass (measured 18 vs 309 MiB
    under oneDNN, 53 vs 602 under Eigen; conv1_2 alone needs 1200 x 1200 x 16 x 4 x 2 bytes =
    176 MiB whole). Each pass runs in its own fresh process, and the model is small: oneDNN
    keeps freed buffers (the initialisers' temporaries, an earlier pass) in a pool of its own,
    which a later pass reuses without growing the RSS."""
    if not (Path("/proc/self/clear_refs").exists() and ctypes.util.find_library("c")):
        pytest.skip("needs Linux /proc (VmHWM reset) and glibc (malloc_trim)")
    growth = {}
    for mode in ("streamed", "whole"):
        result = subprocess.run(
            [sys.executable, "-c", MEMORY_SCRIPT, mode], capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr[-3000:]
        growth[mode] = json.loads(result.stdout.strip().splitlines()[-1])
    assert growth["whole"] > 176, growth
    assert growth["streamed"] < growth["whole"] / 3, growth
