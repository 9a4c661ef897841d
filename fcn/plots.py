"""Pictures: label maps in VOC colours, overlays, training curves, confusion matrices.

Every plotting function draws on a bare matplotlib ``Figure`` with an Agg canvas (no pyplot, no
display, no global state), returns it, and also writes it as a PNG when given ``path``. In a
notebook, run ``%matplotlib inline`` once so that a returned figure is shown.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

from fcn.classes import IGNORE_LABEL, VOC_CLASSES, voc_palette
from fcn.metrics import ConfusionMatrix

PALETTE: np.ndarray = voc_palette()
"""(256, 3) uint8: the colour of every label value (0 background black, 255 void cream)."""

DPI = 100
"""Resolution of saved PNGs: a figure of (w, h) inches is (100 w, 100 h) pixels."""

LEGEND_COLUMNS = 6

PathLike = str | os.PathLike


def colorize(labels: np.ndarray) -> np.ndarray:
    """VOC colours of a label map: (H, W) integers in 0..255 -> (H, W, 3) uint8 RGB.

    Examples:
        >>> colorize(np.array([[0, 1], [15, 255]])).tolist()
        [[[0, 0, 0], [128, 0, 0]], [[192, 128, 128], [224, 224, 192]]]
    """
    labels = np.asarray(labels)
    if labels.size and (labels.min() < 0 or labels.max() > 255):
        raise ValueError(f"labels must be in 0..255, got {labels.min()}..{labels.max()}")
    return PALETTE[labels.astype(np.intp)]


def overlay(image: np.ndarray, labels: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """Blend the VOC colour of each object pixel over ``image``: (H, W, 3) uint8 RGB.

    Object pixels become ``round((1 - alpha) * image + alpha * colour)``; background (0) and void
    (255) pixels keep the image, so the scene stays visible around the objects.

    Args:
        image: (H, W, 3) uint8 RGB.
        labels: (H, W) integer class indices, 255 void.
        alpha: weight of the class colour, 0 (image only) .. 1 (colour only).

    Examples:
        >>> image = np.full((2, 2, 3), 100, np.uint8)
        >>> overlay(image, np.array([[0, 1], [255, 1]]))[..., 0].tolist()  # red 128 at class 1
        [[100, 114], [100, 114]]
    """
    image = np.asarray(image)
    labels = np.asarray(labels)
    if image.shape[:2] != labels.shape:
        raise ValueError(f"image {image.shape} and labels {labels.shape} differ in size")
    blended = np.rint((1 - alpha) * image + alpha * colorize(labels))
    objects = ((labels != 0) & (labels != IGNORE_LABEL))[..., None]
    return np.where(objects, blended, image).astype(np.uint8)


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height))
    FigureCanvasAgg(fig)
    return fig


def _finish(fig: Figure, path: PathLike | None) -> Figure:
    if path is not None:
        fig.savefig(path, dpi=DPI)
    return fig


def _class_name(label: int, class_names: Sequence[str]) -> str:
    if label == IGNORE_LABEL:
        return "void"
    return class_names[label] if label < len(class_names) else f"class {label}"


def plot_segmentation(
    image: np.ndarray,
    prediction: np.ndarray | None = None,
    ground_truth: np.ndarray | None = None,
    class_names: Sequence[str] = VOC_CLASSES,
    path: PathLike | None = None,
) -> Figure:
    """Image, ground truth, prediction and the prediction over the image, side by side.

    Panels that have no data are left out; below them a legend shows a colour patch and the
    name of every class present in the ground truth or the prediction (void included).

    Args:
        image: (H, W, 3) uint8 RGB.
        prediction, ground_truth: (H, W) integer label maps (255 void), or None.
        class_names: name of each class index.
        path: also save the figure there as a PNG.

    Examples:
        >>> fig = plot_segmentation(np.zeros((32, 48, 3), np.uint8), np.ones((32, 48), np.uint8))
        >>> [ax.get_title() for ax in fig.axes], [t.get_text() for t in fig.legends[0].texts]
        (['image', 'prediction', 'prediction over image'], ['aeroplane'])
    """
    image = np.asarray(image)
    panels = [("image", image)]
    given = [
        (t, m)
        for t, m in (("ground truth", ground_truth), ("prediction", prediction))
        if m is not None
    ]
    for title, labels in given:
        if np.shape(labels) != image.shape[:2]:
            raise ValueError(f"{title} {np.shape(labels)} differs from image {image.shape}")
        panels.append((title, colorize(labels)))
    if given:
        title, labels = given[-1]
        panels.append((f"{title} over image", overlay(image, labels)))
    present = np.unique(np.concatenate([np.ravel(m) for _, m in given])) if given else []
    handles = [
        Patch(
            facecolor=PALETTE[label] / 255,
            edgecolor="grey",
            label=_class_name(int(label), class_names),
        )
        for label in present
    ]
    legend_height = 0.3 * -(-len(handles) // LEGEND_COLUMNS)  # inches, one row per 6 classes
    height, width = image.shape[:2]
    fig = _figure(3.2 * len(panels), 3.2 * height / width + 0.5 + legend_height)
    for i, (title, picture) in enumerate(panels, 1):
        ax = fig.add_subplot(1, len(panels), i)
        ax.imshow(picture, interpolation="nearest")
        ax.set_title(title)
        ax.set_axis_off()
    if handles:
        fig.legend(
            handles=handles,
            loc="lower center",
            ncol=min(len(handles), LEGEND_COLUMNS),
            frameon=False,
        )
    fig.tight_layout(rect=(0, legend_height / fig.get_figheight(), 1, 1))
    return _finish(fig, path)


def plot_training_curves(
    log: Mapping[str, np.ndarray], path: PathLike | None = None
) -> Figure:
    """Loss and validation scores per epoch of a [`fcn.train`][] run: ``log`` is its
    ``log.csv`` as columns ([`fcn.training.checkpoint.read_log`][]).

    Left: every logged loss; right: every ``val_*`` score (fractions, e.g. ``val_mean_iou``).
    The x axis counts completed epochs (``log.csv``'s 0-based ``epoch`` + 1). Epochs without
    validation (``val_every`` > 1) are skipped on the right.

    Examples:
        >>> log = {"epoch": np.array([0.0, 1.0]), "loss": np.array([2.5, 1.5]),
        ...        "val_mean_iou": np.array([np.nan, 0.25])}
        >>> [(ax.get_title(), len(ax.lines)) for ax in plot_training_curves(log).axes]
        [('loss', 1), ('validation', 1)]
    """
    log = dict(log)
    epochs = log.pop("epoch", np.array([])) + 1
    losses = {k: v for k, v in log.items() if "loss" in k}
    metrics = {k: v for k, v in log.items() if k.startswith("val_") and k not in losses}
    fig = _figure(10, 3.8)
    loss_ax, val_ax = fig.subplots(1, 2, sharex=True)
    for ax, title, series in ((loss_ax, "loss", losses), (val_ax, "validation", metrics)):
        for name, values in series.items():
            done = ~np.isnan(values)
            ax.plot(epochs[done], values[done], marker="o", label=name)
        ax.set_xlabel("epochs completed")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if series:
            ax.legend()
    val_ax.set_ylim(0, 1)
    fig.tight_layout()
    return _finish(fig, path)


def plot_confusion(
    confusion: ConfusionMatrix | np.ndarray,
    class_names: Sequence[str],
    path: PathLike | None = None,
) -> Figure:
    """Row-normalised confusion matrix: the share of each true class's pixels per prediction
    (each row is the class's recall per predicted class), titled with its mean IoU.

    Args:
        confusion: a [`ConfusionMatrix`][] or its (C, C) pixel counts, rows
            ground truth, columns prediction.
        class_names: C names.
        path: also save the figure there as a PNG.

    Examples:
        >>> fig = plot_confusion(np.array([[5, 1], [0, 4]]), ["background", "cat"])
        >>> fig.axes[0].get_title()
        'confusion (row-normalised), mean IoU 81.67%'
    """
    matrix = confusion if isinstance(confusion, ConfusionMatrix) else ConfusionMatrix(confusion)
    with np.errstate(divide="ignore", invalid="ignore"):
        normalised = matrix.counts / matrix.counts.sum(1, keepdims=True)
    size = 3 + 0.35 * len(class_names)
    fig = _figure(size, size)
    ax = fig.add_subplot()
    image = ax.imshow(np.nan_to_num(normalised), vmin=0, vmax=1, cmap="Blues")
    ticks = np.arange(len(class_names))
    ax.set_xticks(ticks, class_names, rotation=90)
    ax.set_yticks(ticks, class_names)
    ax.set_xlabel("prediction")
    ax.set_ylabel("ground truth")
    mean_iou = matrix.scores().mean_iou
    ax.set_title(f"confusion (row-normalised), mean IoU {100 * mean_iou:.2f}%")
    fig.colorbar(image, ax=ax, fraction=0.046)
    fig.tight_layout()
    return _finish(fig, path)
