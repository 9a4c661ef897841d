"""A LiteRT file run back by fcn: its size, output and classes read from the file; windows of its
size that give whole-image labels wherever the margin rule holds; fcn.predict, fcn.evaluate
and the command line taking a .tflite file as they take a Keras model."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import network_tolerance, whole_logits

import fcn
from fcn.cli import main
from fcn.data import sample_voc_root, voc_pairs
from fcn.data.decode import read_label
from fcn.inference.litert import LiteRTModel
from fcn.inference.tiling import DEFAULT_MARGIN, plan_windows

pytestmark = pytest.mark.xdist_group("litert")  # one worker exports the module's files once

SIZE = (544, 544)
"""The export size: the least multiple of 32 that keeps a 96-pixel core inside the 224-pixel
margin that tiling needs for whole-image logits (``test_tiling.py``)."""

MARGIN = 224


@pytest.fixture(scope="module")
def exported(tiny_fcn8s, tmp_path_factory):
    """The tiny FCN-8s as float32 LiteRT files of SIZE: labels and logits."""
    folder = tmp_path_factory.mktemp("litert")
    return {
        output: LiteRTModel(
            fcn.export_model(
                tiny_fcn8s, folder / f"{output}.tflite", "litert", size=SIZE, output=output
            )
        )
        for output in ("labels", "logits")
    }


def test_the_file_says_its_size_output_and_classes(exported, tiny_fcn8s):
    for output, model in exported.items():
        assert (model.size, model.output) == (SIZE, output)
        assert model.num_classes == tiny_fcn8s.output_shape[-1] == 21


def test_windows_give_whole_image_labels_where_the_margin_rule_holds(exported, tiny_fcn8s):
    """An image of several windows per axis: every kept pixel at least MARGIN from the image's
    bottom and right edges (where a window is filled with the mean colour beyond the image)
    gets the Keras model's whole-image class wherever that class is clear of rounding ties;
    pixels nearer those edges are left out (see fcn.inference.tiling)."""
    image = np.random.default_rng(3).integers(0, 256, (640, 600, 3), dtype=np.uint8)
    assert len(plan_windows(*image.shape[:2], SIZE, MARGIN)) > 4
    logits, clear = whole_logits(tiny_fcn8s, image)
    labels = np.full(image.shape[:2], 255, np.uint8)
    for region, part in exported["labels"].predict_tiled(image, MARGIN):
        labels[region] = part
    inside = np.zeros(image.shape[:2], bool)
    inside[: -MARGIN, : -MARGIN] = True
    checked = inside & clear
    assert checked.mean() > 0.2
    np.testing.assert_array_equal(labels[checked], logits.argmax(-1)[checked])


def test_an_image_of_the_export_size_gives_the_keras_logits(exported, tiny_fcn8s):
    image = np.random.default_rng(4).integers(0, 256, (*SIZE, 3), dtype=np.uint8)
    logits, clear = whole_logits(tiny_fcn8s, image)
    ((region, got),) = exported["logits"].predict_tiled(image, MARGIN, "logits")
    tolerance = network_tolerance(tiny_fcn8s, np.abs(logits).max())
    np.testing.assert_allclose(got, logits, rtol=0, atol=tolerance)
    labels = fcn.predict(image, exported["logits"])  # the argmax of a logits file
    assert clear.mean() > 0.9
    np.testing.assert_array_equal(labels[clear], logits.argmax(-1)[clear])
    probe, probabilities = fcn.predict_proba(image, exported["logits"])
    np.testing.assert_array_equal(probe, labels)
    np.testing.assert_allclose(probabilities.sum(-1), 1, atol=1e-5)


def test_predict_takes_a_path_and_refuses_what_a_file_cannot_do(exported):
    image = np.zeros((50, 70, 3), np.uint8)
    path = exported["labels"].path
    assert fcn.predict(image, str(path)).shape == (50, 70)
    with pytest.raises(ValueError, match="returns labels, not the logits asked for"):
        fcn.predict_proba(image, path)
    for kwargs in ({"precision": "float32"}, {"max_pixels": 10_000}):
        with pytest.raises(ValueError, match="leave precision at 'auto' and max_pixels unset"):
            fcn.predict(image, path, **kwargs)
    with pytest.raises(FileNotFoundError, match="missing.tflite: LiteRT file not found"):
        fcn.predict(image, path.parent / "missing.tflite")


def test_evaluate_scores_a_file_on_every_labelled_pixel(exported):
    """fcn.evaluate of a .tflite path over the sample's val split: every image and every
    non-void pixel counted (read from the label files here), once."""
    result = fcn.evaluate(exported["labels"].path, sample_voc_root(), "val")
    files = voc_pairs(sample_voc_root(), "val")
    pixels = sum(int((read_label(path) != 255).sum()) for path in files.labels)
    assert result.num_images == len(files.labels) == 8
    assert int(result.confusion.sum()) == pixels
    assert result.confusion.shape == (21, 21)


def test_the_command_line_predicts_and_evaluates_with_a_file(exported, tmp_path, capsys):
    path = str(exported["labels"].path)
    assert main(["evaluate", path, str(sample_voc_root())]) == 0
    assert "8 images" in capsys.readouterr().out  # the sample's val split
    image = voc_pairs(sample_voc_root(), "val").images[0]
    assert main(["predict", image, "--model", path, "--out", str(tmp_path / "out")]) == 0
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert len(written) == 2 and written[0].endswith(".png")
    assert main(["predict", image, "--model", path, "--precision", "bfloat16",
                 "--out", str(tmp_path / "again")]) == 2  # fmt: skip
    assert "leave precision at 'auto'" in capsys.readouterr().err


def test_the_default_margin_needs_a_large_enough_export():
    """An export smaller than a 32-pixel core with the default margins cannot tile a larger
    image: refused, naming the least side; one that fits the image needs no margin."""
    with pytest.raises(ValueError, match=f"at least {32 + 2 * DEFAULT_MARGIN} pixels"):
        plan_windows(600, 400, (512, 512), DEFAULT_MARGIN)
    assert len(plan_windows(500, 375, (512, 512), DEFAULT_MARGIN)) == 1
