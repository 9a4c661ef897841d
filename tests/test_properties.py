"""Property tests (hypothesis) of the input contracts (README, "What each entry point accepts"):
every generated input gives the documented result, or is refused naming what was wrong.

Expected values are derived here, independently of the code under test: NumPy rotations for
EXIF orientations, a coordinate ramp for alignment, the reference ``score.py`` formulas."""

from __future__ import annotations

import dataclasses
import io
import os
import tempfile

import numpy as np
import pytest
import tensorflow as tf
from conftest import write_shapes
from hypothesis import assume, example, given
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from PIL import Image

import fcn
from fcn.classes import IGNORE_LABEL
from fcn.data import SegmentationFiles
from fcn.data.augment import Augmenter
from fcn.data.decode import read_image, read_label, read_pair
from fcn.data.errors import DataError
from fcn.metrics import ConfusionMatrix
from fcn.training.config import TrainConfig
from fcn.training.recipes import RECIPES
from fcn.training.train import _check_batches, input_fn

sides = st.integers(1, 12)
rgb8 = st.tuples(sides, sides).flatmap(lambda hw: arrays(np.uint8, (*hw, 3)))
grey8 = st.tuples(sides, sides).flatmap(lambda hw: arrays(np.uint8, hw))
FLOATS = [np.float16, np.float32, np.float64]


@given(rgb8, st.sampled_from(FLOATS))
def test_a_float_image_in_0_1_reads_as_its_uint8_version(image, dtype):
    as_float = (image.astype(np.float64) / 255).astype(dtype)
    np.testing.assert_array_equal(read_image(as_float), image)


@given(rgb8, st.sampled_from([np.float32, np.float64, np.int16, np.int32, np.int64, np.uint32]))
def test_a_0_255_image_of_another_dtype_reads_as_its_uint8_version(image, dtype):
    assume(image.max() > 1)  # all in 0..1 is the 0..1 convention (next test)
    np.testing.assert_array_equal(read_image(image.astype(dtype)), image)


def test_the_ambiguous_float_image_follows_the_documented_0_1_rule():
    np.testing.assert_array_equal(read_image(np.ones((1, 1, 3)))[0, 0], [255, 255, 255])
    np.testing.assert_array_equal(read_image(np.full((1, 1, 3), 2.0))[0, 0], [2, 2, 2])


@given(st.tuples(sides, sides).flatmap(lambda hw: arrays(np.uint16, hw)))
def test_a_16_bit_image_keeps_its_relative_values(image):
    out = read_image(image)[..., 0].astype(np.float64)
    assert np.abs(out - image * (255 / 65535)).max() <= 0.5
    order = np.argsort(image, axis=None, kind="stable")
    assert np.all(np.diff(out.ravel()[order]) >= 0)  # brighter never reads darker
    np.testing.assert_array_equal(read_image(image // 257 * 257)[..., 0], image // 257)


def pil_images(grey: np.ndarray) -> dict[str, tuple[Image.Image, np.ndarray]]:
    """The same grey picture in each PIL mode, with the RGB uint8 it must read as."""
    rgb = np.repeat(grey[..., None], 3, -1)
    alpha = (255 - grey)[..., None]
    palette = Image.frombytes("P", grey.shape[::-1], grey.tobytes())
    palette.putpalette(np.repeat(np.arange(256, dtype=np.uint8), 3).tolist())
    bilevel = grey > 127
    return {
        "L": (Image.fromarray(grey), rgb),
        "LA": (Image.fromarray(np.concatenate([grey[..., None], alpha], -1)), rgb),
        "P": (palette, rgb),
        "PA": (palette.convert("PA"), rgb),
        "RGB": (Image.fromarray(rgb), rgb),
        "RGBA": (Image.fromarray(np.concatenate([rgb, alpha], -1)), rgb),
        "CMYK": (Image.fromarray(rgb).convert("CMYK"), rgb),
        "I;16": (Image.fromarray(grey.astype(np.uint16) * 257), rgb),
        "I": (Image.fromarray(grey.astype(np.int32) * 257), rgb),
        "F": (Image.fromarray(grey.astype(np.float32) / 255), rgb),
        "1": (Image.fromarray(bilevel), np.repeat(bilevel[..., None] * np.uint8(255), 3, -1)),
    }


PNG_MODES = ("L", "LA", "P", "RGB", "RGBA", "I;16", "1")


@given(grey8, st.sampled_from(sorted(pil_images(np.zeros((1, 1), np.uint8)))))
def test_every_pil_mode_reads_as_its_rgb_picture(grey, mode):
    image, expected = pil_images(grey)[mode]
    assert image.mode == mode
    np.testing.assert_array_equal(read_image(image), expected, err_msg=mode)
    if mode in PNG_MODES:  # and from a file of that mode
        with tempfile.TemporaryDirectory() as folder:
            path = os.path.join(folder, "image.png")
            image.save(path)
            np.testing.assert_array_equal(read_image(path), expected, err_msg=f"{mode} file")


ORIENTATIONS = {  # EXIF 0x0112: the turn that shows the stored rows upright, in NumPy
    1: lambda a: a, 2: np.fliplr, 3: lambda a: np.rot90(a, 2), 4: np.flipud,
    5: lambda a: np.swapaxes(a, 0, 1), 6: lambda a: np.rot90(a, -1),
    7: lambda a: np.rot90(np.swapaxes(a, 0, 1), 2), 8: lambda a: np.rot90(a, 1),
}  # fmt: skip


def indexed(label: np.ndarray) -> Image.Image:
    """``label`` as a palette ('P') image with a full 256-colour palette, as VOC's are (with a
    shorter one PIL renumbers the indices it writes)."""
    image = Image.frombytes("P", label.shape[::-1], label.tobytes())
    image.putpalette(fcn.classes.voc_palette().ravel().tolist())
    return image


classes_map = st.tuples(sides, sides).flatmap(
    lambda hw: arrays(np.uint8, hw, elements=st.integers(0, 20))
)


@given(classes_map, st.sampled_from(sorted(ORIENTATIONS)))
def test_an_exif_orientation_turns_image_and_label_alike(label, orientation):
    """A photo and its label PNG carrying the same orientation tag: both turn upright, and
    still match pixel for pixel (the image encodes each pixel's class as 12 x class)."""
    with tempfile.TemporaryDirectory() as folder:
        exif = Image.Exif()
        exif[0x0112] = orientation
        image_path, label_path = os.path.join(folder, "i.png"), os.path.join(folder, "l.png")
        Image.fromarray(np.repeat(label[..., None] * 12, 3, -1)).save(image_path, exif=exif)
        indexed(label).save(label_path, exif=exif)
        image, read = read_pair(image_path, label_path)
    np.testing.assert_array_equal(read, ORIENTATIONS[orientation](label))
    np.testing.assert_array_equal(image[..., 0], read * 12)


RAMP = 8
"""Image value per pixel of the coordinate ramp (uint8 holds 32 pixels at 1/8 px resolution)."""


@given(
    table=st.tuples(st.integers(4, 32), st.integers(4, 32)).flatmap(
        lambda hw: arrays(np.uint8, hw, elements=st.integers(0, 20))
    ),
    crop=st.integers(8, 40),
    scale=st.tuples(st.floats(0.3, 1.0), st.floats(1.0, 2.5)),
    seed=st.integers(0, 2**31 - 1),
)  # fmt: skip
def test_augmentation_keeps_image_and_label_aligned_pixel_for_pixel(table, crop, scale, seed):
    """The image is a ramp of its own coordinates (x and y, RAMP per pixel); after any scale,
    pad, crop and flip, each labelled pixel's label is the class of the source pixel whose
    centre the image there says it came from (pixels at a tie of two sources excepted)."""
    h, w = table.shape
    ys, xs = np.mgrid[0:h, 0:w]
    image = np.stack([RAMP * xs, RAMP * ys, np.zeros_like(xs)], -1).astype(np.uint8)
    out, label = Augmenter(crop, scale)(image, table, seed)
    assert out.shape == (crop, crop, 3) and label.shape == (crop, crop)
    x, y = out[..., 0] / RAMP, out[..., 1] / RAMP
    clear = (np.abs(x - np.rint(x)) < 0.3) & (np.abs(y - np.rint(y)) < 0.3)
    labelled = label != IGNORE_LABEL
    rows, cols = np.clip(np.rint(y), 0, h - 1), np.clip(np.rint(x), 0, w - 1)
    source = table[rows.astype(int), cols.astype(int)]
    np.testing.assert_array_equal(label[labelled & clear], source[labelled & clear])
    assert set(np.unique(label)) <= set(np.unique(table)) | {IGNORE_LABEL}


def score_py(hist: np.ndarray):
    """The reference FCN ``score.py`` (Long et al.), from a histogram."""
    with np.errstate(divide="ignore", invalid="ignore"):
        acc = np.diag(hist).sum() / hist.sum()
        acc_cls = np.nanmean(np.diag(hist) / hist.sum(1))
        iu = np.diag(hist) / (hist.sum(1) + hist.sum(0) - np.diag(hist))
        mean_iu = np.nanmean(iu)
        freq = hist.sum(1) / hist.sum()
        fwavacc = (freq[freq > 0] * iu[freq > 0]).sum()
    return acc, acc_cls, mean_iu, fwavacc, iu


pairs = st.integers(1, 30).flatmap(
    lambda c: st.integers(0, 200).flatmap(
        lambda n: st.tuples(
            st.just(c),
            arrays(np.uint8, n, elements=st.one_of(st.integers(0, c - 1), st.just(255))),
            arrays(np.int32, n, elements=st.integers(0, c - 1)),
        )
    )
)


@given(pairs, st.integers(0, 200))
def test_the_confusion_matrix_of_any_pair_is_the_reference_one(pair, split):
    classes, labels, predictions = pair
    hist = np.zeros((classes, classes), np.int64)
    for truth, guess in zip(labels.tolist(), predictions.tolist()):
        if truth != IGNORE_LABEL:
            hist[truth, guess] += 1
    matrix = ConfusionMatrix(classes).update(labels, predictions)
    np.testing.assert_array_equal(matrix.counts, hist)
    merged = ConfusionMatrix(classes).update(labels[:split], predictions[:split]) + \
        ConfusionMatrix(classes).update(labels[split:], predictions[split:])  # fmt: skip
    np.testing.assert_array_equal(merged.counts, hist)
    scores, reference = matrix.scores(), score_py(hist.astype(np.float64))
    found = (scores.pixel_accuracy, scores.mean_accuracy, scores.mean_iou, scores.fw_iou)
    np.testing.assert_allclose(found, reference[:4], rtol=1e-12, equal_nan=True)
    np.testing.assert_allclose(scores.iou, reference[4], rtol=1e-12, equal_nan=True)


@given(pairs, st.sampled_from(["transposed", "label", "prediction", "float"]))
def test_the_confusion_matrix_refuses_what_it_cannot_count_by_name(pair, fault):
    classes, labels, predictions = pair
    assume(labels.size >= 2)
    labels, predictions = labels.reshape(2, -1) if labels.size % 2 == 0 else labels[None], \
        predictions.reshape(2, -1) if predictions.size % 2 == 0 else predictions[None]  # fmt: skip
    message = {
        "transposed": "differ in shape", "label": "labels hold", "prediction": "predictions hold",
        "float": "integer class indices",
    }[fault]  # fmt: skip
    if fault == "transposed":
        assume(labels.shape[0] != labels.shape[1])
        predictions = predictions.T
    elif fault == "label":
        labels = labels.copy()
        labels.flat[0] = classes if classes < IGNORE_LABEL else 254
    elif fault == "prediction":
        predictions = predictions.copy()
        predictions.flat[0] = classes
    else:
        predictions = predictions.astype(np.float32)
    matrix = ConfusionMatrix(classes)
    with pytest.raises(ValueError, match=message):
        matrix.update(labels, predictions)
    assert not matrix.counts.any()  # nothing added


@given(st.integers(1, IGNORE_LABEL), grey8, st.sampled_from(["L", "P", "I;16"]))
def test_label_files_read_as_their_indices_or_are_refused_naming_the_file(classes, label, mode):
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "label.png")
        if mode == "P":
            indexed(label).save(path)
        else:
            Image.fromarray(label.astype(np.uint16) if mode == "I;16" else label).save(path)
        outside = sorted({int(v) for v in np.unique(label) if v >= classes and v != 255})
        if outside:
            with pytest.raises(DataError, match=rf"{path}: label values \[{outside[0]}"):
                read_label(path, classes)
        else:
            np.testing.assert_array_equal(read_label(path, classes), label)


RANGES = {f.name: f.metadata["range"] for f in dataclasses.fields(TrainConfig)
          if "range" in f.metadata}  # fmt: skip
"""Each numeric setting's range, from its field."""


@given(st.sampled_from(sorted(RANGES)), st.data())
def test_every_out_of_range_setting_is_refused_naming_it(name, data):
    field_range = RANGES[name]
    low, high = field_range.low, field_range.high
    choices = [st.floats(-1e9, low, exclude_max=not field_range.open_low),
               st.sampled_from([float("nan"), float("inf"), -float("inf")])]  # fmt: skip
    if high < 2**30:
        choices.append(st.floats(high, 1e12, exclude_min=not field_range.open_high))
    if field_range.whole:
        choices.append(st.integers(int(low), int(min(high, 1e6))).map(lambda v: v + 0.5))
    value = data.draw(st.one_of(choices))
    with pytest.raises(ValueError, match=rf"^{name}="):
        TrainConfig(**{name: value})


@given(st.integers(0, 60), st.integers(1, 8))
def test_shards_partition_any_list(count, shards):
    files = SegmentationFiles(tuple(f"{i}.jpg" for i in range(count)),
                              tuple(f"{i}.png" for i in range(count)))  # fmt: skip
    parts = [files.shard(shards, k) for k in range(shards)]
    assert sorted(p for part in parts for p in part.images) == sorted(files.images)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    for part in parts:
        assert [files.images.index(i) for i in part.images] == [
            files.labels.index(lab) for lab in part.labels
        ]  # still paired


@given(st.lists(st.integers(0, 6), max_size=12))
def test_an_evaluation_list_with_a_repeated_pair_is_refused_and_a_training_list_is_not(ids):
    files = SegmentationFiles(tuple(f"{i}.jpg" for i in ids), tuple(f"{i}.png" for i in ids))
    repeated = len(set(ids)) < len(ids)
    assert bool(files.duplicates()) == repeated
    if not ids:
        with pytest.raises(DataError, match="no image/label pairs"):
            fcn.data.eval_dataset(files)
    elif repeated:
        first = next(i for k, i in enumerate(ids) if i in ids[:k])
        with pytest.raises(DataError, match=rf"first {first}.jpg: an evaluation would count"):
            fcn.data.eval_dataset(files)
    else:
        fcn.data.eval_dataset(files)  # builds (nothing is read until iterated)
    if ids:
        fcn.data.train_dataset(files)  # oversampling by repetition is allowed


@pytest.mark.parametrize("bad, message", [
    (np.zeros((3, 9, 7)), "looks channels-first, pass np.moveaxis"),
    (np.zeros((2, 5, 5, 3)), "that is a batch"),
    (np.full((2, 2), np.nan), "NaN or infinite"),
    (np.full((2, 2), 256.0), "must lie in 0..1 or in 0..255"),
    (np.full((2, 2), -1), "must lie in 0..255"),
    (np.zeros((0, 4, 3)), "at least one pixel"),
    (np.zeros((2, 2), complex), "pass uint8, uint16, bool or floats"),
])  # fmt: skip
def test_images_read_image_cannot_take_are_refused_with_the_fix(bad, message):
    with pytest.raises(DataError, match=message):
        read_image(bad)


def test_a_training_list_smaller_than_one_batch_is_refused_by_name(tmp_path):
    files = write_shapes(tmp_path / "shapes", 3, size=32)
    run = dict(val_files=(), run_dir=tmp_path / "run", weights=None, width=1 / 16,
               num_classes=3, crop_size=32, epochs=1, verbose=0)  # fmt: skip
    with pytest.raises(ValueError, match=r"train_files holds 3 .* fewer than one batch of 4: "
                       r"pass batch_size <= 3"):  # fmt: skip
        fcn.train(train_files=files, batch_size=4, **run)
    with pytest.raises(ValueError, match="train_files is empty"):
        fcn.train(train_files=files.shard(4, 3), batch_size=1, **run)
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_evaluate_reads_pairs_as_the_contract_says(tiny_fcn8s):
    """A float 0..1 image scores as its uint8 version; a transposed label, or one with a value
    outside the classes, is refused naming the pair."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (40, 56, 3)).astype(np.uint8)
    label = rng.integers(0, 21, (40, 56)).astype(np.uint8)
    as_uint8 = fcn.evaluate(tiny_fcn8s, [(image, label)]).confusion
    as_float = fcn.evaluate(tiny_fcn8s, [(image / 255, label)]).confusion
    np.testing.assert_array_equal(as_float, as_uint8)
    with pytest.raises(DataError, match="pair 0 of the evaluation data: the label is 40x56"):
        fcn.evaluate(tiny_fcn8s, [(image, label.T)])
    with pytest.raises(DataError, match=r"pair 1 .* label values \[21\]"):
        fcn.evaluate(tiny_fcn8s, [(image, label), (image, np.full((40, 56), 21))])


def test_predict_gives_a_float_image_the_labels_of_its_uint8_version(tiny_fcn8s):
    image = np.random.default_rng(1).integers(0, 256, (33, 47, 3)).astype(np.uint8)
    np.testing.assert_array_equal(
        fcn.predict(image / 255, tiny_fcn8s), fcn.predict(image, tiny_fcn8s)
    )
    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, "PNG")
    np.testing.assert_array_equal(
        fcn.predict(Image.open(buffer), tiny_fcn8s), fcn.predict(image, tiny_fcn8s)
    )


@pytest.mark.parametrize("call, message", [
    (lambda: fcn.build_model("fcn8s", 0, weights=None, width=1 / 16), "num_classes=0"),
    (lambda: fcn.build_model("fcn8s", 3, weights=None, width=0), "width=0"),
    (lambda: fcn.MeanIoU(0), r"counts 1..255 classes \(255 is void\), got 0"),
    (lambda: ConfusionMatrix(256), r"counts 1..255 classes \(255 is void\), got 256"),
])  # fmt: skip
def test_class_counts_and_widths_out_of_range_are_refused_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_evaluating_no_pair_is_refused(tiny_fcn8s):
    with pytest.raises(DataError, match="hold no image/label pair"):
        fcn.evaluate(tiny_fcn8s, [])


@pytest.fixture(scope="module")
def small_pairs(tmp_path_factory):
    return write_shapes(tmp_path_factory.mktemp("pairs"), 9, size=16)


def fills_a_batch(files, recipe, replicas: int, workers: int, worker: int) -> bool:
    """Whether worker ``worker``'s real input pipeline gives a full per-replica batch (not:
    a batch that does not split over the replicas, an empty shard, one ending first)."""
    context = tf.distribute.InputContext(workers, worker, replicas)
    try:
        per_replica = context.get_per_replica_batch_size(recipe.batch_size)
        images, labels = next(iter(input_fn(files, recipe, 0, 3)(context)))
    except (ValueError, DataError, StopIteration):
        return False
    return images.shape[0] == labels.shape[0] == per_replica


@given(count=st.integers(0, 9), batch=st.integers(1, 8), replicas=st.sampled_from([1, 2, 4]),
       workers=st.sampled_from([1, 2, 3]))  # fmt: skip
@example(count=4, batch=2, replicas=1, workers=2)  # accepted: two pairs per worker
@example(count=4, batch=2, replicas=2, workers=3)  # accepted: one per worker and replica
@example(count=3, batch=4, replicas=1, workers=1)  # refused: fewer pairs than a batch
def test_any_list_length_either_fills_every_workers_batches_or_is_refused(
    small_pairs, count, batch, replicas, workers
):
    """Against the real input pipeline: a training list is accepted for (batch, replicas,
    workers) exactly when every worker's pipeline gives a full per-replica batch; one refused
    names train_files (or batch_size) and what to pass instead. (Refusing every list fails
    on the accepted examples, accepting every one on the refused.)"""
    files = SegmentationFiles(small_pairs.images[:count], small_pairs.labels[:count])
    recipe = dataclasses.replace(RECIPES["practical"], crop_size=16, batch_size=batch)
    fills = all(fills_a_batch(files, recipe, replicas, workers, w) for w in range(workers))
    try:
        _check_batches(files, recipe, replicas, workers)
    except ValueError as error:
        assert not fills, f"refused a list that every worker's pipeline fills: {error}"
        assert str(error).startswith(("train_files", "batch_size"))
        assert "pass" in str(error) or "nothing to train" in str(error)
        return
    assert fills, "accepted a list that some worker's pipeline cannot fill a batch from"
