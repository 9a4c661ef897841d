"""The batch that fits: a training step's memory estimate, and probing by running steps.

[`find_batch_size`][] runs real training steps of growing batches (and on a CPU
extrapolates the measured growth per crop: [`extrapolate_batch_size`][]), so a user never
finds the batch by trial and error; [`training_memory_estimate`][] is the estimate that
[`fcn.train`][] quotes when a step does not fit.
"""

from __future__ import annotations

import resource
from dataclasses import dataclass

import keras
import numpy as np
import tensorflow as tf

from fcn.device import available_host_memory
from fcn.training.loop import trained_tape
from fcn.training.loss import segmentation_loss
from fcn.training.optimizer import CaffeSGD, update_order


def training_memory_estimate(model: keras.Model, crop_size: int, batch_size: int) -> int:
    """Rough bytes of one training step: weights, momentum and one weight-sized allowance for
    the gradients in flight and the allocator's pool, plus 1.5x every layer's activation for
    ``batch_size`` crops of ``crop_size`` pixels (4-byte floats): the activations the backward
    pass keeps and half again for the gradients it is computing.

    The 1.5 is measured: ``benchmarks/vs_pytorch.py --estimate`` (full FCN-8s, CPU RSS above
    ``import fcn``, oneDNN) put the step at 1.27-1.46x the activations per added crop, and this
    estimate within 0.88-1.05x of the measured peak at crops 320 and 500, batches 1, 2 and 4
    (``benchmarks/README.md``).

    Examples:
        >>> from fcn import build_model
        >>> model = build_model("fcn8s", weights=None, width=1 / 16)
        >>> training_memory_estimate(model, 320, 2) > training_memory_estimate(model, 320, 1)
        True
    """
    probe = keras.Model(model.input, [layer.output for layer in model.layers[1:]])
    specs = probe.compute_output_spec(keras.KerasTensor((1, crop_size, crop_size, 3)))
    activations = sum(int(np.prod(spec.shape[1:])) for spec in specs)
    return int(4 * (3 * model.count_params() + 1.5 * batch_size * activations))


def _reset_peak_memory() -> None:
    """Start a new peak: the first GPU's allocator peak, else this process's VmHWM (Linux:
    reset to the current RSS; elsewhere the peak cannot be reset and only grows)."""
    if tf.config.list_logical_devices("GPU"):
        tf.config.experimental.reset_memory_stats("GPU:0")
        return
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def _peak_memory_bytes() -> int:
    """Peak device memory since ``_reset_peak_memory``: the first GPU's allocator peak,
    else this process's peak RSS (VmHWM)."""
    if tf.config.list_logical_devices("GPU"):
        return int(tf.config.experimental.get_memory_info("GPU:0")["peak"])
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024



@dataclass(frozen=True)
class BatchSizeReport:
    """Outcome of [`find_batch_size`][].

    Attributes:
        batch_size: the largest batch that fitted (0 if not even one crop did).
        crop_size: crop side the probes used, pixels.
        peak_bytes: measured peak memory per probed batch size that ran (bytes).
        memory_limit: the limit the probes were held to (bytes; None: only real OOM errors).

    Examples:
        >>> report = BatchSizeReport(4, 320, {1: 3 * 2**30, 2: 4 * 2**30}, memory_limit=7 * 2**30)
        >>> report.batch_size, max(report.peak_bytes.values()) <= report.memory_limit
        (4, True)
    """

    batch_size: int
    crop_size: int
    peak_bytes: dict[int, int]
    memory_limit: int | None


WIDE_PROBE = 4
"""The batch [`find_batch_size`][] also runs on a CPU, where it is safe, to measure the growth
per crop over three crops instead of one."""


def find_batch_size(
    model: keras.Model,
    crop_size: int = 320,
    *,
    max_batch: int = 64,
    memory_limit: int | None = None,
) -> BatchSizeReport:
    """Find the largest training batch of ``crop_size`` crops that fits, by running real steps.

    Each probe is a real step: forward, backward and the update of [`CaffeSGD`][]
    with momentum (in place, each variable as soon as its gradient is done).

    * On a GPU, batches 1, 2, 4, ... run until one fails, then the gap is bisected. A probe fails
      on ``ResourceExhaustedError`` or when the allocator's peak exceeds ``memory_limit`` (default:
      none, the device itself decides).
    * On a CPU, where peak RSS only grows and a failure is the kernel's OOM killer, batches 1 and
      2 run, then batch [`WIDE_PROBE`][] where [`training_memory_estimate`][] says it fits,
      and the largest batch whose peak RSS, extrapolated linearly from batch 1 through the
      largest batch run, stays under ``memory_limit`` (default: 80% of the available RAM) is
      returned. The wider probe matters under Eigen's kernels, whose allocator reuses most of a
      step's buffers: one crop more grew the peak by 0.2-0.3x the estimate, and by less than
      the noise once (batch 2 measured 12 MB below batch 1, which extrapolated to
      ``max_batch``).

    The model's weights are restored afterwards.

    Examples:
        >>> from fcn import build_model
        >>> model = build_model("fcn8s", weights=None, width=1 / 16)
        >>> report = find_batch_size(model, 64, max_batch=4, memory_limit=2**40)
        >>> report.batch_size, report.crop_size, 1 in report.peak_bytes
        (4, 64, True)
    """

    if max_batch < 1:
        raise ValueError(f"max_batch must be at least 1, got {max_batch}")
    on_gpu = bool(tf.config.list_logical_devices("GPU"))
    if memory_limit is None and not on_gpu:
        available = available_host_memory()
        if available is None:
            raise ValueError("this system does not report its free memory: pass memory_limit")
        memory_limit = int(0.8 * available)
    num_classes = model.output_shape[-1]
    saved = model.get_weights()
    optimizer = CaffeSGD(1e-12, momentum=0.9)  # training's update: in place, in update_order
    optimizer.build(model.trainable_variables)  # its momentum is not part of any one probe
    optimizer.update_after = update_order(model)
    loss_fn = segmentation_loss()
    rng = np.random.default_rng(0)
    peaks: dict[int, int] = {}
    shape = (None, crop_size, crop_size)

    specs = [tf.TensorSpec((*shape, 3), tf.uint8), tf.TensorSpec(shape, tf.uint8)]

    @tf.function(input_signature=specs)
    def step(images, labels):  # one trace for every batch size
        with trained_tape(model.trainable_weights) as tape:  # the backward pass training runs
            loss = loss_fn(labels, model(images, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_weights), model.trainable_weights)

    def fits(batch: int) -> bool:
        images = rng.integers(0, 256, (batch, crop_size, crop_size, 3), dtype=np.uint8)
        labels = rng.integers(0, num_classes, (batch, crop_size, crop_size), dtype=np.uint8)
        _reset_peak_memory()
        try:
            step(images, labels)
        except tf.errors.ResourceExhaustedError:
            return False
        peaks[batch] = _peak_memory_bytes()
        return memory_limit is None or peaks[batch] <= memory_limit

    try:
        if on_gpu:
            good = _search(fits, max_batch)
        elif not fits(1):  # also traces the step and makes its first-run allocations
            good = 0
        else:
            fits(1)  # measured again, after that
            fits(2)
            far = 2
            growth = training_memory_estimate(model, crop_size, WIDE_PROBE) - (
                training_memory_estimate(model, crop_size, 1)
            )  # fmt: skip
            if max_batch >= WIDE_PROBE and peaks[1] + growth <= memory_limit:
                fits(WIDE_PROBE)  # its peak is recorded unless the step itself failed
                far = WIDE_PROBE if WIDE_PROBE in peaks else 2
            good = extrapolate_batch_size(peaks[1], peaks[far], memory_limit, max_batch, far)
    finally:
        model.set_weights(saved)
    return BatchSizeReport(good, crop_size, peaks, memory_limit)


def extrapolate_batch_size(
    peak_1: int, peak_far: int, memory_limit: int, max_batch: int, far: int = 2
) -> int:
    """The largest batch (at most ``max_batch``) whose peak, linear in the batch through the
    measured peaks of batch 1 and batch ``far`` (bytes), stays within ``memory_limit`` (bytes).

    Examples:
        >>> extrapolate_batch_size(1_000, 1_100, 1_350, 64)  # batch 4 peaks at 1,300
        4
        >>> extrapolate_batch_size(1_000, 1_300, 1_350, 64, far=4)  # the same growth per crop
        4
    """
    if peak_1 > memory_limit:
        return 0
    per_crop = max((peak_far - peak_1) / (far - 1), 1)
    return int(min(max_batch, 1 + (memory_limit - peak_1) // per_crop))


def _search(fits, max_batch: int) -> int:
    """Largest b <= max_batch with fits(b), assuming fits is monotone: doubling, then bisection."""
    good, bad, batch = 0, None, 1
    while bad is None:
        if not fits(batch):
            bad = batch
        elif batch == max_batch:
            return batch
        else:
            good, batch = batch, min(2 * batch, max_batch)
    while bad - good > 1:
        middle = (good + bad) // 2
        good, bad = (middle, bad) if fits(middle) else (good, middle)
    return good
