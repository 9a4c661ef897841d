"""The synthetic VOC-layout writer used by benchmarks and notebooks."""

from __future__ import annotations

import collections
import threading

import numpy as np

from fcn.data import read_pair, voc_pairs, write_synthetic_voc


def test_synthetic_voc_is_valid_deterministic_and_grows(tmp_path):
    voc = write_synthetic_voc(
        tmp_path / "a", 5, {"train": 3, "val": 5}, shapes=[(60, 80), (80, 60)]
    )
    assert len(voc_pairs(voc, "train")) == 3
    pairs = voc_pairs(voc, "val")
    shapes = []
    for image_path, label_path in zip(pairs.images, pairs.labels):
        image, label = read_pair(image_path, label_path)  # checked sizes and label values
        shapes.append(label.shape)
        assert 255 in label and (label < 21).any()
    assert shapes == [(60, 80), (80, 60), (60, 80), (80, 60), (60, 80)]
    again = write_synthetic_voc(tmp_path / "b", 7, shapes=[(60, 80), (80, 60)])
    first, second = voc_pairs(voc, "val"), voc_pairs(again, "train")
    assert len(second) == 7
    for i in range(5):  # pair i depends on the seed and i only, not on the count
        np.testing.assert_array_equal(
            read_pair(first.images[i], first.labels[i])[1],
            read_pair(second.images[i], second.labels[i])[1],
        )


def test_a_folder_being_written_is_always_read_whole(tmp_path):
    """Two threads fill one new folder and rewrite it over and over while this one lists and
    reads it, as the workers of a cluster on one machine do: every split it reads lists all the
    pairs, every pair listed reads whole, and no temporary file is left. Written in place, a
    quarter of the listings came back empty (seen: 10,458 of 41,342 in 2 s), and a resumed
    two-worker run failed in CI when one worker read no training pairs."""
    root, count, repeats = tmp_path / "data", 6, 300

    def write():
        for _ in range(repeats):
            write_synthetic_voc(root, count, {"train": count, "val": 2}, shapes=[(40, 30)])

    writers = [threading.Thread(target=write) for _ in range(2)]
    for writer in writers:
        writer.start()
    split = root / "VOCdevkit" / "VOC2012" / "ImageSets" / "Segmentation" / "train.txt"
    listed = collections.Counter()
    while any(writer.is_alive() for writer in writers):
        if not split.exists():  # the first pairs are still being written
            continue
        files = voc_pairs(root, "train")  # a listed pair with a file missing: DataError
        listed[len(files)] += 1
        for image_path, label_path in zip(files.images, files.labels, strict=True):
            image, label = read_pair(image_path, label_path)
            assert image.shape == (40, 30, 3) and label.shape == (40, 30)
    for writer in writers:
        writer.join()
    assert set(listed) == {count} and listed[count] >= 10, listed  # read while written
    assert not list(root.rglob(".*.tmp*"))  # write_whole's temporary names
