"""The four FCN scores, exactly as the reference ``score.py``, from one exact confusion matrix
type ([`ConfusionMatrix`][]), and the Keras metric built on it ([`MeanIoU`][])."""

from __future__ import annotations

from typing import NamedTuple

import keras
import numpy as np
import tensorflow as tf

from fcn.classes import IGNORE_LABEL, NUM_CLASSES


class Scores(NamedTuple):
    """The scores of one confusion matrix: floats ([`ConfusionMatrix.scores`][]) or float64
    tensors ([`ConfusionMatrix.score_tensors`][]).

    Attributes:
        pixel_accuracy: correct / labelled pixels (``score.py``'s ``acc``).
        mean_accuracy: mean over labelled classes of their recall (``acc_cls``).
        mean_iou: mean IoU over the classes labelled or predicted (``mean_iu``).
        fw_iou: IoU weighted by each class's share of labelled pixels (``fwavacc``).
        iou: (C,) IoU per class (``iu``); NaN for a class neither labelled nor predicted.
        class_accuracy: (C,) recall per class, diag / row sum; NaN for a class never labelled.

    Examples:
        >>> scores = ConfusionMatrix(np.array([[3, 1], [0, 4]])).scores()
        >>> scores.pixel_accuracy, scores.iou.tolist(), scores.class_accuracy.tolist()
        (0.875, [0.75, 0.8], [0.75, 1.0])
    """

    pixel_accuracy: float
    mean_accuracy: float
    mean_iou: float
    fw_iou: float
    iou: np.ndarray
    class_accuracy: np.ndarray


class ConfusionMatrix:
    """An exact int64 (C, C) confusion matrix and its scores: the one place both are computed.

    ``counts[i, j]`` counts pixels of ground-truth class ``i`` predicted as ``j``. Labels
    outside ``0 .. C - 1`` (255, void, among them) are not counted, as in ``score.py``'s
    ``fast_hist``. The counting ([`count`][]) and the scores ([`score_tensors`][]) are
    TensorFlow ops, so [`MeanIoU`][] runs them inside a training graph; an instance holds
    NumPy counts for evaluation, results and plots.

    Examples:
        >>> matrix = ConfusionMatrix(3).update([0, 1, 2, 255], [0, 1, 1, 0])
        >>> matrix.counts.sum(), round(matrix.scores().mean_iou, 4)
        (np.int64(3), 0.5)
        >>> (matrix + matrix).counts[1, 1]
        np.int64(2)
    """

    def __init__(self, counts: int | np.ndarray):
        """``counts``: a class count C (an empty matrix) or existing (C, C) counts (copied)."""
        if isinstance(counts, (int, np.integer)):
            counts = np.zeros((max(int(counts), 0),) * 2, np.int64)
        self.counts = np.array(counts, np.int64)
        if self.counts.ndim != 2 or self.counts.shape[0] != self.counts.shape[1]:
            raise ValueError(f"a confusion matrix is (C, C), got {np.shape(counts)}")
        if not 1 <= self.num_classes <= IGNORE_LABEL:
            raise ValueError(
                f"a confusion matrix counts 1..{IGNORE_LABEL} classes ({IGNORE_LABEL} is void), "
                f"got {self.num_classes}"
            )

    @property
    def num_classes(self) -> int:
        return self.counts.shape[0]

    def update(self, labels, predictions) -> ConfusionMatrix:
        """Add the pixels of ``labels`` and ``predictions`` (integer class indices of the same
        shape); returns self. Labels lie in ``0..C-1`` or are [`IGNORE_LABEL`][]
        (void, not counted); predictions lie in ``0..C-1``.

        Raises:
            ValueError: shapes that differ (a transposed or resized map would pair the wrong
                pixels), non-integer values, or a value outside those ranges; nothing is added.
        """
        labels, predictions = np.asarray(labels), np.asarray(predictions)
        if labels.shape != predictions.shape:
            raise ValueError(
                f"labels {labels.shape} and predictions {predictions.shape} differ in shape: "
                "pass maps of the same pixels"
            )
        for name, values, allowed in [
            ("labels", labels, f"classes 0..{self.num_classes - 1} or {IGNORE_LABEL} (void)"),
            ("predictions", predictions, f"classes 0..{self.num_classes - 1}"),
        ]:
            if values.dtype.kind not in "iub":
                raise ValueError(f"{name} must be integer class indices, got {values.dtype}")
            valid = (values >= 0) & (values < self.num_classes)
            if name == "labels":
                valid |= values == IGNORE_LABEL
            if not valid.all():
                bad = np.unique(values[~valid])[:5].tolist()
                raise ValueError(f"{name} hold {bad}: they must be {allowed}")
        self.counts += self.count(labels, predictions, self.num_classes).numpy()
        return self

    def __add__(self, other: ConfusionMatrix) -> ConfusionMatrix:
        """The merged counts of two matrices (e.g. of two shards of a data set)."""
        if other.num_classes != self.num_classes:
            raise ValueError(f"cannot merge {self.num_classes} and {other.num_classes} classes")
        return ConfusionMatrix(self.counts + other.counts)

    def scores(self) -> Scores:
        """[`score_tensors`][] as Python floats and NumPy arrays."""
        found = self.score_tensors(self.counts)
        return Scores(*(float(v) for v in found[:4]), *(v.numpy() for v in found[4:]))

    @staticmethod
    def count(labels, predictions, num_classes: int) -> tf.Tensor:
        """Confusion counts of one batch of class indices, on the device: int64 (C, C).

        Args:
            labels: ground-truth class indices, any shape (e.g. (N, H, W) uint8); values
                outside ``0 .. num_classes - 1`` are ignored.
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

    @staticmethod
    def count_logits(labels, logits, num_classes: int) -> tf.Tensor:
        """[`count`][] of ``labels`` and the argmax of ``logits`` (..., C), on the device, so
        that only the prediction leaves the logits."""
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        return ConfusionMatrix.count(labels, predicted, num_classes)

    @staticmethod
    def score_tensors(counts) -> Scores:
        """``score.py``'s ``acc, acc_cls, mean_iu, fwavacc`` and ``iu`` of (C, C) counts, as
        float64 tensors (also inside a graph).

        A class with neither labels nor predictions has IoU NaN and is left out of the means;
        a class predicted but never labelled has IoU 0 and counts. With no labelled pixel at
        all, every score but ``fw_iou`` (0) is NaN.
        """
        hist = tf.cast(counts, tf.float64)
        diag = tf.linalg.diag_part(hist)
        labelled, predicted = tf.reduce_sum(hist, 1), tf.reduce_sum(hist, 0)
        recall = diag / labelled  # 0 / 0 = NaN: never labelled
        iou = diag / (labelled + predicted - diag)  # NaN: neither labelled nor predicted

        def nanmean(values):
            known = ~tf.math.is_nan(values)
            return tf.reduce_sum(tf.where(known, values, 0.0)) / tf.reduce_sum(
                tf.cast(known, tf.float64)
            )

        freq = labelled / tf.reduce_sum(hist)
        fw_iou = tf.reduce_sum(tf.where(freq > 0, freq * iou, 0.0))
        accuracy = tf.reduce_sum(diag) / tf.reduce_sum(hist)
        return Scores(accuracy, nanmean(recall), nanmean(iou), fw_iou, iou, recall)


@keras.saving.register_keras_serializable(package="fcn")
class MeanIoU(keras.metrics.Metric):
    """Mean IoU as ``score.py`` defines it, for ``model.compile(metrics=[...])``.

    Takes sparse labels (B, H, W) (any integer dtype, 255 ignored) and logits (B, H, W, C).
    The state is an exact int64 confusion matrix, so counts never round, whatever the number
    of pixels. ``keras.metrics.MeanIoU(C, ignore_class=255, sparse_y_pred=True)`` on argmax
    predictions agrees to ~1e-6: it also skips classes with an empty union and drops labels
    >= C, but accumulates in float32 (exact only to 2**24) and adds epsilon to the union.

    Examples:
        >>> metric = MeanIoU(num_classes=2)
        >>> logits = np.array([[[[5.0, 0.0], [0.0, 5.0], [5.0, 0.0], [0.0, 5.0]]]])  # 0, 1, 0, 1
        >>> metric.update_state(np.array([[[0, 1, 1, 255]]]), logits)  # 255: not scored
        >>> float(metric.result())
        0.5
    """

    def __init__(self, num_classes: int = NUM_CLASSES, name: str = "mean_iou", **kwargs):
        super().__init__(name=name, **kwargs)
        self.num_classes = ConfusionMatrix(num_classes).num_classes  # checks the count
        self.confusion = self.add_variable(
            shape=(num_classes, num_classes), initializer="zeros", dtype="int64", name="confusion"
        )

    def update_state(self, y_true, y_pred, sample_weight=None):
        if sample_weight is not None:
            raise ValueError("MeanIoU counts pixels; use the ignore label instead of weights")
        counts = ConfusionMatrix.count_logits(y_true, y_pred, self.num_classes)
        self.confusion.assign_add(counts)

    def result(self):
        return tf.cast(ConfusionMatrix.score_tensors(self.confusion).mean_iou, tf.float32)

    def reset_state(self):
        self.confusion.assign(tf.zeros_like(self.confusion))

    def get_config(self):
        return {**super().get_config(), "num_classes": self.num_classes}
