"""fcn.testing: helpers of the tests, benchmarks and notebooks, out of the library modules."""

from __future__ import annotations

import importlib

import numpy as np
import pytest
from PIL import Image

from fcn.caffe import read_caffemodel
from fcn.plots import DPI
from fcn.testing import caffe_layers, plot_memory_growth, write_caffemodel


@pytest.mark.parametrize(
    "module, name",
    [("fcn.caffe", "write_caffemodel"), ("fcn.caffe", "caffe_layers"),
     ("fcn.plots", "plot_memory_growth")],
)  # fmt: skip
def test_the_helpers_left_the_library_modules(module, name):
    assert not hasattr(importlib.import_module(module), name)


def test_a_written_caffemodel_reads_back(tmp_path, tiny_fcn8s):
    layers = caffe_layers(tiny_fcn8s)
    write_caffemodel(tmp_path / "net.caffemodel", layers)
    read = read_caffemodel(tmp_path / "net.caffemodel")
    assert [(layer.name, layer.type) for layer in read] == [(n, k) for n, k, _ in layers]
    np.testing.assert_array_equal(read[0].blobs[0].read(), layers[0][2][0])


def test_plot_memory_growth_one_line_per_pipeline(tmp_path):
    rows = [
        {"pipeline": "naive", "images": 25, "peak_rss_mb": 900.0},
        {"pipeline": "naive", "images": 50, "peak_rss_mb": 1150.0},
        {"pipeline": "streaming", "images": 50, "peak_rss_mb": 700.5},
        {"pipeline": "streaming", "images": 25, "peak_rss_mb": 700.0},
    ]
    fig = plot_memory_growth(rows, path=tmp_path / "m.png")
    labels = [line.get_label() for line in fig.axes[0].get_lines()]
    assert labels == ["naive: +10.00 MB per image (fit)", "streaming: +0.02 MB per image (fit)"]
    assert fig.axes[0].get_lines()[1].get_xdata().tolist() == [25, 50]
    with Image.open(tmp_path / "m.png") as png:
        assert png.format == "PNG" and png.size == (6.5 * DPI, 4 * DPI)
