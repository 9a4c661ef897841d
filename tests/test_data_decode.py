"""Reading one pair: exact indices from real palette PNGs, SBD .mat, and every kind of bad file."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.io
from PIL import Image

from fcn.classes import voc_palette
from fcn.data import SAMPLE_DIR, DataError, read_image, read_label, read_pair

VOC = SAMPLE_DIR / "VOCdevkit" / "VOC2012"
JPEG = VOC / "JPEGImages" / "2007_000033.jpg"
PNG = VOC / "SegmentationClass" / "2007_000033.png"


def test_real_palette_png_reads_indices_not_colours():
    image, label = read_pair(JPEG, PNG)
    assert image.shape == (366, 500, 3) and image.dtype == np.uint8
    assert label.shape == (366, 500) and label.dtype == np.uint8
    values, counts = np.unique(label, return_counts=True)
    counted = dict(zip(values.tolist(), counts.tolist(), strict=True))
    assert counted == {0: 143_868, 1: 30_937, 255: 8_195}


def test_every_sample_label_holds_only_classes_and_void():
    seen = set()
    for png in sorted((VOC / "SegmentationClass").glob("*.png")):
        seen |= set(np.unique(read_label(png)).tolist())
    assert seen == set(range(21)) | {255}  # the sample covers all 20 classes


def test_grayscale_rgba_cmyk_and_palette_images_become_rgb(tmp_path):
    rgb = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    Image.fromarray(rgb[..., 0]).save(tmp_path / "gray.png")
    Image.fromarray(np.dstack([rgb, np.zeros((5, 7), np.uint8)])).save(tmp_path / "rgba.png")
    Image.fromarray(rgb).convert("CMYK").save(tmp_path / "cmyk.tif")
    palette = Image.fromarray(rgb[..., 0] % 21, mode="L").convert("P")
    palette.putpalette(voc_palette().ravel().tolist())
    palette.save(tmp_path / "palette.png")
    assert (read_image(tmp_path / "gray.png") == rgb[..., :1].repeat(3, axis=2)).all()
    assert (read_image(tmp_path / "rgba.png") == rgb).all()  # alpha dropped, colours kept
    assert (read_image(tmp_path / "cmyk.tif") == rgb).all()
    assert (read_image(tmp_path / "palette.png") == voc_palette()[rgb[..., 0] % 21]).all()
    for name in ("gray.png", "rgba.png", "cmyk.tif", "palette.png"):
        assert read_image(tmp_path / name).shape == (5, 7, 3)


def test_grayscale_label_png_is_read_as_indices(tmp_path):
    values = np.array([[0, 20, 255]], np.uint8)
    Image.fromarray(values, mode="L").save(tmp_path / "l.png")
    assert (read_label(tmp_path / "l.png") == values).all()


def test_rgb_label_png_is_refused(tmp_path):
    Image.open(PNG).convert("RGB").save(tmp_path / "colour.png")
    with pytest.raises(DataError, match=r"colour\.png: label images must hold class indices"):
        read_label(tmp_path / "colour.png")


def test_label_values_outside_the_classes_are_refused(tmp_path):
    Image.fromarray(np.array([[0, 21, 254, 255]], np.uint8), mode="L").save(tmp_path / "bad.png")
    with pytest.raises(DataError, match=r"bad\.png: label values \[21, 254\]"):
        read_label(tmp_path / "bad.png")
    assert read_label(tmp_path / "bad.png", num_classes=255).tolist() == [[0, 21, 254, 255]]


@pytest.mark.parametrize("source", [JPEG, PNG])
def test_truncated_corrupt_and_empty_files_name_the_file(tmp_path, source):
    data = source.read_bytes()
    cases = {
        "truncated": (data[: len(data) // 2], "cannot decode image"),
        "corrupt": (data[:64] + bytes(len(data) - 64), "cannot decode image"),
        "garbage": (b"not an image at all" * 10, "cannot decode image"),
        "empty": (b"", r"empty file \(0 bytes\)"),
    }
    for name, (content, message) in cases.items():
        path = tmp_path / f"{name}{source.suffix}"
        path.write_bytes(content)
        read = read_image if source.suffix == ".jpg" else read_label
        with pytest.raises(DataError, match=f"{path.name}: {message}"):
            read(path)


def test_missing_file_names_it(tmp_path):
    with pytest.raises(DataError, match=r"gone\.jpg: cannot read"):
        read_image(tmp_path / "gone.jpg")


def test_image_and_label_of_different_sizes(tmp_path):
    Image.open(JPEG).crop((0, 0, 499, 366)).save(tmp_path / "narrow.png")
    with pytest.raises(DataError, match=r"narrow\.png is 499x366 but its label .*is 500x366"):
        read_pair(tmp_path / "narrow.png", PNG)


def test_sbd_mat_labels(tmp_path):
    segmentation = np.arange(12, dtype=np.uint8).reshape(3, 4)
    scipy.io.savemat(tmp_path / "ok.mat", {"GTcls": {"Segmentation": segmentation}})
    label = read_label(tmp_path / "ok.mat")
    assert label.dtype == np.uint8 and (label == segmentation).all()
    scipy.io.savemat(tmp_path / "other.mat", {"GTinst": {"Segmentation": segmentation}})
    with pytest.raises(DataError, match=r"other\.mat: not an SBD class annotation"):
        read_label(tmp_path / "other.mat")
    scipy.io.savemat(tmp_path / "big.mat", {"GTcls": {"Segmentation": segmentation + 20}})
    with pytest.raises(DataError, match=r"big\.mat: label values \[21,"):
        read_label(tmp_path / "big.mat")
    (tmp_path / "cut.mat").write_bytes((tmp_path / "ok.mat").read_bytes()[:100])
    with pytest.raises(DataError, match=r"cut\.mat: not an SBD class annotation"):
        read_label(tmp_path / "cut.mat")
