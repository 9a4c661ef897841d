"""What an evaluation returns: the confusion matrix, its scores, a table, JSON and a plot."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
from matplotlib.figure import Figure

from fcn.metrics import ConfusionMatrix, Scores
from fcn.plots import plot_confusion


@dataclass(frozen=True)
class EvaluationResult:
    """Scores of a model on a data set, all derived from one exact confusion matrix.

    Attributes:
        matrix: the [`ConfusionMatrix`][] (rows ground truth, columns
            prediction, in pixels).
        class_names: C names, in class-index order.
        num_images: images evaluated.

    Examples:
        >>> from fcn.metrics import ConfusionMatrix
        >>> matrix = ConfusionMatrix(2).update([0, 1, 1], [0, 1, 0])
        >>> result = EvaluationResult(matrix, ("a", "b"), num_images=1)
        >>> result.mean_iou, result.class_accuracy
        (0.5, {'a': 1.0, 'b': 0.5})
    """

    matrix: ConfusionMatrix
    class_names: tuple[str, ...]
    num_images: int
    scores: Scores = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "scores", self.matrix.scores())

    @property
    def confusion(self) -> np.ndarray:
        """int64 (C, C) pixel counts, rows ground truth, columns prediction."""
        return self.matrix.counts

    @property
    def pixel_accuracy(self) -> float:
        """Correct pixels / labelled pixels (``score.py``'s ``acc``)."""
        return self.scores.pixel_accuracy

    @property
    def mean_accuracy(self) -> float:
        """Mean over labelled classes of per-class accuracy (``acc_cls``)."""
        return self.scores.mean_accuracy

    @property
    def mean_iou(self) -> float:
        """Mean IoU over classes labelled or predicted (``mean_iu``)."""
        return self.scores.mean_iou

    @property
    def fw_iou(self) -> float:
        """IoU weighted by each class's share of labelled pixels (``fwavacc``)."""
        return self.scores.fw_iou

    @property
    def num_pixels(self) -> int:
        """Labelled (scored) pixels: the sum of the confusion matrix."""
        return int(self.confusion.sum())

    @cached_property
    def class_iou(self) -> dict[str, float]:
        """IoU per class name (NaN: class neither labelled nor predicted)."""
        return dict(zip(self.class_names, self.scores.iou.tolist(), strict=True))

    @cached_property
    def class_accuracy(self) -> dict[str, float]:
        """Recall per class name, diag / row sum (NaN: class never labelled)."""
        return dict(zip(self.class_names, self.scores.class_accuracy.tolist(), strict=True))

    def summary(self) -> dict[str, float]:
        """The four scores under the names Keras logs get (without the ``val_`` prefix)."""
        return {
            "mean_iou": self.mean_iou,
            "pixel_accuracy": self.pixel_accuracy,
            "mean_accuracy": self.mean_accuracy,
            "fw_iou": self.fw_iou,
        }

    def to_dict(self) -> dict:
        """Everything, JSON-ready (NaN becomes null)."""

        def clean(value: float) -> float | None:
            return None if np.isnan(value) else value

        return {
            **{k: clean(v) for k, v in self.summary().items()},
            "num_images": self.num_images,
            "num_pixels": self.num_pixels,
            "class_iou": {k: clean(v) for k, v in self.class_iou.items()},
            "class_accuracy": {k: clean(v) for k, v in self.class_accuracy.items()},
            "confusion": self.confusion.tolist(),
        }

    def save_json(self, path: str | os.PathLike) -> None:
        """Write [`to_dict`][] to ``path``."""
        with open(path, "w") as f:
            json.dump(self.to_dict(), f, indent=1)

    def table(self) -> str:
        """A plain-text table: per-class IoU and accuracy (percent), then the four scores."""
        width = max(len(name) for name in (*self.class_names, *self.summary()))
        lines = [f"{'class':<{width}}  {'IoU':>6}  {'acc':>6}"]
        for name in self.class_names:
            iou, acc = self.class_iou[name], self.class_accuracy[name]
            lines.append(f"{name:<{width}}  {100 * iou:6.2f}  {100 * acc:6.2f}")
        lines.append("")
        lines += [f"{k:<{width}}  {100 * v:6.2f}" for k, v in self.summary().items()]
        lines.append(f"{self.num_images} images, {self.num_pixels:,} labelled pixels")
        return "\n".join(lines)

    __str__ = table

    def plot_confusion(self, path: str | os.PathLike | None = None) -> Figure:
        """Plot the row-normalised confusion matrix (recall per true class); save it if ``path``.

        Returns the matplotlib ``Figure`` (Agg canvas: no display needed); see
        [`fcn.plots.plot_confusion`][].
        """
        return plot_confusion(self.matrix, self.class_names, path)
