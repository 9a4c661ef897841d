"""Listing pairs: VOC, SBD, train_aug / seg11valid arithmetic, folders, lists, missing files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.io
from PIL import Image

from fcn.data import (
    SAMPLE_DIR,
    DataError,
    SegmentationFiles,
    SkipLog,
    exclude_ids,
    read_label,
    sbd_pairs,
    seg11valid_ids,
    seg11valid_pairs,
    train_aug_pairs,
    voc_pairs,
)

SAMPLE = SAMPLE_DIR  # the real VOC sample shipped with the package


def write_voc(root: Path, splits: dict[str, list[str]]) -> Path:
    """A VOCdevkit/VOC2012 tree with a 6x4 JPEG and palette PNG (all zeros) per listed id."""
    voc = root / "VOCdevkit" / "VOC2012"
    for sub in ("ImageSets/Segmentation", "JPEGImages", "SegmentationClass"):
        (voc / sub).mkdir(parents=True, exist_ok=True)
    for split, ids in splits.items():
        (voc / "ImageSets" / "Segmentation" / f"{split}.txt").write_text("\n".join(ids) + "\n")
        for i in ids:
            Image.new("RGB", (6, 4)).save(voc / "JPEGImages" / f"{i}.jpg")
            Image.new("P", (6, 4)).save(voc / "SegmentationClass" / f"{i}.png")
    return voc


def write_sbd(root: Path, splits: dict[str, list[str]]) -> Path:
    """A benchmark_RELEASE/dataset tree; ``cls/<id>.mat`` holds GTcls.Segmentation = 7."""
    dataset = root / "benchmark_RELEASE" / "dataset"
    (dataset / "img").mkdir(parents=True)
    (dataset / "cls").mkdir()
    for split, ids in splits.items():
        (dataset / f"{split}.txt").write_text("\n".join(ids) + "\n")
        for i in ids:
            Image.new("RGB", (6, 4)).save(dataset / "img" / f"{i}.jpg")
            gt = {"GTcls": {"Segmentation": np.full((4, 6), 7, np.uint8)}}
            scipy.io.savemat(dataset / "cls" / f"{i}.mat", gt)
    return dataset


def test_voc_pairs_real_sample_every_root_spelling():
    for root in (SAMPLE, SAMPLE / "VOCdevkit", SAMPLE / "VOCdevkit" / "VOC2012"):
        files = voc_pairs(root, "train")
        assert len(files) == 12
    val = voc_pairs(SAMPLE, "val")
    assert len(val) == 8
    assert Path(val.images[0]).name == "2007_000033.jpg"
    assert Path(val.labels[0]).name == "2007_000033.png"
    assert len(voc_pairs(SAMPLE, "trainval")) == 20


def test_missing_root_and_split_file(tmp_path):
    with pytest.raises(DataError, match="dataset root not found"):
        voc_pairs(tmp_path / "nowhere", "train")
    with pytest.raises(DataError, match="dataset root not found"):
        sbd_pairs(tmp_path, "train")
    with pytest.raises(DataError, match=r"split file not found: .*trian\.txt"):
        voc_pairs(SAMPLE, "trian")


def test_missing_image_or_label_names_the_ids_or_is_skipped(tmp_path):
    voc = write_voc(tmp_path, {"train": ["a", "b", "c", "d"]})
    (voc / "JPEGImages" / "b.jpg").unlink()
    (voc / "SegmentationClass" / "d.png").unlink()
    with pytest.raises(DataError, match="2 of 4 image/label pairs") as error:
        voc_pairs(tmp_path, "train")
    assert "b.jpg (missing file)" in str(error.value)
    assert "d.png (missing file)" in str(error.value)
    log = SkipLog()
    files = voc_pairs(tmp_path, "train", on_error=log)
    assert [Path(p).stem for p in files.images] == ["a", "c"]
    assert len(log) == 2
    assert [Path(f).name for f, _ in log.entries] == ["b.jpg", "d.png"]


def test_sbd_pairs_read_mat_labels(tmp_path):
    write_sbd(tmp_path, {"train": ["x1", "x2"], "val": ["y1"]})
    files = sbd_pairs(tmp_path / "benchmark_RELEASE", "train")
    assert [Path(p).name for p in files.labels] == ["x1.mat", "x2.mat"]
    label = read_label(files.labels[0])
    assert label.dtype == np.uint8 and label.shape == (4, 6) and (label == 7).all()


def test_exclude_ids_is_the_split_arithmetic():
    sbd_train, sbd_val = ["s1", "s2", "v1"], ["s3", "s2", "v2"]
    voc_train, voc_val = ["t1", "s1"], ["v1", "v2"]
    assert exclude_ids(sbd_train + sbd_val + voc_train, voc_val) == ["s1", "s2", "s3", "t1"]
    voc2011_val = ["a", "b", "c", "d"]
    assert exclude_ids(voc2011_val, ["b", "x"], ["d"]) == ["a", "c"]  # seg11valid's definition


def test_train_aug_pairs_uses_voc_labels_where_voc_has_them(tmp_path):
    write_voc(tmp_path / "voc", {"train": ["t1", "s1"], "val": ["v1", "v2"]})
    write_sbd(tmp_path / "sbd", {"train": ["s1", "s2", "v1"], "val": ["s3", "s2", "v2"]})
    files = train_aug_pairs(tmp_path / "voc", tmp_path / "sbd")
    names = sorted(Path(p).name for p in files.labels)
    assert names == ["s1.png", "s2.mat", "s3.mat", "t1.png"]  # no v1, v2: VOC val
    assert [Path(p).stem for p in files.images] == [Path(p).stem for p in files.labels]


def test_seg11valid_is_the_shipped_736_ids(tmp_path):
    ids = seg11valid_ids()
    assert len(ids) == len(set(ids)) == 736
    assert ids == sorted(ids) and ids[0] == "2007_000033" and ids[-1] == "2011_003271"
    sample_val = (SAMPLE / "VOCdevkit/VOC2012/ImageSets/Segmentation/val.txt").read_text().split()
    assert set(sample_val) <= set(ids)  # all 8 sample val ids are VOC2011 val, not SBD train
    write_voc(tmp_path, {"val": ids[:3]})
    log = SkipLog()
    assert len(seg11valid_pairs(tmp_path, on_error=log)) == 3
    assert len(log) == 733 * 2


def test_from_lists_checks_existence_and_shards(tmp_path):
    for name in ("0.jpg", "0.png", "1.jpg", "1.png", "2.jpg", "2.png"):
        (tmp_path / name).write_bytes(b"x")
    images = [tmp_path / f"{i}.jpg" for i in range(3)]
    labels = [tmp_path / f"{i}.png" for i in range(3)]
    files = SegmentationFiles.from_lists(images, labels)
    assert files.images == tuple(str(p) for p in images)
    assert files.shard(2, 0).images == (str(images[0]), str(images[2]))
    assert files.shard(2, 1).labels == (str(labels[1]),)
    with pytest.raises(ValueError, match="shard index"):
        files.shard(2, 2)
    with pytest.raises(DataError, match="3 images but 2 labels"):
        SegmentationFiles.from_lists(images, labels[:2])
    with pytest.raises(DataError, match="nope.png"):
        SegmentationFiles.from_lists(images, labels[:2] + [tmp_path / "nope.png"])


def test_from_folders_matches_stems(tmp_path):
    (tmp_path / "img").mkdir()
    (tmp_path / "lab").mkdir()
    for stem in ("b", "a", "c"):
        (tmp_path / "img" / f"{stem}.jpg").write_bytes(b"x")
    for stem in ("a", "b", "d"):
        (tmp_path / "lab" / f"{stem}.png").write_bytes(b"x")
    (tmp_path / "lab" / "notes.txt").write_text("ignored")
    with pytest.raises(DataError, match=r"c\.jpg \(no label\).*d\.png \(no image\)"):
        SegmentationFiles.from_folders(tmp_path / "img", tmp_path / "lab")
    log = SkipLog()
    files = SegmentationFiles.from_folders(tmp_path / "img", tmp_path / "lab", on_error=log)
    assert [Path(p).name for p in files.images] == ["a.jpg", "b.jpg"]
    assert [Path(p).name for p in files.labels] == ["a.png", "b.png"]
    assert len(log) == 2
    (tmp_path / "img" / "a.png").write_bytes(b"x")
    with pytest.raises(DataError, match="two files for 'a'"):
        SegmentationFiles.from_folders(tmp_path / "img", tmp_path / "lab", on_error="skip")
