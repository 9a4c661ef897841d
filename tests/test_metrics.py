"""The FCN scores (one ConfusionMatrix type) against a plain numpy transcription of score.py."""

import warnings

import keras
import numpy as np
import pytest

from fcn.classes import IGNORE_LABEL
from fcn.metrics import ConfusionMatrix, MeanIoU

C = 5


def reference(labels: np.ndarray, predictions: np.ndarray, n: int):
    """score.py: fast_hist, then acc, acc_cls, mean_iu, fwavacc, word for word."""
    a, b = labels.ravel().astype(int), predictions.ravel().astype(int)
    k = (a >= 0) & (a < n)
    hist = np.bincount(n * a[k] + b[k], minlength=n**2).reshape(n, n)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        acc = np.diag(hist).sum() / hist.sum()
        acc_cls = np.nanmean(np.diag(hist) / hist.sum(1))
        iu = np.diag(hist) / (hist.sum(1) + hist.sum(0) - np.diag(hist))
        mean_iu = np.nanmean(iu)
        freq = hist.sum(1) / hist.sum()
        recall = np.diag(hist) / hist.sum(1)  # acc_cls before its nanmean
    fwavacc = (freq[freq > 0] * iu[freq > 0]).sum()
    return hist, (acc, acc_cls, mean_iu, fwavacc, iu, recall)


def one_hot_logits(predictions: np.ndarray, n: int) -> np.ndarray:
    return np.eye(n, dtype=np.float32)[predictions]


def cases():
    rng = np.random.default_rng(0)
    labels = rng.integers(0, C, (3, 17, 23))
    labels[rng.random(labels.shape) < 0.2] = IGNORE_LABEL
    predictions = rng.integers(0, C, labels.shape)
    yield "random", labels, predictions
    absent = labels.copy()
    absent[absent == 3] = 0
    yield "class 3 predicted, never labelled", absent, predictions
    yield "class 3 absent everywhere", absent, np.where(predictions == 3, 1, predictions)
    yield "all void", np.full_like(labels, IGNORE_LABEL), predictions
    yield "single class", np.full_like(labels, 2), predictions
    yield "labels >= C ignored", np.where(labels == 4, 7, labels), predictions


@pytest.mark.parametrize("name, labels, predictions", list(cases()), ids=lambda x: str(x)[:20])
def test_scores_equal_reference(name, labels, predictions):
    hist, expected = reference(labels, predictions, C)
    logits = one_hot_logits(predictions, C)
    confusion = ConfusionMatrix.count_logits(labels.astype(np.uint8), logits, C)
    assert confusion.dtype == "int64"
    np.testing.assert_array_equal(confusion.numpy(), hist)
    got = ConfusionMatrix(confusion.numpy()).scores()
    for value, want in zip(got, expected, strict=True):
        # NaN == NaN here; sums of at most C float64 terms in 0..1, in another order
        np.testing.assert_allclose(value, want, rtol=0, atol=C * np.finfo(np.float64).eps)
        np.testing.assert_array_equal(np.isnan(value), np.isnan(want))


def test_merged_matrices_equal_one_matrix_of_all_pixels():
    """Two shards counted apart and merged (as workers or images are) equal counting them
    together; update chains, and the class counts must agree."""
    (_, labels, predictions), *_ = cases()
    whole = ConfusionMatrix(C).update(labels, predictions)
    first = ConfusionMatrix(C).update(labels[:1], predictions[:1])
    rest = ConfusionMatrix(C).update(labels[1:], predictions[1:])
    np.testing.assert_array_equal((first + rest).counts, whole.counts)
    assert first.counts.sum() < whole.counts.sum()
    with pytest.raises(ValueError, match="cannot merge 5 and 2 classes"):
        first + ConfusionMatrix(2)
    with pytest.raises(ValueError, match=r"\(C, C\)"):
        ConfusionMatrix(np.zeros((2, 3)))


def test_keras_metric_matches_reference_and_keras_meaniou():
    rng = np.random.default_rng(1)
    ours, theirs = (
        MeanIoU(C),
        keras.metrics.MeanIoU(C, ignore_class=IGNORE_LABEL, sparse_y_pred=True),
    )
    all_labels, all_predictions = [], []
    for _ in range(3):
        labels = rng.integers(0, C, (2, 9, 11)).astype(np.uint8)
        labels[rng.random(labels.shape) < 0.1] = IGNORE_LABEL
        predictions = rng.integers(0, C, labels.shape)
        ours.update_state(labels, one_hot_logits(predictions, C))
        theirs.update_state(labels, predictions)
        all_labels.append(labels)
        all_predictions.append(predictions)
    _, (_, _, mean_iu, *_) = reference(np.stack(all_labels), np.stack(all_predictions), C)
    assert float(ours.result()) == pytest.approx(mean_iu, rel=1e-6)
    # All classes present: Keras agrees (it also skips classes with an empty union, but counts
    # in float32 and adds epsilon to the denominator, hence not bit-exact).
    assert float(theirs.result()) == pytest.approx(mean_iu, rel=1e-5)
    ours.reset_state()
    assert int(np.sum(ours.confusion.numpy())) == 0


def test_keras_metric_in_fit():
    model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(C, 1)])
    model.compile(
        "sgd",
        keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=IGNORE_LABEL),
        metrics=[MeanIoU(C)],
    )
    rng = np.random.default_rng(2)
    x = rng.random((4, 8, 8, 3)).astype(np.float32)
    y = rng.integers(0, C, (4, 8, 8)).astype(np.uint8)
    y[:, 0] = IGNORE_LABEL
    history = model.fit(x, y, batch_size=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["mean_iou"][0])
    evaluated = model.evaluate(x, y, batch_size=4, verbose=0, return_dict=True)["mean_iou"]
    _, (_, _, mean_iu, *_) = reference(y, np.argmax(model.predict(x, verbose=0), -1), C)
    assert evaluated == pytest.approx(mean_iu, rel=1e-6)


def test_counts_exact_past_int32():
    """2**31 + a few pixels accumulated exactly (float32 counts would round at 2**24)."""
    metric = MeanIoU(2)
    labels = np.zeros((1, 4096, 4096), np.uint8)  # 2**24 pixels per update
    logits = np.zeros((1, 4096, 4096, 2), np.float32)
    block = ConfusionMatrix.count_logits(labels, logits, 2)
    assert int(block[0, 0]) == 2**24
    for _ in range(128 + 1):
        metric.confusion.assign_add(block)
    metric.update_state(np.zeros((1, 1, 3), np.uint8), np.zeros((1, 1, 3, 2), np.float32))
    total = int(metric.confusion.numpy()[0, 0])
    assert total == 129 * 2**24 + 3 > 2**31
    assert ConfusionMatrix(metric.confusion.numpy()).scores().pixel_accuracy == 1.0


def test_keras_meaniou_also_skips_absent_classes():
    """Keras 3.15 leaves a class with neither labels nor predictions out of the mean, as
    score.py's nanmean does; a class predicted but never labelled counts as 0 in both."""
    labels = np.array([[0, 0, 1, 1, IGNORE_LABEL]], np.uint8)
    predictions = np.array([[0, 2, 1, 1, 3]])  # class 4 absent, class 2 predicted only
    _, (_, _, mean_iu, _, iu, _) = reference(labels, predictions, C)
    assert np.isnan(iu[4]) and iu[2] == 0
    theirs = keras.metrics.MeanIoU(C, ignore_class=IGNORE_LABEL, sparse_y_pred=True)
    theirs.update_state(labels, predictions)
    ours = MeanIoU(C)
    ours.update_state(labels, one_hot_logits(predictions, C))
    assert float(ours.result()) == pytest.approx(mean_iu, rel=1e-6)
    assert float(theirs.result()) == pytest.approx(mean_iu, rel=1e-5)
