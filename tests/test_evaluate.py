"""Streaming evaluation: equal to the reference on whole images, unchanged by chunking."""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_confusion_of, void_near_ties
from test_metrics import reference

from fcn.classes import IGNORE_LABEL, NUM_CLASSES, VOC_CLASSES
from fcn.data import SAMPLE_DIR, eval_dataset, voc_pairs
from fcn.inference.evaluate import EvaluationCallback, _batches, evaluate

SAMPLE = SAMPLE_DIR  # the real VOC sample shipped with the package
SIZES = [(40, 56), (40, 56), (33, 47), (40, 56), (64, 32), (33, 47), (40, 56), (48, 640)]
"""Repeated sizes batch together; 48x640 is tiled when max_pixels < 30,720."""


def pairs(seed: int = 0):
    rng = np.random.default_rng(seed)
    out = []
    for h, w in SIZES:
        label = rng.integers(0, NUM_CLASSES, (h, w)).astype(np.uint8)
        label[rng.random((h, w)) < 0.1] = IGNORE_LABEL
        out.append((rng.integers(0, 256, (h, w, 3), dtype=np.uint8), label))
    out[2][1][:] = IGNORE_LABEL  # an all-void image
    out[4][1][:] = 7  # a single-class image
    return out


def whole_image_reference(model, data):
    labels, predictions = [], []
    for image, label in data:
        labels.append(label.ravel())
        predictions.append(np.argmax(model(image[None], training=False)[0], -1).ravel())
    return reference(np.concatenate(labels), np.concatenate(predictions), NUM_CLASSES)


def test_evaluate_equals_reference_on_whole_images(tiny_fcn8s):
    """With the model's near-ties void, exactly score.py on Keras' own per-image passes."""
    data = void_near_ties(tiny_fcn8s, pairs())
    hist, (acc, acc_cls, mean_iu, fwavacc, iu, _) = whole_image_reference(tiny_fcn8s, data)
    result = evaluate(tiny_fcn8s, data, precision="float32")
    assert result.confusion.dtype == np.int64
    np.testing.assert_array_equal(result.confusion, hist)
    assert result.num_images == len(data)
    assert result.num_pixels == sum((label < NUM_CLASSES).sum() for _, label in data)
    assert result.num_pixels > 0.8 * sum(label.size for _, label in pairs())
    # The same exact counts; the scores are float64 sums of at most C terms in 0..1, which
    # ConfusionMatrix and score.py's numpy add in different orders.
    bound = NUM_CLASSES * np.finfo(np.float64).eps
    got = (result.pixel_accuracy, result.mean_accuracy, result.mean_iou, result.fw_iou)
    np.testing.assert_allclose(got, (acc, acc_cls, mean_iu, fwavacc), rtol=0, atol=bound)
    np.testing.assert_allclose(list(result.class_iou.values()), iu, rtol=0, atol=bound)
    assert tuple(result.class_iou) == VOC_CLASSES


@pytest.mark.parametrize("count, max_pixels", [
    (8, 1_000_000), (8, 30_000), (8, 27_000), (7, 5_000), (7, 2_300),
])  # fmt: skip
def test_chunking_changes_nothing(tiny_fcn8s, count, max_pixels):
    """All in batches of equal size, 48x640 in 2 or 20 tiles (the smallest tile with a 256 px
    margin is 48x544), small images by 2 or one at a time: one confusion matrix (near-ties,
    whose class depends on the summation order, void)."""
    data = void_near_ties(tiny_fcn8s, pairs()[:count])
    expected = evaluate(tiny_fcn8s, data, max_pixels=10**9).confusion
    as_dataset = tf.data.Dataset.from_generator(
        lambda: iter(data),
        output_signature=(
            tf.TensorSpec((None, None, 3), tf.uint8),
            tf.TensorSpec((None, None), tf.uint8),
        ),
    )
    for source in (data, as_dataset):
        result = evaluate(tiny_fcn8s, source, max_pixels=max_pixels)
        np.testing.assert_array_equal(result.confusion, expected)


def test_batches_hold_equal_sizes_within_budget():
    data = pairs()
    max_pixels = 3 * 40 * 56
    batches = list(_batches(iter(data), max_pixels))
    assert sum(len(images) for images, _ in batches) == len(data)
    for images, labels in batches:
        assert images.shape[:3] == labels.shape
        assert len(images) == 1 or images[0].size // 3 * len(images) <= max_pixels
    assert max(len(images) for images, _ in batches) == 3


def test_voc_root_and_split(tiny_fcn8s):
    by_root = evaluate(tiny_fcn8s, SAMPLE, "val", max_pixels=400_000, precision="float32")
    by_dataset = evaluate(tiny_fcn8s, eval_dataset(voc_pairs(SAMPLE, "val")), precision="float32")
    assert by_root.num_images == by_dataset.num_images == len(voc_pairs(SAMPLE, "val"))
    for result in (by_root, by_dataset):
        pairs = eval_dataset(voc_pairs(SAMPLE, "val")).as_numpy_iterator()
        assert_confusion_of(tiny_fcn8s, pairs, result.confusion)


def test_a_model_file_is_loaded_in_the_precision_asked(tiny_fcn8s, tmp_path):
    """evaluate of a ``.keras`` path scores the model it holds (float32 here, as asked)."""
    tiny_fcn8s.save(tmp_path / "tiny.keras")
    result = evaluate(tmp_path / "tiny.keras", SAMPLE, "val", precision="float32")
    pairs = eval_dataset(voc_pairs(SAMPLE, "val")).as_numpy_iterator()
    assert_confusion_of(tiny_fcn8s, pairs, result.confusion)


def test_report_json_and_plot(tiny_fcn8s, tmp_path):
    result = evaluate(tiny_fcn8s, pairs()[:3])
    table = str(result)
    assert "aeroplane" in table and "mean_iou" in table
    result.save_json(tmp_path / "r.json")
    saved = json.loads((tmp_path / "r.json").read_text())
    assert saved["confusion"] == result.confusion.tolist()
    assert saved["mean_iou"] == pytest.approx(result.mean_iou)
    figure = result.plot_confusion(tmp_path / "c.png")
    assert (tmp_path / "c.png").stat().st_size > 0
    assert figure.axes[0].get_xticklabels()[1].get_text() == "aeroplane"


def test_callback_feeds_model_checkpoint(tmp_path):
    model = keras.Sequential([keras.Input((None, None, 3)), keras.layers.Conv2D(3, 1)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (4, 8, 8, 3)).astype(np.float32)
    y = rng.integers(0, 3, (4, 8, 8)).astype(np.uint8)
    val = [(x[0].astype(np.uint8), y[0]), (x[1, :5].astype(np.uint8), y[1, :5])]
    evaluation = EvaluationCallback(val, every=1)
    checkpoint = keras.callbacks.ModelCheckpoint(
        tmp_path / "best.keras", monitor="val_mean_iou", mode="max", save_best_only=True
    )
    history = model.fit(x, y, epochs=2, verbose=0, callbacks=[evaluation, checkpoint])
    for key in ("val_mean_iou", "val_pixel_accuracy", "val_mean_accuracy", "val_fw_iou"):
        assert len(history.history[key]) == 2
    assert history.history["val_mean_iou"][-1] == evaluation.result.mean_iou
    assert (tmp_path / "best.keras").exists()
    assert evaluation.result.class_names == ("class_0", "class_1", "class_2")
