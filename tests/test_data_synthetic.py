"""The synthetic VOC-layout writer used by benchmarks and notebooks."""

from __future__ import annotations

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
