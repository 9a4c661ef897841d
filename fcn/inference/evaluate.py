"""Memory-bounded evaluation at full resolution: one streaming confusion matrix, no predictions.

Images are scored against their original label maps, within a
[`Budget`][fcn.inference.budget.Budget]: images of identical size are batched together up to its
``batch_pixels`` (an FCN's logits at a pixel depend on pixels ~220 away, so padding images to a
common canvas would change them; equal sizes keep batching exact), every other image runs
alone, and an image above its ``max_pixels`` runs in overlapping tiles
([`fcn.inference.tiling`][]). The forward pass streams through the image in bands of rows and
leaves only class indices ([`fcn.inference.streamed`][]); they become int64 confusion counts
([`ConfusionMatrix`][]), ``CONFUSION_PIXELS`` at a time; only the (C, C) matrix
is kept. Peak memory is one chunk plus a small buffer of not yet batched uint8 images, whatever
the number of images.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator

import keras
import numpy as np
import tensorflow as tf

from fcn.classes import default_class_names
from fcn.data import eval_dataset, voc_pairs
from fcn.data.decode import check_label, read_image
from fcn.data.errors import DataError, data_errors_named
from fcn.inference import budget
from fcn.inference.litert import LiteRTModel
from fcn.inference.precision import in_precision
from fcn.inference.predict import inference_model, predict_pieces
from fcn.inference.streamed import compiled_forward, streams
from fcn.inference.tiling import DEFAULT_MARGIN
from fcn.metrics import ConfusionMatrix
from fcn.model import class_names as model_class_names
from fcn.options import Precision
from fcn.results import EvaluationResult


def _pairs(data, split: str, num_classes: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    if isinstance(data, (str, os.PathLike)):
        data = eval_dataset(voc_pairs(data, split), num_classes=num_classes)
    if isinstance(data, tf.data.Dataset):
        data = data.as_numpy_iterator()
    for index, (image, label) in enumerate(data):
        name = f"pair {index} of the evaluation data"
        image = read_image(image)  # uint8 (H, W, 3) comes back as it is
        yield image, check_label(label, num_classes, name, image.shape[:2])


def _batches(
    pairs: Iterable[tuple[np.ndarray, np.ndarray]], max_pixels: int
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Group pairs of equal size into batches of at most ``max_pixels`` pixels (or one image).

    Yields (N, H, W, 3) images and (N, H, W) labels. Images wait for batch mates while the
    waiting pixels stay under ``budget.BUFFER_CHUNKS * max_pixels``; then the fullest size goes
    first.
    """
    waiting: dict[tuple[int, int], list] = {}

    def flush(size):
        group = waiting.pop(size)
        if len(group) == 1:  # a view, not a copy of a possibly huge image
            return group[0][0][None], group[0][1][None]
        return np.stack([i for i, _ in group]), np.stack([lab for _, lab in group])

    def pixels(size):
        return size[0] * size[1] * len(waiting[size])

    for image, label in pairs:
        size = image.shape[:2]
        waiting.setdefault(size, []).append((image, label))
        if pixels(size) + size[0] * size[1] > max_pixels:
            yield flush(size)
        while sum(pixels(s) for s in waiting) > budget.BUFFER_CHUNKS * max_pixels:
            yield flush(max(waiting, key=pixels))
    while waiting:
        yield flush(next(iter(waiting)))


def evaluate(
    model: keras.Model | LiteRTModel | str | os.PathLike,
    data: str | os.PathLike | tf.data.Dataset | Iterable[tuple[np.ndarray, np.ndarray]],
    split: str = "val",
    *,
    max_pixels: int | None = None,
    margin: int = DEFAULT_MARGIN,
    class_names: tuple[str, ...] | None = None,
    precision: Precision | None = "auto",
) -> EvaluationResult:
    """Score ``model`` on ``data`` at full resolution, as the reference FCN ``score.py`` does.

    Args:
        model: image (N, H, W, 3) RGB 0..255 -> logits (N, H, W, C), e.g. [`fcn.build_model`][];
            a ``.keras`` path or a known name ([`fcn.load_model`][] in ``precision``); or a
            LiteRT file of [`fcn.export_model`][] (float or int8; its path or a
            [`LiteRTModel`][]), every image run in windows of its export size
            ([`fcn.inference.litert`][]): ``max_pixels`` and ``precision`` do not apply to it,
            and its classes are named by ``class_names`` (a LiteRT file stores no names).
        data: a VOC root (read lazily with ``fcn.data.voc_pairs(data, split)`` and
            ``fcn.data.eval_dataset``), or an unbatched ``tf.data.Dataset`` or any iterable of
            ``(image, label)`` pairs: an image as [`fcn.data.read_image`][] takes it (uint8,
            float 0..1 or 0..255, 16-bit, grey, ...), its label (H, W) integer class indices
            in ``0..C-1`` or 255 (void, not scored), of the image's height and width (anything
            else is refused, naming the pair). Sizes may differ from pair to pair.
        split: VOC image set when ``data`` is a root (``"val"``, ``"train"``, ...).
        max_pixels: most input pixels per forward pass (batch x H x W); bounds peak memory.
            Larger images run in tiles of at most this size. Default:
            [`fcn.inference.budget.Budget.default`][] (images whole up to 25M pixels for an
            FCN that streams, batches up to 2M).
        margin: context (pixels, multiple of 32) around each tile; see
            [`fcn.inference.tiling`][].
        class_names: C names for the report; default: the model's
            ([`fcn.model.class_names`][]).
        precision: ``"auto"`` (bfloat16 where the hardware has it natively, else float32),
            ``"float32"``, ``"bfloat16"``, or None: the model as it is
            ([`fcn.inference.precision`][]).

    Returns:
        An [`EvaluationResult`][]: pixel accuracy, mean accuracy, mean IoU,
        frequency-weighted IoU, per-class IoU, the int64 confusion matrix, images and pixels.

    Examples:
        >>> import fcn
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> image, label = np.zeros((40, 60, 3), np.uint8), np.zeros((40, 60), np.uint8)
        >>> label[:10] = 255  # void: not scored
        >>> result = evaluate(model, [(image, label)] * 2)
        >>> result.num_images, result.confusion.shape, int(result.confusion.sum())
        (2, (21, 21), 3600)
    """
    if not isinstance(model, keras.Model):  # a path, a known name or a LiteRT file
        model = inference_model(model, "auto" if precision is None else precision, max_pixels)
    if isinstance(model, LiteRTModel):
        num_classes = model.num_classes
        class_names = default_class_names(num_classes) if class_names is None else class_names
    else:
        num_classes = model.output_shape[-1]
        class_names = model_class_names(model) if class_names is None else class_names
        model = in_precision(model, precision)
    matrix = ConfusionMatrix(num_classes)

    def count(labels, predictions):
        labels, predictions = np.reshape(labels, [-1]), tf.reshape(predictions, [-1])
        for start in range(0, labels.size, budget.CONFUSION_PIXELS):
            part = slice(start, start + budget.CONFUSION_PIXELS)
            # labels were checked on the way in, predictions are an argmax: no second check
            counts = ConfusionMatrix.count(labels[part], predictions[part], num_classes)
            matrix.counts += counts.numpy()

    num_images = 0

    def counted(pairs, whole):
        """Count the pairs ``whole`` does not take (they are yielded, to be batched)."""
        nonlocal num_images
        for image, label in pairs:
            num_images += 1
            if whole(image):
                yield image, label
                continue
            pieces = predict_pieces(model, image, max_pixels, margin, "labels")
            for (rows, cols), predictions in pieces:
                count(label[rows, cols], predictions)

    with data_errors_named():
        if isinstance(model, LiteRTModel):  # windows of its size, one image at a time
            for _ in counted(_pairs(data, split, num_classes), lambda image: False):
                pass
        else:
            limits = budget.Budget.default(streams(model), max_pixels)
            forward = compiled_forward(model, "labels")
            pairs = counted(
                _pairs(data, split, num_classes), lambda image: not limits.tiles(*image.shape[:2])
            )
            for images, labels in _batches(pairs, limits.batch_pixels):
                count(labels, forward(images))
    if not num_images:
        raise DataError("the evaluation data hold no image/label pair: there is nothing to score")
    return EvaluationResult(matrix, tuple(class_names), num_images)


class EvaluationCallback(keras.callbacks.Callback):
    """Evaluate on a validation set every ``every`` epochs; write the scores into the logs.

    Adds ``val_mean_iou``, ``val_pixel_accuracy``, ``val_mean_accuracy`` and ``val_fw_iou``
    (fractions) to the epoch logs, so that a later callback, e.g.
    ``ModelCheckpoint(monitor="val_mean_iou", mode="max")``, sees them: list this one first.
    ``data`` must be re-iterable (a VOC root, a ``tf.data.Dataset``, a list). The last result is
    kept in [`result`][fcn.inference.evaluate.EvaluationCallback]. With ``every > 1`` the other
    epochs have no ``val_*`` scores, and ``ModelCheckpoint(save_best_only=True)`` skips them with a
    warning. An epoch after which training stops (``model.stop_training``, e.g. non-finite weights)
    is not evaluated. It evaluates the model in the precision it trains in (``precision=None``
    unless ``evaluate_kwargs`` say otherwise), so that no copy of it is made.

    Examples:
        >>> import fcn
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        >>> x, y = np.zeros((1, 32, 32, 3), np.uint8), np.zeros((1, 32, 32), np.uint8)
        >>> history = model.fit(x, y, verbose=0, callbacks=[EvaluationCallback(list(zip(x, y)))])
        >>> sorted(history.history)
        ['loss', 'val_fw_iou', 'val_mean_accuracy', 'val_mean_iou', 'val_pixel_accuracy']
    """

    def __init__(self, data, every: int = 1, split: str = "val", **evaluate_kwargs):
        super().__init__()
        self.data, self.every, self.split = data, every, split
        self.evaluate_kwargs = {"precision": None, **evaluate_kwargs}
        self.result: EvaluationResult | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if (epoch + 1) % self.every or self.model.stop_training:  # e.g. a NaN: no use
            return
        self.result = evaluate(self.model, self.data, self.split, **self.evaluate_kwargs)
        if logs is not None:
            logs.update({f"val_{k}": v for k, v in self.result.summary().items()})
