"""fcn.plots: VOC colours, overlays, and every figure saved as a PNG without a display."""

from __future__ import annotations

import csv

import numpy as np
import pytest
from PIL import Image

from fcn.classes import VOC_CLASSES
from fcn.plots import (
    DPI,
    colorize,
    overlay,
    plot_confusion,
    plot_segmentation,
    plot_training_curves,
)
from fcn.training.checkpoint import read_log


def test_colorize_gives_the_voc_devkit_colours():
    labels = np.array([[0, 1, 15], [12, 20, 255]], np.uint8)
    colours = colorize(labels)
    assert colours.shape == (2, 3, 3) and colours.dtype == np.uint8
    assert colours[0, 0].tolist() == [0, 0, 0]  # background
    assert colours[0, 1].tolist() == [128, 0, 0]  # aeroplane
    assert colours[0, 2].tolist() == [192, 128, 128]  # person
    assert colours[1, 0].tolist() == [64, 0, 128]  # dog
    assert colours[1, 1].tolist() == [0, 64, 128]  # tvmonitor
    assert colours[1, 2].tolist() == [224, 224, 192]  # void
    assert colorize(labels.astype(np.int64)).tolist() == colours.tolist()
    with pytest.raises(ValueError, match="0..255"):
        colorize(np.array([[-1]]))


def test_overlay_blends_objects_and_keeps_background_and_void():
    image = np.full((2, 2, 3), (100, 50, 200), np.uint8)
    labels = np.array([[0, 1], [255, 15]])
    out = overlay(image, labels, alpha=0.5)
    assert out.dtype == np.uint8
    assert out[0, 0].tolist() == [100, 50, 200]  # background: the image
    assert out[1, 0].tolist() == [100, 50, 200]  # void: the image
    assert out[0, 1].tolist() == [114, 25, 100]  # (100+128)/2, (50+0)/2, (200+0)/2
    assert out[1, 1].tolist() == [146, 89, 164]  # 0.5 * (100, 50, 200) + 0.5 * (192, 128, 128)
    assert overlay(image, labels, alpha=0.25)[0, 1].tolist() == [107, 38, 150]  # rounded
    with pytest.raises(ValueError, match="differ in size"):
        overlay(image, labels[:1])


def _png(path, min_width, min_height):
    assert path.stat().st_size > 1000
    with Image.open(path) as png:
        assert png.format == "PNG"
        width, height = png.size
    assert min_width <= width <= 4 * min_width and min_height <= height <= 4 * min_height
    return width, height


def test_plot_segmentation_panels_legend_and_png(tmp_path):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    truth = np.zeros((60, 80), np.uint8)
    truth[10:30, 10:40], truth[9, :] = 12, 255
    prediction = np.zeros((60, 80), np.uint8)
    prediction[10:30, 10:40] = 8
    fig = plot_segmentation(image, prediction, truth, path=tmp_path / "s.png")
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["image", "ground truth", "prediction", "prediction over image"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert legend == ["background", "cat", "dog", "void"]
    width, height = _png(tmp_path / "s.png", 4 * 300, 250)
    assert width > 3 * height

    alone = plot_segmentation(image, path=tmp_path / "i.png")
    assert [ax.get_title() for ax in alone.axes] == ["image"] and not alone.legends
    _png(tmp_path / "i.png", 300, 250)
    names = plot_segmentation(image, ground_truth=truth, class_names=("bg",) * 12 + ("thing",))
    assert [t.get_text() for t in names.legends[0].get_texts()] == ["bg", "thing", "void"]
    with pytest.raises(ValueError, match="differs from image"):
        plot_segmentation(image, prediction[:10])


def test_plot_training_curves_of_a_read_log_csv(tmp_path):
    rows = [
        {"epoch": 0, "loss": 2.0, "val_mean_iou": "", "val_pixel_accuracy": ""},
        {"epoch": 1, "loss": 1.5, "val_mean_iou": 0.2, "val_pixel_accuracy": 0.6},
        {"epoch": 2, "loss": 1.1, "val_mean_iou": 0.3, "val_pixel_accuracy": 0.7},
    ]
    with open(tmp_path / "log.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    assert np.isnan(read_log(tmp_path)["val_mean_iou"][0])
    fig = plot_training_curves(read_log(tmp_path), path=tmp_path / "curves.png")
    loss_ax, val_ax = fig.axes
    (loss,) = loss_ax.get_lines()
    assert loss.get_xdata().tolist() == [1, 2, 3] and loss.get_ydata().tolist() == [2, 1.5, 1.1]
    iou = {line.get_label(): line for line in val_ax.get_lines()}["val_mean_iou"]
    assert iou.get_xdata().tolist() == [2, 3]  # the epoch without validation is left out
    assert val_ax.get_ylim() == (0, 1)
    _png(tmp_path / "curves.png", 10 * DPI, 3.8 * DPI)
    same = plot_training_curves(read_log(tmp_path / "log.csv"))
    assert same.axes[0].get_lines()[0].get_ydata().tolist() == [2, 1.5, 1.1]


def test_plot_confusion_is_row_normalised(tmp_path):
    confusion = np.zeros((21, 21), np.int64)
    confusion[0, 0], confusion[0, 1], confusion[1, 1] = 30, 10, 5
    fig = plot_confusion(confusion, VOC_CLASSES, path=tmp_path / "c.png")
    shown = fig.axes[0].images[0].get_array()
    assert shown[0, 0] == pytest.approx(0.75) and shown[0, 1] == pytest.approx(0.25)
    assert shown[2].sum() == 0  # a class never labelled: an empty row, not NaN
    assert fig.axes[0].get_yticklabels()[1].get_text() == "aeroplane"
    _png(tmp_path / "c.png", 1000, 1000)
