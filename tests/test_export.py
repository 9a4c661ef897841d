"""fcn.export_model / ``fcn export``: SavedModel, LiteRT and ONNX files that give the Keras
model's labels and logits, read back by their own runtimes (TensorFlow without Keras, the
LiteRT interpreter, ONNX Runtime)."""

from __future__ import annotations

import dataclasses

import keras
import numpy as np
import onnx
import onnxruntime
import pytest
import tensorflow as tf
from ai_edge_litert.interpreter import Interpreter
from conftest import LAMBDA, clear_of_ties, network_tolerance
from PIL import Image

import fcn
from fcn.cli import main
from fcn.inference import export

RNG = np.random.default_rng(0)
SIZES = [(37, 53), (64, 96)]
"""Two image sizes (H, W) that the size-free exports must both take: one odd, one even."""


def _images(height: int, width: int, batch: int = 2) -> np.ndarray:
    return RNG.integers(0, 256, (batch, height, width, 3), dtype=np.uint8)


def _check(model: keras.Model, images: np.ndarray, out: dict, output: str) -> None:
    """``out[output]`` is ``model``'s logits within their rounding tolerance, or its labels on
    every pixel whose class is clear of near-ties (and nearly every pixel is)."""
    whole = np.asarray(model(images.astype("float32"), training=False))
    tolerance = network_tolerance(model, np.abs(whole).max())
    got = np.asarray(out[output])
    assert list(out) == [output]
    if output == "logits":
        assert got.dtype == np.float32 and got.shape == whole.shape
        np.testing.assert_allclose(got, whole, rtol=0, atol=tolerance)
        return
    clear = clear_of_ties(whole, tolerance)
    assert got.dtype == np.uint8 and got.shape == whole.shape[:3] and clear.mean() > 0.9
    np.testing.assert_array_equal(got[clear], whole.argmax(-1)[clear])


@pytest.mark.parametrize("output", export.OUTPUTS)
def test_saved_model_takes_uint8_images_of_any_size(tiny_fcn8s, tmp_path, output):
    path = fcn.export_model(tiny_fcn8s, tmp_path / "fcn8s", "saved_model", output=output)
    loaded = tf.saved_model.load(str(path))
    served = loaded.signatures["serving_default"]
    assert served.structured_input_signature[1]["image"].dtype == tf.uint8
    for height, width in SIZES:
        images = _images(height, width)
        _check(tiny_fcn8s, images, served(image=tf.constant(images)), output)
    # each weight stored once (Model.export stores each twice: keras-team/keras#23553)
    stored = tf.train.load_checkpoint(str(path / "variables" / "variables"))
    shapes = stored.get_variable_to_shape_map()
    stored_values = sum(np.prod(shape) for name, shape in shapes.items() if "VALUE" in name)
    assert stored_values == tiny_fcn8s.count_params()
    assert len(loaded.weights) == len(tiny_fcn8s.weights)


def test_litert_file_at_its_fixed_size(tiny_fcn8s, tmp_path):
    height, width = SIZES[1]
    path = fcn.export_model(tiny_fcn8s, tmp_path / "fcn8s.tflite", "litert", size=(height, width))
    interpreter = Interpreter(model_path=str(path))
    (detail,) = interpreter.get_input_details()
    assert tuple(detail["shape"]) == (1, height, width, 3) and detail["dtype"] == np.uint8
    run = interpreter.get_signature_runner()
    for _ in range(2):
        images = _images(height, width, batch=1)
        _check(tiny_fcn8s, images, run(image=images), "labels")


@pytest.mark.parametrize("output", export.OUTPUTS)
def test_onnx_file_takes_any_size(tiny_fcn8s, tmp_path, output):
    path = fcn.export_model(tiny_fcn8s, tmp_path / "fcn8s.onnx", "onnx", output=output)
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["image"]
    for height, width in SIZES:
        images = _images(height, width)
        (result,) = session.run([output], {"image": images})
        _check(tiny_fcn8s, images, {output: result}, output)
    # the weights are the file's initializers, each once (converted as inputs, then stored)
    graph = onnx.load(str(path)).graph
    stored = [np.prod(t.dims) for t in graph.initializer if t.name.startswith("weight_")]
    assert sum(stored) == tiny_fcn8s.count_params() and len(stored) == len(tiny_fcn8s.weights)


def test_a_fixed_size_saved_model_refuses_other_sizes(tiny_fcn8s, tmp_path):
    path = fcn.export_model(tiny_fcn8s, tmp_path / "fixed", size=SIZES[0])
    loaded = tf.saved_model.load(str(path))
    signature = loaded.signatures["serving_default"].structured_input_signature[1]
    assert signature["image"].shape.as_list() == [None, *SIZES[0], 3]
    images = _images(*SIZES[0])
    _check(tiny_fcn8s, images, loaded.serve(tf.constant(images)), "labels")
    with pytest.raises(TypeError, match="Can not cast TensorSpec"):  # the function checks
        loaded.serve(tf.constant(_images(*SIZES[1])))


def test_an_export_replaces_the_old_one_only_when_complete(tiny_fcn8s, tmp_path, monkeypatch):
    path = fcn.export_model(tiny_fcn8s, tmp_path / "fcn8s")
    written = {p.relative_to(path): p.stat().st_mtime_ns for p in path.rglob("*")}

    def fail_halfway(served, spec, folder, calibration):
        folder.mkdir()
        (folder / "saved_model.pb").write_bytes(b"partial")
        raise OSError("disk full")

    with monkeypatch.context() as patch:
        failing = dataclasses.replace(export.FORMATS["saved_model"], write=fail_halfway)
        patch.setitem(export.FORMATS, "saved_model", failing)
        with pytest.raises(OSError, match="disk full"):
            fcn.export_model(tiny_fcn8s, path)
    assert {p.relative_to(path): p.stat().st_mtime_ns for p in path.rglob("*")} == written
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fcn8s"]  # no leftovers

    fcn.export_model(tiny_fcn8s, path, output="logits")  # a complete one replaces it
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    assert list(served.structured_outputs) == ["logits"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fcn8s"]


def test_an_export_that_would_not_fit_in_memory_is_refused_before_it_starts(
    tiny_fcn8s, tmp_path, monkeypatch
):
    weights = sum(w.numpy().nbytes for w in tiny_fcn8s.weights)
    need = export.FORMATS["onnx"].memory * weights
    monkeypatch.setattr(export, "available_host_memory", lambda: int(need) - 1)
    factor = f"{export.FORMATS['onnx'].memory:g}x"
    with pytest.raises(fcn.OutOfMemoryError, match=f"{need / 2**30:.1f} GiB of memory, {factor}"):
        fcn.export_model(tiny_fcn8s, tmp_path / "fcn8s.onnx", "onnx")
    assert not list(tmp_path.iterdir())
    monkeypatch.setattr(export, "available_host_memory", lambda: int(need) + 1)
    export._check_memory(tiny_fcn8s, "onnx")  # just enough: no refusal


def test_more_than_256_classes_export_int32_labels():
    scores = keras.Sequential([keras.Input((None, None, 3)), keras.layers.Conv2D(300, 1)])
    scores.layers[-1].bias.assign(np.linspace(0, 300, 300, dtype="float32"))  # classes > 255 win
    images = _images(32, 32, batch=1)
    labels = np.asarray(export.serving_model(scores)(images)["labels"])
    expected = np.argmax(scores(images.astype("float32")), -1)  # the same convolution
    assert labels.dtype == np.int32 and labels.max() > 255
    np.testing.assert_array_equal(labels, expected)


def test_cli_export_and_its_one_line_errors(tiny_fcn8s, tmp_path, capsys):
    model_file = tmp_path / "model.keras"
    tiny_fcn8s.save(model_file)
    out = tmp_path / "fcn8s.tflite"
    folder = tmp_path / "fixed"
    assert main(["export", str(model_file), "--size", "32", "40", "--out", str(folder)]) == 0
    assert f"-> {folder} (saved_model: uint8 image N x 32 x 40 x 3 -> labels)" in (
        capsys.readouterr().out
    )  # fmt: skip
    signature = tf.saved_model.load(str(folder)).signatures["serving_default"]
    assert signature.structured_input_signature[1]["image"].shape.as_list() == [None, 32, 40, 3]
    for args, message in [
        (["--format", "litert", "--out", str(out)], "fixed image size: pass size=(H, W)"),
        (["--format", "litert", "--size", "32", "40", "--out", str(tmp_path / "a.lite")],
         "a.lite: a litert file's name must end in .tflite"),
        (["--size", "0", "40", "--out", str(tmp_path / "b")], "both positive: got (0, 40)"),
    ]:  # fmt: skip
        assert main(["export", str(model_file), *args]) == 2
        assert message in capsys.readouterr().err
    assert main(["export", str(tmp_path / "missing.keras"), "--out", str(tmp_path / "c")]) == 2
    assert "missing.keras" in capsys.readouterr().err


def _calibration_folder(folder, images: np.ndarray):
    folder.mkdir()
    for i, image in enumerate(images):
        Image.fromarray(image).save(folder / f"{i}.png")
    return folder


def int8_tolerance(magnitude: float, layers: int) -> float:
    """How far an int8 file's logits may be from the float model's, for logits of largest
    absolute value ``magnitude`` through ``layers`` quantised layers: each rounds its
    activations (and its weights, per channel) to 1/255 of their calibrated range, an error of
    standard deviation range / (255 sqrt(12)) per value, which layers that keep their inputs'
    scale pass on at the same relative size, so variances add (as in network_tolerance); the
    logits' range is 2 ``magnitude``; LAMBDA (6) standard deviations of that sum."""
    per_rounding = 2 * magnitude / (255 * np.sqrt(12))
    return float(LAMBDA * np.sqrt(2 * layers) * per_rounding)


COMPUTING = {"CONV_2D", "TRANSPOSE_CONV", "MAX_POOL_2D", "ADD"}
"""The LiteRT ops of an FCN that compute (the rest move or cast values)."""


def _quantised_layers(model: keras.Model) -> int:
    convolutions = (keras.layers.Conv2D, keras.layers.Conv2DTranspose)
    return sum(isinstance(layer, convolutions) for layer in model.layers)


@pytest.mark.parametrize("format", ["litert", "onnx"])
def test_an_int8_file_is_int8_and_gives_the_float_labels_clear_of_its_rounding(
    tiny_fcn8s, tmp_path, format
):
    """Calibrated on the images it then labels: it computes in int8 (LiteRT: every operand of
    every convolution, pooling and addition; ONNX: quantise/dequantise pairs) in under 35% of
    the float file, and its labels are the float model's on at least 99% of the pixels where
    the float logits' top two classes are further apart than twice int8_tolerance (a fifth of
    this random model's pixels): unlike float rounding, int8 rounding has no per-value bound
    (a tensor's scale follows its calibrated range), so a few such pixels may still flip."""
    height, width = SIZES[1]
    images = _images(height, width, batch=3)
    calibration = _calibration_folder(tmp_path / "calibration", images)
    suffix = export.FORMATS[format].suffix
    floating = fcn.export_model(tiny_fcn8s, tmp_path / f"f{suffix}", format, size=(height, width))
    path = fcn.export_model(
        tiny_fcn8s, tmp_path / f"q{suffix}", format, size=(height, width), quantize="int8",
        calibration=calibration,
    )  # fmt: skip
    assert path.stat().st_size < 0.35 * floating.stat().st_size
    if format == "litert":
        interpreter = Interpreter(model_path=str(path))
        computing = [op for op in interpreter._get_ops_details() if op["op_name"] in COMPUTING]
        assert {op["op_name"] for op in computing} == COMPUTING
        tensor = interpreter._get_tensor_details
        for op in computing:  # every operand int8 (int32: biases, shapes)
            dtypes = {tensor(i, 0)["dtype"] for i in op["inputs"] if i >= 0}
            assert dtypes <= {np.int8, np.int32}, (op["op_name"], dtypes)
        run = interpreter.get_signature_runner()
        labels = np.concatenate([run(image=image[None])["labels"] for image in images])
    else:
        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        types = {node.op_type for node in onnx.load(str(path)).graph.node}
        assert {"QuantizeLinear", "DequantizeLinear"} <= types
        (labels,) = session.run(["labels"], {"image": images})
    whole = np.asarray(tiny_fcn8s(images.astype("float32"), training=False))
    tolerance = int8_tolerance(np.abs(whole).max(), _quantised_layers(tiny_fcn8s))
    clear = clear_of_ties(whole, tolerance)
    assert clear.mean() > 0.1  # a random model's logits are near-ties on most pixels
    agree = (labels[clear] == whole.argmax(-1)[clear]).mean()
    assert agree >= 0.99, agree  # measured: 3 of 3,170 differ in the LiteRT file


def test_int8_combinations_that_make_no_sense_are_refused_by_name(tiny_fcn8s, tmp_path):
    calibration = _calibration_folder(tmp_path / "calibration", _images(32, 32, batch=1))
    litert = {"format": "litert", "size": (32, 32)}
    for path, kwargs, message in [
        ("a", {"quantize": "int8", "calibration": calibration},
         "a saved_model runs TensorFlow's float kernels"),
        ("b.tflite", {**litert, "quantize": "int8", "calibration": calibration,
                      "precision": "bfloat16"}, "precision='bfloat16' with it makes no sense"),
        ("c.onnx", {"format": "onnx", "quantize": "int8", "calibration": calibration,
                    "precision": "auto"}, "precision='auto' with it makes no sense"),
        ("d.tflite", {**litert, "quantize": "int8"}, "needs calibration images"),
        ("e.tflite", {**litert, "calibration": calibration}, "are for quantize='int8'"),
        ("f.tflite", {**litert, "calibration_images": 5}, "are for quantize='int8'"),
        ("g.tflite", {**litert, "quantize": "int4", "calibration": calibration},
         "unknown quantize 'int4'; choose one of int8"),
        ("h.tflite", {**litert, "quantize": "int8", "calibration": tmp_path / "none"},
         "none: no such image file"),
    ]:  # fmt: skip
        with pytest.raises((ValueError, FileNotFoundError), match=message):
            fcn.export_model(tiny_fcn8s, tmp_path / path, **kwargs)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["calibration"]  # nothing written


def test_cli_writes_an_int8_litert_file(tiny_fcn8s, tmp_path, capsys):
    model_file = tmp_path / "model.keras"
    tiny_fcn8s.save(model_file)
    out = tmp_path / "q.tflite"
    args = ["export", str(model_file), "--format", "litert", "--size", "64", "64", "--out",
            str(out), "--quantize", "int8", "--calibration", str(fcn.data.sample_voc_root()),
            "--calibration-images", "2"]  # fmt: skip
    assert main(args) == 0
    assert f"-> {out} (int8 litert: uint8 image 1 x 64 x 64 x 3 -> labels)" in (
        capsys.readouterr().out
    )  # fmt: skip
    assert main([*args[:-6], "--calibration-images", "2"]) == 2  # without --quantize
    assert "are for quantize='int8'" in capsys.readouterr().err
