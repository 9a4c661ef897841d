"""tf.data pipelines: shapes, alignment of image and label, nearest-only labels, seeds, errors."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

from fcn.classes import IGNORE_LABEL
from fcn.data import (
    SAMPLE_DIR,
    Augmenter,
    SegmentationFiles,
    SkipLog,
    eval_dataset,
    read_pair,
    train_dataset,
    voc_pairs,
)
from fcn.preprocessing import MEAN_RGB

SAMPLE = SAMPLE_DIR  # the real VOC sample shipped with the package
H, W, BLOCK = 300, 400, 25


def coordinate_pair() -> tuple[np.ndarray, np.ndarray]:
    """An image whose red/green encode x/y smoothly (blue 0), and a label of 25-px blocks."""
    y, x = np.mgrid[0:H, 0:W]
    image = np.dstack([np.round(x * 255 / (W - 1)), np.round(y * 255 / (H - 1)), 0 * x])
    return image.astype(np.uint8), block_label(y, x).astype(np.uint8)


def block_label(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Class 1..20 of the block holding (y, x); neighbouring blocks always differ."""
    return ((y // BLOCK) * 7 + (x // BLOCK) * 3) % 20 + 1


RAMP, SIDE = 8, 32
"""Image value per pixel of the coordinate ramps of :func:`identity_pair` (uint8 holds 32
pixels at 1/8 px resolution), and their side."""


def identity_pair(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Pair ``n`` of a set whose pairs tell themselves apart: the image's red and green are
    its x and y (RAMP per pixel), its blue the pair's number (:func:`pair_number` reads it
    back; never MEAN_RGB's blue), and the label a random table of classes 1..20 of its own."""
    y, x = np.mgrid[0:SIDE, 0:SIDE]
    image = np.dstack([RAMP * x, RAMP * y, np.full_like(x, 10 + 40 * n)]).astype(np.uint8)
    table = np.random.default_rng(n).integers(1, 21, (SIDE, SIDE)).astype(np.uint8)
    return image, table


def pair_number(blue: int) -> int:
    assert (blue - 10) % 40 == 0, blue
    return (blue - 10) // 40


def assert_aligned(image: np.ndarray, label: np.ndarray, tables: list[np.ndarray]) -> int:
    """A crop of an :func:`identity_pair`: void exactly where the mean colour pads; one pair's
    number in every image pixel; and each labelled pixel whose image-encoded coordinate is
    clear of a tie between two source pixels holds that pair's table there, exactly. Returns
    the pair's number."""
    pad = label == IGNORE_LABEL
    assert ((image == MEAN_RGB).all(axis=-1) == pad).all(), "void only where the mean pads"
    (blue,) = np.unique(image[..., 2][~pad])  # one pair: every image pixel says which
    table = tables[pair_number(int(blue))]
    x, y = image[..., 0] / RAMP, image[..., 1] / RAMP
    clear = (np.abs(x - np.rint(x)) < 0.3) & (np.abs(y - np.rint(y)) < 0.3) & ~pad
    source = table[np.clip(np.rint(y), 0, SIDE - 1).astype(int),
                   np.clip(np.rint(x), 0, SIDE - 1).astype(int)]  # fmt: skip
    np.testing.assert_array_equal(label[clear], source[clear])
    assert clear.sum() >= 0.1 * (~pad).sum(), "a real check: a tenth of the labels or more"
    return pair_number(int(blue))


def write_pairs(folder: Path, pairs: list[tuple[np.ndarray, np.ndarray]]) -> SegmentationFiles:
    """Lossless PNG files for each pair, listed in order."""
    folder.mkdir(parents=True, exist_ok=True)
    for n, (image, label) in enumerate(pairs):
        Image.fromarray(image).save(folder / f"{n:03d}.img.png")
        Image.fromarray(label, mode="L").save(folder / f"{n:03d}.lab.png")
    return SegmentationFiles.from_lists(
        [folder / f"{n:03d}.img.png" for n in range(len(pairs))],
        [folder / f"{n:03d}.lab.png" for n in range(len(pairs))],
    )


def test_augmentation_keeps_image_and_label_aligned(tmp_path):
    """Through the augmenter and through tf.data (decoding, parallel augmentation, shuffling,
    batching) each crop's label is its own image's, pixel for pixel: six pairs that tell
    themselves apart, every one seen once per epoch."""
    pairs = [identity_pair(n) for n in range(6)]
    tables = [table for _, table in pairs]
    augment = Augmenter(crop_size=24, scale_range=(0.5, 2.0))
    for seed in range(30):
        assert assert_aligned(*augment(*pairs[seed % 6], seed), tables) == seed % 6
    files = write_pairs(tmp_path, pairs)
    dataset = train_dataset(files, crop_size=24, batch_size=2, seed=0, jitter=False)
    for _ in range(2):  # two epochs
        seen = [assert_aligned(image, label, tables)
                for images, labels in dataset
                for image, label in zip(images.numpy(), labels.numpy(), strict=True)]  # fmt: skip
        assert sorted(seen) == list(range(6)), seen


def test_flip_and_scale_really_happen():
    image, label = coordinate_pair()
    augment = Augmenter(crop_size=128, scale_range=(0.5, 2.0))
    slopes = []
    for seed in range(20):
        out, _ = augment(image, label, seed)
        slopes.append(np.diff(out[64, :, 0].astype(float)).mean())
    assert min(slopes) < -0.5 and max(slopes) > 0.5  # mirrored and not
    assert max(np.abs(slopes)) / min(np.abs(slopes)) > 2  # several scales


def test_labels_are_never_interpolated(tmp_path):
    rng = np.random.default_rng(0)
    label = rng.choice(np.array([0, 5, 20, 255], np.uint8), size=(97, 131))
    image = rng.integers(0, 256, (97, 131, 3), dtype=np.uint8)
    augment = Augmenter(crop_size=160, scale_range=(0.3, 3.0), jitter=True)
    for seed in range(20):
        _, out = augment(image, label, seed)
        assert out.shape == (160, 160) and out.dtype == np.uint8
        assert set(np.unique(out).tolist()) <= {0, 5, 20, 255}


def test_small_images_are_padded_with_mean_colour_and_void():
    image = np.full((50, 70, 3), 9, np.uint8)
    label = np.full((50, 70), 3, np.uint8)
    out_image, out_label = Augmenter(crop_size=100, scale_range=(1.0, 1.0))(image, label, 0)
    assert (out_label == 3).sum() == 50 * 70 and (out_image == 9).all(axis=-1).sum() == 50 * 70
    assert ((out_label == IGNORE_LABEL) == (out_image == MEAN_RGB).all(axis=-1)).all()


def test_train_dataset_on_real_voc_sample_shapes_and_labels():
    files = voc_pairs(SAMPLE, "trainval")
    dataset = train_dataset(files, crop_size=320, batch_size=8, seed=0)
    assert dataset.element_spec == (
        tf.TensorSpec((8, 320, 320, 3), tf.uint8),
        tf.TensorSpec((8, 320, 320), tf.uint8),
    )
    batches = list(dataset)
    assert len(batches) == 2  # 20 pairs, the last 4 do not fill a batch
    values = np.unique(np.concatenate([labels.numpy().ravel() for _, labels in batches]))
    assert set(values.tolist()) <= set(range(21)) | {255}


def test_seed_makes_epochs_reproducible_and_distinct():
    files = voc_pairs(SAMPLE, "train")

    def two_epochs(seed):
        dataset = train_dataset(files, crop_size=64, batch_size=4, seed=seed, jitter=True)
        return [np.concatenate([b.numpy().ravel() for pair in dataset for b in pair])
                for _ in range(2)]  # fmt: skip

    first, second = two_epochs(7), two_epochs(7)
    assert all((a == b).all() for a, b in zip(first, second, strict=True))
    assert not (first[0] == first[1]).all()  # a new shuffle and new crops every epoch
    assert not (two_epochs(8)[0] == first[0]).all()


def test_eval_dataset_is_full_size_in_order_and_unaugmented():
    files = voc_pairs(SAMPLE, "val")
    dataset = eval_dataset(files)
    assert dataset.element_spec == (
        tf.TensorSpec((None, None, 3), tf.uint8),
        tf.TensorSpec((None, None), tf.uint8),
    )
    pairs = list(dataset)
    assert len(pairs) == 8
    for (image, label), *paths in zip(pairs, files.images, files.labels, strict=True):
        expected_image, expected_label = read_pair(*paths)
        assert (image.numpy() == expected_image).all() and (label.numpy() == expected_label).all()
    assert pairs[0][1].shape == (366, 500)


def test_sharding_splits_the_work():
    files = voc_pairs(SAMPLE, "val")
    shapes = [[tuple(i.shape) for i, _ in eval_dataset(files.shard(2, k))] for k in (0, 1)]
    everything = [tuple(i.shape) for i, _ in eval_dataset(files)]
    assert shapes[0] == everything[0::2] and shapes[1] == everything[1::2]


@pytest.fixture
def broken_sample(tmp_path) -> Path:
    """The real sample with one val JPEG truncated and one val label overwritten by zero bytes."""
    root = tmp_path / "voc_sample"
    shutil.copytree(SAMPLE, root)
    voc = root / "VOCdevkit" / "VOC2012"
    jpeg = voc / "JPEGImages" / "2007_000042.jpg"
    jpeg.chmod(0o644)
    jpeg.write_bytes(jpeg.read_bytes()[:5000])
    png = voc / "SegmentationClass" / "2007_000663.png"
    png.chmod(0o644)
    png.write_bytes(b"")
    return root


def test_bad_files_inside_tf_data_raise_naming_the_file(broken_sample):
    files = voc_pairs(broken_sample, "val")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"DataError: .*2007_000042\.jpg"):
        list(eval_dataset(files))
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"DataError: .*\.(jpg|png)"):
        list(train_dataset(files, crop_size=64, batch_size=2))


def test_bad_files_can_be_skipped_and_counted(broken_sample):
    files = voc_pairs(broken_sample, "val")
    log = SkipLog()
    assert len(list(eval_dataset(files, on_error=log))) == 6
    assert sorted(Path(f).name for f, _ in log.entries) == ["2007_000042.jpg", "2007_000663.jpg"]
    assert "empty file" in dict(log.entries)[files.images[2]]
    log = SkipLog()
    assert len(list(train_dataset(files, crop_size=64, batch_size=2, on_error=log))) == 3
    assert len(log) == 2


def test_eval_dataset_shuffles_the_file_list_per_pass_when_asked():
    files = voc_pairs(SAMPLE / "VOCdevkit" / "VOC2012", "train")

    def order(dataset):
        return [int(label.sum()) for _, label in dataset.as_numpy_iterator()]

    in_order = order(eval_dataset(files))
    shuffled = eval_dataset(files, shuffle=True, seed=3)
    first, second = order(shuffled), order(shuffled)
    assert sorted(first) == sorted(second) == sorted(in_order)
    assert first != in_order and first != second  # a new order on each pass
    assert order(eval_dataset(files, shuffle=True, seed=3)) == first  # reproducible


ABANDON = """
import sys
from fcn.data import SegmentationFiles, eval_dataset, sample_voc_root, train_dataset, voc_pairs
count = int(sys.argv[1])
sample = voc_pairs(sample_voc_root(), "train")
repeat = -(-count // len(sample))
files = SegmentationFiles.from_lists(
    (sample.images * repeat)[:count], (sample.labels * repeat)[:count]
)
train = iter(train_dataset(files, crop_size=64, batch_size=2, seed=0))
evaluation = iter(eval_dataset(files, shuffle=True, seed=0))  # repeated pairs: not scored
next(train), next(evaluation)
print("one batch of each")
"""


@pytest.mark.parametrize("count", [20, 1000])
def test_abandoned_iterators_let_the_script_exit(count):
    """One batch taken from a train_dataset and an eval_dataset whose iterators are still alive
    when the script ends: without the atexit release the process aborted (20 files) or hung
    forever (100 and more)."""
    run = subprocess.run(
        [sys.executable, "-c", ABANDON, str(count)], capture_output=True, text=True,
        timeout=120, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "one batch of each"
