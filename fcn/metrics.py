"""The four FCN scores, exactly as the reference ``score.py``, from an int64 confusion matrix.

``confusion[i, j]`` counts pixels of ground-truth class ``i`` predicted as ``j``. Labels outside
``0 .. num_classes - 1`` (255, void, among them) are not counted, as in ``fast_hist``.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import keras
import numpy as np
import tensorflow as tf

from fcn.classes import NUM_CLASSES


class Scores(NamedTuple):
    """Pixel accuracy, mean class accuracy, mean IoU, frequency-weighted IoU, per-class IoU."""

    pixel_accuracy: float
    mean_accuracy: float
    mean_iou: float
    fw_iou: float
    iou: np.ndarray


def scores(confusion: np.ndarray) -> Scores:
    """``score.py``'s ``acc, acc_cls, mean_iu, fwavacc`` and ``iu`` of a (C, C) confusion matrix.

    A class with neither labels nor predictions has IoU NaN and is left out of the means; a class
    predicted but never labelled has IoU 0 and counts.
    """
    hist = np.asarray(confusion, dtype=np.int64)
    diag = np.diag(hist)
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # nanmean of all-NaN: no labelled pixel
        acc = diag.sum() / hist.sum()
        acc_cls = np.nanmean(diag / hist.sum(1))
        iu = diag / (hist.sum(1) + hist.sum(0) - diag)
        mean_iu = np.nanmean(iu)
        freq = hist.sum(1) / hist.sum()
    fwavacc = (freq[freq > 0] * iu[freq > 0]).sum()
    return Scores(float(acc), float(acc_cls), float(mean_iu), float(fwavacc), iu)


def confusion_matrix(labels, predictions, num_classes: int) -> tf.Tensor:
    """Confusion matrix of one batch of class indices, on the device: int64 (C, C).

    Args:
        labels: ground-truth class indices, any shape (e.g. (N, H, W) uint8); values outside
            ``0 .. num_classes - 1`` are ignored.
        predictions: predicted class indices, the same number of elements.
    """
    labels = tf.reshape(tf.cast(labels, tf.int32), [-1])
    predictions = tf.reshape(tf.cast(predictions, tf.int32), [-1])
    valid = (labels >= 0) & (labels < num_classes)
    size = num_classes * num_classes
    # Unscored pixels count in one extra bin, dropped after: no mask, no empty tensor.
    index = tf.where(valid, labels * num_classes + predictions, size)
    counts = tf.math.bincount(index, minlength=size + 1, maxlength=size + 1, dtype=tf.int64)
    return tf.reshape(counts[:size], (num_classes, num_classes))


def confusion_counts(labels, logits, num_classes: int) -> tf.Tensor:
    """:func:`confusion_matrix` of ``labels`` and the argmax of ``logits`` (..., C), on the
    device, so that only the prediction leaves the logits."""
    return confusion_matrix(labels, tf.argmax(logits, axis=-1, output_type=tf.int32), num_classes)


@keras.saving.register_keras_serializable(package="fcn")
class MeanIoU(keras.metrics.Metric):
    """Mean IoU as ``score.py`` defines it, for ``model.compile(metrics=[...])``.

    Takes sparse labels (B, H, W) (any integer dtype, 255 ignored) and logits (B, H, W, C).
    The state is an exact int64 confusion matrix, so counts never round, whatever the number
    of pixels. ``keras.metrics.MeanIoU(C, ignore_class=255, sparse_y_pred=True)`` on argmax
    predictions agrees to ~1e-6: it also skips classes with an empty union and drops labels
    >= C, but accumulates in float32 (exact only to 2**24) and adds epsilon to the union.
    """

    def __init__(self, num_classes: int = NUM_CLASSES, name: str = "mean_iou", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_classes = num_classes
        self.confusion = self.add_variable(
            shape=(num_classes, num_classes), initializer="zeros", dtype="int64", name="confusion"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("MeanIoU counts pixels; use the ignore label instead of weights")
        self.confusion.assign_add(confusion_counts(y_true, y_pred, self.num_classes))

    def result(self):
        hist = tf.cast(self.confusion, tf.float64)
        diag = tf.linalg.diag_part(hist)
        union = tf.reduce_sum(hist, 0) + tf.reduce_sum(hist, 1) - diag
        present = tf.cast(union > 0, tf.float64)
        iou = diag / tf.maximum(union, 1.0) * present
        # 0 / 0 = NaN when nothing is labelled or predicted, as score.py's nanmean
        return tf.cast(tf.reduce_sum(iou) / tf.reduce_sum(present), tf.float32)

    def reset_state(self):
        self.confusion.assign(tf.zeros_like(self.confusion))

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes}
