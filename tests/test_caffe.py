""".caffemodel files without Caffe (fcn.caffe): files written in Caffe's wire format, converted,
and checked against an independent NumPy forward pass of the Caffe net."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import TINY, network_tolerance, randomize
from numpy.lib.stride_tricks import sliding_window_view

from fcn import build_model
from fcn.caffe import CaffeFormatError, convert_caffe, read_caffemodel
from fcn.layout import CROP_OFFSETS, INPUT_PAD
from fcn.model import ATONCE_SCALES, SKIP_POOLS, UPSAMPLERS, topology
from fcn.preprocessing import PAPER_MEAN_BGR
from fcn.testing import caffe_layers, write_caffemodel


def conv(x, kernel, bias, pad):
    """Caffe's Convolution (cross-correlation, stride 1): x (C, H, W), kernel (O, C, k, k)."""
    x = np.pad(x, [(0, 0), (pad, pad), (pad, pad)])
    windows = sliding_window_view(x, kernel.shape[2:], axis=(1, 2))  # (C, H', W', k, k)
    out = np.einsum("chwij,ocij->ohw", windows, kernel)
    return out if bias is None else out + bias[:, None, None]


def max_pool(x):
    """Caffe's 2x2 stride-2 max pooling, output size rounded up (the last window clipped)."""
    c, h, w = x.shape
    oh, ow = -(-h // 2), -(-w // 2)
    padded = np.full((c, 2 * oh, 2 * ow), -np.inf)
    padded[:, :h, :w] = x
    return padded.reshape(c, oh, 2, ow, 2).max(axis=(2, 4))


def deconv(x, kernel, stride):
    """Caffe's Deconvolution without bias: x (C, H, W), kernel (C, O, k, k); every input pixel
    adds its value times the kernel at stride x its position (col2im)."""
    c, h, w = x.shape
    k = kernel.shape[2]
    out = np.zeros((kernel.shape[1], (h - 1) * stride + k, (w - 1) * stride + k))
    for i in range(h):
        for j in range(w):
            patch = np.einsum("c,coij->oij", x[:, i, j], kernel)
            out[:, i * stride : i * stride + k, j * stride : j * stride + k] += patch
    return out


def crop(x, like, offset):
    return x[:, offset : offset + like.shape[1], offset : offset + like.shape[2]]


def caffe_forward(layers: dict, variant: str, image: np.ndarray) -> np.ndarray:
    """The Caffe net of ``variant`` on one RGB uint8 image, in float64: (H, W, C) logits."""
    x = image[..., ::-1].astype(np.float64) - np.array(PAPER_MEAN_BGR)
    x = np.pad(x.transpose(2, 0, 1), [(0, 0), (INPUT_PAD,) * 2, (INPUT_PAD,) * 2])
    pools = {}
    for name in topology(variant).chain:
        if name.startswith("pool"):
            x = pools[name] = max_pool(x)
        elif not name.startswith("drop"):
            kernel, *bias = layers[name]
            pad = 1 if name.startswith("conv") and name != "conv1_1" else 0
            x = conv(x, kernel, bias[0] if bias else None, pad)
            x = x if name == "score_fr" else np.maximum(x, 0)
    scales = ATONCE_SCALES if variant == "fcn8s_atonce" else {}
    ups = ["upscore2", "upscore_pool4"]
    for up, block in zip(ups, SKIP_POOLS[variant], strict=False):
        x = deconv(x, layers[up][0], 2)
        pool = f"pool{block}"
        skip = conv(pools[pool] * scales.get(pool, 1.0), *layers[f"score_{pool}"], 0)
        x = x + crop(skip, x, CROP_OFFSETS[variant][f"score_{pool}c"])
    stride = 2 ** (5 - len(SKIP_POOLS[variant]))
    x = deconv(x, layers[UPSAMPLERS[variant]][0], stride)
    x = crop(x, image.transpose(2, 0, 1), CROP_OFFSETS[variant]["score"])
    return x.transpose(1, 2, 0)


@pytest.mark.parametrize("variant, v1", [("fcn8s", False), ("fcn8s", True),
                                         ("fcn16s", False), ("fcn8s_atonce", False)])  # fmt: skip
def test_converted_logits_equal_a_numpy_caffe_forward_pass(variant, v1, tmp_path):
    """A width-1/16 net with random weights everywhere (the upsamplers too: a flipped or
    transposed kernel would show), written as a .caffemodel (the new layout, and V1 with legacy
    4-d blob shapes), converted, and run on images of three sizes against Caffe's arithmetic
    in NumPy float64 (ceil pooling, col2im deconvolution, the crop offsets)."""
    source = randomize(build_model(variant, weights=None, width=TINY), seed=5)
    path = tmp_path / "net.caffemodel"
    written = caffe_layers(source)
    write_caffemodel(path, written, v1=v1)
    model = convert_caffe(path, variant)
    assert model.get_layer("preprocess").mean == PAPER_MEAN_BGR
    layers = {name: blobs for name, _, blobs in written}
    rng = np.random.default_rng(1)
    for size in [(37, 53), (64, 40), (1, 1)]:
        image = rng.integers(0, 256, (*size, 3), dtype=np.uint8)
        logits = np.asarray(model(image[None], training=False)[0])
        expected = caffe_forward(layers, variant, image)
        assert logits.shape == expected.shape == (*size, 21)
        tolerance = network_tolerance(model, np.abs(expected).max())
        np.testing.assert_allclose(logits, expected, rtol=0, atol=tolerance)


def test_the_file_is_read_once_and_blobs_only_when_wanted(tmp_path):
    """Reading the index reads no blob: a blob's floats are where the index says, and a file
    cut inside a blob is refused when that blob is read, naming the byte."""
    path = tmp_path / "net.caffemodel"
    kernel = np.arange(24, dtype=np.float32).reshape(2, 3, 2, 2)
    write_caffemodel(path, [("conv1_1", "Convolution", [kernel, np.ones(2)])])
    (layer,) = read_caffemodel(path)
    assert (layer.name, layer.type) == ("conv1_1", "Convolution")
    assert layer.blobs[0].shape == (2, 3, 2, 2)
    np.testing.assert_array_equal(layer.blobs[0].read(), kernel)
    raw = path.read_bytes()
    assert raw[layer.blobs[0].offset : layer.blobs[0].offset + 96] == kernel.tobytes()


def test_bad_files_and_other_nets_are_refused_naming_the_problem(tmp_path):
    source = build_model("fcn32s", weights=None, width=TINY)
    written = caffe_layers(source)
    path = tmp_path / "fcn32s.caffemodel"
    write_caffemodel(path, written)

    def refused(data: bytes | None, layers=None, variant="fcn32s") -> str:
        bad = tmp_path / "bad.caffemodel"
        if layers is not None:
            write_caffemodel(bad, layers)
        else:
            bad.write_bytes(data)
        with pytest.raises(CaffeFormatError) as error:
            convert_caffe(bad, variant)
        assert str(bad) in str(error.value)
        return str(error.value)

    assert "truncated" in refused(path.read_bytes()[:-1000])
    assert "not a protobuf message" in refused(b"name: 'FCN'\nlayer {\n}\n" * 3)
    assert "no layers" in refused(b"")
    assert "no layer upscore2, which fcn16s needs" in refused(path.read_bytes(), None, "fcn16s")
    without_fc7 = [layer for layer in written if layer[0] != "fc7"]
    assert "no layer fc7" in refused(None, without_fc7)
    wrong = [(n, k, [b[:, :-1] if n == "score_fr" and b.ndim == 4 else b for b in blobs])
             for n, k, blobs in written]  # fmt: skip
    message = refused(None, wrong)
    assert "layer score_fr holds a blob of shape (21, 255, 1, 1)" in message
    assert "needs (21, 256, 1, 1)" in message


def test_fcn_convert_writes_a_keras_model_that_loads_and_predicts_the_same(tmp_path, capsys):
    from fcn import load_model
    from fcn.cli import main

    source = randomize(build_model("fcn16s", weights=None, width=TINY), seed=7)
    write_caffemodel(tmp_path / "fcn16s.caffemodel", caffe_layers(source))
    out = tmp_path / "fcn16s.keras"
    assert main(["convert", str(tmp_path / "fcn16s.caffemodel"), "--variant", "fcn16s",
                 "--out", str(out)]) == 0  # fmt: skip
    assert f"-> {out}" in capsys.readouterr().out
    converted = convert_caffe(tmp_path / "fcn16s.caffemodel", "fcn16s")
    image = np.random.default_rng(2).integers(0, 256, (1, 45, 38, 3), dtype=np.uint8)
    np.testing.assert_array_equal(load_model(out)(image), converted(image))
    assert main(["convert", str(tmp_path / "missing.caffemodel"), "--out", str(out)]) == 2
    assert "missing.caffemodel" in capsys.readouterr().err
