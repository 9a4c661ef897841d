"""fcn.predict: every input type, original resolution, EXIF, tiling, model lookup, streaming."""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import shutil
import socket

import keras
import numpy as np
import pytest
from conftest import clear_of_ties, network_tolerance, randomize, sum_tolerance, whole_logits
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from PIL import Image
from test_data_download import Server

import fcn
from fcn import presets
from fcn.caffe import convert_caffe
from fcn.data import DataError, read_image, read_pair, write_label
from fcn.inference import model_files
from fcn.inference.model_files import DEFAULT_MODEL_FILE
from fcn.presets import PRESETS
from fcn.testing import caffe_layers, write_caffemodel

RNG = np.random.default_rng(0)


@pytest.fixture(scope="module")
def model_file(tiny_fcn8s, tmp_path_factory):
    path = tmp_path_factory.mktemp("weights") / DEFAULT_MODEL_FILE
    tiny_fcn8s.save(path)
    return path


def test_every_input_type_keeps_its_exact_size(tiny_fcn8s, tmp_path):
    array = RNG.integers(0, 256, (37, 53, 3)).astype(np.uint8)
    Image.fromarray(array).save(tmp_path / "a.png")
    Image.fromarray(array).save(tmp_path / "a.jpg")
    inputs = {
        "array": array,
        "png path": tmp_path / "a.png",
        "jpeg path (str)": str(tmp_path / "a.jpg"),
        "PIL": Image.fromarray(array),
        "grayscale array": array[..., 0],
        "RGBA PIL": Image.fromarray(np.dstack([array, np.full((37, 53), 255, np.uint8)])),
        "palette PIL": Image.fromarray(array).convert("P"),
        "CMYK PIL": Image.fromarray(array).convert("CMYK"),
    }
    reference = fcn.predict(array, tiny_fcn8s)
    for name, image in inputs.items():
        labels = fcn.predict(image, tiny_fcn8s)
        assert labels.shape == (37, 53) and labels.dtype == np.uint8, name
    np.testing.assert_array_equal(fcn.predict(inputs["png path"], tiny_fcn8s), reference)
    np.testing.assert_array_equal(fcn.predict(inputs["RGBA PIL"], tiny_fcn8s), reference)
    many = fcn.predict([array, array[:20, :31]], tiny_fcn8s)
    assert [m.shape for m in many] == [(37, 53), (20, 31)]
    assert len(np.unique(reference)) > 1  # a real prediction, not a constant map


def test_predict_returns_labels_and_predict_proba_labels_with_probabilities(tiny_fcn8s):
    """One return type each: ``predict`` a label map (a list of them for a list),
    ``predict_proba`` (labels, probabilities) of one image; ``probabilities=`` is gone."""
    image = RNG.integers(0, 256, (23, 41, 3)).astype(np.uint8)
    labels = fcn.predict(image, tiny_fcn8s, precision="float32")
    assert isinstance(labels, np.ndarray) and labels.shape == (23, 41)
    proba_labels, probs = fcn.predict_proba(image, tiny_fcn8s, precision="float32")
    np.testing.assert_array_equal(proba_labels, labels)
    assert probs.shape == (23, 41, 21) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(-1), 1.0, rtol=0, atol=1e-5)
    np.testing.assert_array_equal(probs.argmax(-1), labels)
    with pytest.raises(TypeError, match="probabilities"):
        fcn.predict(image, tiny_fcn8s, probabilities=True)


def test_read_image_converts_modes_and_rejects_bad_arrays(tmp_path):
    gray = RNG.integers(0, 256, (5, 7)).astype(np.uint8)
    np.testing.assert_array_equal(read_image(gray), np.dstack([gray] * 3))
    np.testing.assert_array_equal(read_image(Image.fromarray(gray)), np.dstack([gray] * 3))
    assert read_image(np.zeros((4, 4, 3), np.float32) + 12.0).dtype == np.uint8
    shapes = r"\(H, W\), \(H, W, 1\), \(H, W, 3\) or \(H, W, 4\), got \(4, 4, 2\)$"
    with pytest.raises(ValueError, match=shapes):
        read_image(np.zeros((4, 4, 2), np.uint8))
    with pytest.raises(ValueError, match="0..255"):
        read_image(np.full((4, 4, 3), 300.0))
    (tmp_path / "broken.jpg").write_bytes(b"\xff\xd8 not really a jpeg")
    with pytest.raises(DataError, match="broken.jpg: cannot decode image"):
        read_image(tmp_path / "broken.jpg")


def test_exif_orientation_is_honoured(tiny_fcn8s, tmp_path):
    """Orientation 6: stored landscape, shown turned 90 degrees clockwise. A lossless PNG, so
    the upright pixels are exactly the clockwise turn (a counter-clockwise one, the usual
    mistake, differs) and the prediction is that of the turned array."""
    array = RNG.integers(0, 256, (30, 50, 3)).astype(np.uint8)
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(array).save(tmp_path / "rotated.png", exif=exif)
    upright = np.rot90(array, -1)
    np.testing.assert_array_equal(read_image(tmp_path / "rotated.png"), upright)
    assert not np.array_equal(np.rot90(array, 1), upright)
    labels = fcn.predict(tmp_path / "rotated.png", tiny_fcn8s)
    np.testing.assert_array_equal(labels, fcn.predict(upright, tiny_fcn8s))
    assert not np.array_equal(labels, fcn.predict(np.rot90(array, 1), tiny_fcn8s))
    # Training reads pairs with the same reader: an upright label drawn on the shown photo
    # fits it (50x30 stored, 30x50 shown), and a label with the same EXIF tag turns with it.
    write_label(tmp_path / "upright.png", (upright[..., 0] % 21).astype(np.uint8))
    image, label = read_pair(tmp_path / "rotated.png", tmp_path / "upright.png")
    np.testing.assert_array_equal(image, upright)
    write_label(tmp_path / "stored.png", (array[..., 0] % 21).astype(np.uint8))
    with Image.open(tmp_path / "stored.png") as stored:
        stored.save(tmp_path / "tagged.png", exif=exif)
    turned = read_pair(tmp_path / "rotated.png", tmp_path / "tagged.png")[1]
    np.testing.assert_array_equal(turned, label)


def test_an_image_without_pixels_is_refused(tiny_fcn8s):
    for empty in (np.zeros((0, 601, 3), np.uint8), Image.new("RGB", (5, 0))):
        with pytest.raises(ValueError, match="at least one pixel"):
            fcn.predict(empty, tiny_fcn8s)


def test_more_than_256_classes_keep_their_indices():
    model = randomize(fcn.build_model("fcn8s", 300, weights=None, width=1 / 16), seed=8)
    image = RNG.integers(0, 256, (40, 30, 3)).astype(np.uint8)
    labels = fcn.predict(image, model, precision="float32")
    assert labels.dtype == np.int32 and labels.max() > 255
    logits, clear = whole_logits(model, image)
    np.testing.assert_array_equal(labels[clear], logits.argmax(-1)[clear])


def test_tiled_prediction_equals_whole_image(tiny_fcn8s):
    image = RNG.integers(0, 256, (150, 700, 3)).astype(np.uint8)
    whole, p_whole = fcn.predict_proba(image, tiny_fcn8s, precision="float32")
    budget = 150 * (64 + 2 * 256)  # forces tiles of 64-pixel cores with 256-pixel margins
    tiled, p_tiled = fcn.predict_proba(image, tiny_fcn8s, max_pixels=budget, precision="float32")
    assert p_whole.shape == (150, 700, 21)
    np.testing.assert_allclose(p_whole.sum(-1), 1.0, rtol=0, atol=sum_tolerance(21, 1.0))
    logits = np.asarray(tiny_fcn8s(image[None].astype("float32"), training=False)[0])
    tolerance = network_tolerance(tiny_fcn8s, np.abs(logits).max())
    # A softmax moves by at most half the largest change of its logits.
    np.testing.assert_allclose(p_tiled, p_whole, rtol=0, atol=tolerance)
    clear = clear_of_ties(logits, tolerance)
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(tiled[clear], whole[clear])
    np.testing.assert_array_equal(whole[clear], logits.argmax(-1)[clear])


def test_default_model_comes_from_weights_with_checksum(model_file, monkeypatch, tmp_path):
    monkeypatch.setenv("FCN_WEIGHTS_DIR", str(model_file.parent))
    monkeypatch.chdir(tmp_path)
    image = RNG.integers(0, 256, (40, 40, 3)).astype(np.uint8)
    labels = fcn.predict(image)
    assert labels.shape == (40, 40)
    digest = hashlib.sha256(model_file.read_bytes()).hexdigest()
    sums = model_file.parent / "SHA256SUMS"
    sums.write_text(f"{digest}  {DEFAULT_MODEL_FILE}\n")
    np.testing.assert_array_equal(fcn.predict(image), labels)
    sums.write_text(f"{'0' * 64}  {DEFAULT_MODEL_FILE}\n")
    with pytest.raises(ValueError, match="SHA-256 differs"):
        fcn.predict(image)
    sums.unlink()


def test_default_model_is_looked_for_beside_the_user_never_in_the_package(
    model_file, monkeypatch, tmp_path
):
    """$FCN_WEIGHTS_DIR, ./weights, then Keras' per-user cache: an installed package's
    site-packages folder is not among them, and a model in the cache is found."""
    monkeypatch.delenv("FCN_WEIGHTS_DIR", raising=False)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.chdir(tmp_path)
    cache = tmp_path / "keras" / "models" / "fcn"
    assert presets.weights_dirs() == [tmp_path / "weights", cache]
    cache.mkdir(parents=True)
    shutil.copy(model_file, cache / DEFAULT_MODEL_FILE)
    image = RNG.integers(0, 256, (24, 24, 3)).astype(np.uint8)
    np.testing.assert_array_equal(fcn.predict(image), fcn.predict(image, model_file))


def test_the_papers_model_by_name_downloads_once_converts_and_caches(monkeypatch, tmp_path):
    """fcn8s-voc from a server on 127.0.0.1 (a width-1/16 FCN-8s written as the paper's file):
    the first default prediction downloads (MD5-checked) and converts, later ones and
    load_model by name use the cached .keras; a wrong MD5 keeps nothing."""
    source = randomize(fcn.build_model("fcn8s", weights=None, width=1 / 16), seed=9)
    served = tmp_path / "served.caffemodel"
    write_caffemodel(served, caffe_layers(source))
    data = served.read_bytes()
    name = presets.PRESETS["fcn8s-voc"].caffemodel
    known = dataclasses.replace(presets.PRESETS["fcn8s-voc"], md5=hashlib.md5(data).hexdigest())
    monkeypatch.setitem(presets.PRESETS, "fcn8s-voc", known)
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.delenv("FCN_WEIGHTS_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    image = RNG.integers(0, 256, (30, 41, 3)).astype(np.uint8)
    with Server({name: data}) as server:
        monkeypatch.setenv("FCN_MODELS_URL", server.url(""))
        labels = fcn.predict(image)
        assert len(server.requests) == 1
        cached = tmp_path / "keras" / "models" / "fcn" / "fcn8s-voc.keras"
        assert cached.exists() and (tmp_path / "keras" / "models" / name).exists()
        assert [p.name for p in cached.parent.iterdir()] == [cached.name]  # written whole
        np.testing.assert_array_equal(fcn.predict(image), labels)
        np.testing.assert_array_equal(fcn.predict(image, "fcn8s-voc"), labels)
        assert len(server.requests) == 1  # converted once, cached
        np.testing.assert_array_equal(labels, fcn.predict(image, convert_caffe(served)))

        shutil.rmtree(tmp_path / "keras")
        wrong = dataclasses.replace(known, md5="0" * 32)
        monkeypatch.setitem(presets.PRESETS, "fcn8s-voc", wrong)
        with pytest.raises(model_files.ModelUnavailableError, match="MD5"):
            fcn.load_model("fcn8s-voc")
        assert not list((tmp_path / "keras" / "models").glob("*.caffemodel"))


def test_offline_the_error_names_the_file_the_address_and_the_way_by_hand(monkeypatch, tmp_path):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setenv("FCN_WEIGHTS_DIR", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("FCN_MODELS_URL", f"http://127.0.0.1:{closed}/")
    with pytest.raises(model_files.ModelUnavailableError) as error:
        fcn.predict(np.zeros((8, 8, 3), np.uint8))
    message = str(error.value)
    assert f"http://127.0.0.1:{closed}/fcn8s-heavy-pascal.caffemodel" in message
    assert "fcn convert fcn8s-heavy-pascal.caffemodel --variant fcn8s --out" in message
    for path in (tmp_path / "nope.keras", "runs/fcn8s/best.keras", "fcn8s.keras"):  # no names
        with pytest.raises(FileNotFoundError, match=rf"^{path}: model file not found$"):
            fcn.predict(np.zeros((8, 8, 3), np.uint8), model=path)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(sorted(PRESETS)), st.integers(0, 20), st.sampled_from("0123456789xz-"),
       st.booleans())  # fmt: skip
def test_a_mistyped_model_name_lists_the_presets_and_suggests_the_closest(name, at, typo, upper):
    """One character of a known name replaced (in any case): neither a file nor a preset; the
    error says both, lists every preset and suggests one a single edit away, case aside (as
    the name it came from is), by edit distance counted here."""
    at = at % len(name)
    mistyped = name[:at] + typo + name[at + 1 :]
    mistyped = mistyped.upper() if upper else mistyped
    assume(mistyped not in PRESETS)
    with pytest.raises(FileNotFoundError) as error:
        fcn.load_model(mistyped)
    message = str(error.value)
    assert message.startswith(f"{mistyped}: no such model file, and no known model has")
    assert all(known in message for known in PRESETS)
    assert message.endswith("fcn models describes them)")
    suggested = message.split("did you mean ")[1].split("?")[0]
    assert suggested in PRESETS and _edit_distance(mistyped.lower(), suggested) == 1


def _edit_distance(a: str, b: str) -> int:
    """Levenshtein's distance: insertions, deletions and substitutions."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (x != y))
    return row[-1]


def test_predict_files_streams_a_folder(model_file, tmp_path):
    for i in range(5):
        size = (20 + i, 30 + 2 * i, 3)
        Image.fromarray(RNG.integers(0, 256, size).astype(np.uint8)).save(tmp_path / f"{i}.png")
    (tmp_path / "notes.txt").write_text("not an image")
    stream = fcn.predict_files(tmp_path, model_file)
    assert inspect.isgenerator(stream)
    results = list(stream)
    assert [p.name for p, _ in results] == [f"{i}.png" for i in range(5)]
    assert [labels.shape for _, labels in results] == [(20 + i, 30 + 2 * i) for i in range(5)]
    (tmp_path / "5.png").write_bytes(b"")
    with pytest.raises(DataError, match="5.png: empty file"):
        list(fcn.predict_files(tmp_path, model_file))


def test_an_epoch_checkpoint_loads_for_inference_in_a_fresh_process(tiny_fcn8s, tmp_path):
    """A training checkpoint holds its optimizer (fcn's CaffeSGD, of the training wing): a
    process that never imported training loads the model from it all the same."""
    import subprocess
    import sys

    from fcn.training.optimizer import CaffeSGD

    model = keras.models.clone_model(tiny_fcn8s)
    model.set_weights(tiny_fcn8s.get_weights())
    model.compile(CaffeSGD(learning_rate=1e-3, momentum=0.9), "mse")
    model.save(tmp_path / "epoch-0001.keras")
    path = str(tmp_path / "epoch-0001.keras")
    code = (f"import fcn; m = fcn.load_model({path!r}); "
            "print(m.count_params(), getattr(m, 'optimizer', None))")  # fmt: skip
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == [str(tiny_fcn8s.count_params()), "None"]
