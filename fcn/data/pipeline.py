"""tf.data pipelines that stream pairs from disk: memory is bounded by the batch, not the dataset.

Only the file list is shuffled; images are decoded (PIL, scipy) and augmented (albumentations)
in parallel ``tf.numpy_function`` calls and a fixed, small number of batches is prefetched.
Decoded data is never cached. Labels stay sparse uint8 class indices with 255 for void.

An iterator can be abandoned: a script that takes one batch and ends exits promptly (see
``_release_iterators_at_exit``).
"""

from __future__ import annotations

import atexit
import gc
import os

import numpy as np
import tensorflow as tf

from fcn._compat import close_iterator
from fcn.classes import NUM_CLASSES
from fcn.data.augment import Augmenter
from fcn.data.decode import read_pair
from fcn.data.errors import DataError, OnError, SkipLog, skip_log
from fcn.data.files import SegmentationFiles

PREFETCH_BATCHES = 2
"""Batches (training) or images (evaluation) decoded ahead of the consumer."""


@atexit.register
def _release_iterators_at_exit() -> None:
    """Close every live tf.data iterator while Python can still run the decoders.

    The decoders are Python (``tf.numpy_function``), called from tf.data's threads. An iterator
    still referenced when the script ends (``it = iter(dataset); next(it)``) is otherwise freed
    during interpreter finalisation, when those threads can no longer take the GIL: the
    process hangs forever or aborts (``terminate called without an active exception``).
    atexit functions run before finalisation, so closing the iterators here
    (``fcn._compat.close_iterator``) stops their threads cleanly. It leaves the iterators
    unusable, which no code after atexit can notice.
    """
    for obj in gc.get_objects():
        if isinstance(obj, tf.data.Iterator):
            close_iterator(obj)


def train_dataset(
    files: SegmentationFiles,
    *,
    crop_size: int = 320,
    batch_size: int = 8,
    seed: int | None = None,
    scale_range: tuple[float, float] = (0.5, 2.0),
    jitter: bool = False,
    num_classes: int = NUM_CLASSES,
    on_error: OnError = "raise",
    parallel_calls: int | None = None,
) -> tf.data.Dataset:
    """Shuffled, augmented batches of fixed-size crops, one pass over ``files`` per epoch.

    Each epoch reshuffles the file list and draws new augmentations; with ``seed`` set the
    sequence of epochs is reproducible. Pairs that do not fill a whole batch at the end of an
    epoch are dropped. Use ``files.shard(n, i)`` for one of ``n`` workers.

    Args:
        files: image/label pairs.
        crop_size: side of the square crops, pixels.
        batch_size: crops per batch.
        seed: makes the order and the augmentation reproducible; None draws fresh ones.
        scale_range: (min, max) random scale factor applied before cropping.
        jitter: also randomise brightness, contrast, saturation and hue.
        num_classes: label values must be in ``0..num_classes-1`` or 255.
        on_error: a bad file raises (surfacing as ``tf.errors.InvalidArgumentError`` whose
            message names the file) or, if skipping, its pair is dropped and recorded.
        parallel_calls: decode/augment threads; None lets tf.data choose.

    Returns:
        Dataset of ``(image uint8 (batch, crop, crop, 3), label uint8 (batch, crop, crop))``;
        images are RGB 0..255 (the model does its own preprocessing).

    Examples:
        >>> from fcn.data import sample_voc_root, voc_pairs
        >>> files = voc_pairs(sample_voc_root(), "train")
        >>> for images, labels in train_dataset(files, crop_size=64, batch_size=4, seed=0).take(1):
        ...     print(images.shape, images.dtype.name, labels.shape, labels.dtype.name)
        (4, 64, 64, 3) uint8 (4, 64, 64) uint8
    """
    augment = Augmenter(crop_size, scale_range, jitter)
    log = skip_log(on_error)
    shape = (crop_size, crop_size)

    def load(image_path: bytes, label_path: bytes, sample_seed: np.int64):
        pair = _read(image_path, label_path, num_classes, log)
        if pair is None:
            return np.zeros((*shape, 3), np.uint8), np.zeros(shape, np.uint8), False
        return (*augment(*pair, int(sample_seed)), True)

    pairs = _file_dataset(files).shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    sample_seeds = None if seed is None else seed + 1  # a stream apart from the shuffle's
    seeds = tf.data.Dataset.random(seed=sample_seeds, rerandomize_each_iteration=True)
    dataset = tf.data.Dataset.zip(pairs, seeds).map(
        lambda paths, sample_seed: _call(load, (*paths, sample_seed), shape),
        num_parallel_calls=parallel_calls or tf.data.AUTOTUNE,
    )
    dataset = _drop_skipped(dataset, log)
    return dataset.batch(batch_size, drop_remainder=True).prefetch(PREFETCH_BATCHES)


def eval_dataset(
    files: SegmentationFiles,
    *,
    num_classes: int = NUM_CLASSES,
    on_error: OnError = "raise",
    parallel_calls: int | None = None,
    shuffle: bool = False,
    seed: int | None = None,
) -> tf.data.Dataset:
    """Every pair of ``files``, full resolution, not augmented, not batched.

    Args:
        files: image/label pairs, e.g. ``voc_pairs(root, "val")``.
        num_classes, on_error, parallel_calls: as in [`train_dataset`][].
        shuffle: visit the pairs in a new random order on each pass (the FILE LIST is shuffled;
            the paper's whole-image training); default: in order, as evaluation wants, each
            pair once (a pair listed twice raises DataError: its pixels would count twice).
        seed: makes the shuffled order reproducible.

    Returns:
        Dataset of ``(image uint8 (H, W, 3), label uint8 (H, W))``, H and W varying per image.

    Examples:
        >>> from fcn.data import sample_voc_root, voc_pairs
        >>> for image, label in eval_dataset(voc_pairs(sample_voc_root(), "val")).take(2):
        ...     print(image.shape, label.shape)
        (366, 500, 3) (366, 500)
        (335, 500, 3) (335, 500)
    """
    repeated = [] if shuffle else files.duplicates()
    if repeated:
        raise DataError(
            f"{len(repeated)} image/label pairs occur more than once, first {repeated[0][0]}: an "
            "evaluation would count their pixels twice; remove the copies (a training list may "
            "repeat pairs to oversample them)"
        )
    log = skip_log(on_error)

    def load(image_path: bytes, label_path: bytes):
        pair = _read(image_path, label_path, num_classes, log)
        if pair is None:
            return np.zeros((1, 1, 3), np.uint8), np.zeros((1, 1), np.uint8), False
        return (*pair, True)

    paths = _file_dataset(files)
    if shuffle:
        paths = paths.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    dataset = paths.map(
        lambda image_path, label_path: _call(load, (image_path, label_path), (None, None)),
        num_parallel_calls=parallel_calls or tf.data.AUTOTUNE,
    )
    return _drop_skipped(dataset, log).prefetch(PREFETCH_BATCHES)


def _file_dataset(files: SegmentationFiles) -> tf.data.Dataset:
    if not len(files):
        raise DataError("no image/label pairs to read")
    return tf.data.Dataset.from_tensor_slices((list(files.images), list(files.labels)))


def _read(
    image_path: bytes, label_path: bytes, num_classes: int, log: SkipLog | None
) -> tuple[np.ndarray, np.ndarray] | None:
    """The checked pair, or None if it is bad and ``log`` records the skip."""
    try:
        return read_pair(os.fsdecode(image_path), os.fsdecode(label_path), num_classes)
    except DataError as error:
        if log is None:
            raise
        log.add(os.fsdecode(image_path), str(error))
        return None


def _call(load, args, shape: tuple[int | None, int | None]):
    """``load(*args) -> (image, label, ok)`` as a TensorFlow op with static shapes."""
    image, label, ok = tf.numpy_function(load, args, (tf.uint8, tf.uint8, tf.bool))
    image.set_shape((*shape, 3))
    label.set_shape(shape)
    ok.set_shape(())
    return image, label, ok


def _drop_skipped(dataset: tf.data.Dataset, log: SkipLog | None) -> tf.data.Dataset:
    if log is not None:
        dataset = dataset.filter(lambda image, label, ok: ok)
    return dataset.map(lambda image, label, ok: (image, label))
