"""Devices and memory: GPU memory growth, the distribution strategy, batch-size probing, OOM.

TensorFlow grabs (nearly) all of every GPU's memory the first time it touches it.
:func:`enable_memory_growth` turns on memory growth instead, so a process only holds what it
uses; ``fcn.build_model``, ``fcn.load_model``, ``fcn.train`` and the ``fcn`` command call it
before they touch a device (``import fcn`` itself changes nothing).
"""

from __future__ import annotations

import functools
import os
import resource
import warnings
from dataclasses import dataclass
from typing import Literal, get_args

import keras
import numpy as np
import tensorflow as tf


class OutOfMemoryError(RuntimeError):
    """A training step did not fit in device memory; the message says what would.

    Example:
        >>> issubclass(OutOfMemoryError, RuntimeError)  # `fcn` reports it as one line
        True
    """


def enable_memory_growth() -> None:
    """Let every visible GPU allocate on demand instead of all at once (no-op without GPUs, and
    for a GPU whose growth is on already).

    Called by :func:`fcn.build_model`, :func:`fcn.load_model`, :func:`fcn.train` and the
    command line; call it yourself first in a program that touches a GPU before any of those
    (a GPU already initialised cannot change: a warning says so).

    Example:
        >>> enable_memory_growth()  # nothing to do on a CPU-only machine
    """
    for gpu in tf.config.list_physical_devices("GPU"):
        try:
            if not tf.config.experimental.get_memory_growth(gpu):
                tf.config.experimental.set_memory_growth(gpu, True)
        except RuntimeError:  # the GPU is already initialised: too late, say so
            warnings.warn(
                f"{gpu.name} was initialised before fcn configured it: memory growth is off. "
                "Call fcn.enable_memory_growth() before anything touches a GPU, or set "
                "TF_FORCE_GPU_ALLOW_GROWTH=true.",
                stacklevel=2,
            )


CPU_FLAGS = ("avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16")
"""The CPU features that decide TensorFlow's CPU kernels: with AVX-512 VNNI or BF16, or AMX,
TensorFlow 2.9+ turns its oneDNN kernels on by default (Linux x86); else it runs Eigen's."""


def cpu_kernels() -> str:
    """``"oneDNN"`` or ``"Eigen"``: the CPU kernels this TensorFlow process runs (decided by the
    CPU, or forced by ``TF_ENABLE_ONEDNN_OPTS=1`` / ``=0``). The two sum in different orders, so
    results agree to float rounding, not bit for bit.

    Example:
        >>> cpu_kernels() in ("oneDNN", "Eigen")
        True
    """
    from tensorflow.python.util import _pywrap_util_port  # no public API tells

    return "oneDNN" if _pywrap_util_port.IsMklEnabled() else "Eigen"


@functools.cache
def _cpu_info() -> tuple[str, frozenset[str]]:
    """The CPU's model name and feature flags (Linux' /proc/cpuinfo; elsewhere unknown, none)."""
    model, flags = "unknown CPU", frozenset()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = frozenset(value.split())
                    break
    except OSError:  # not Linux: no /proc
        pass
    return model, flags


BF16_CPU_FLAGS = {"amx_bf16": "AMX", "avx512_bf16": "AVX512-BF16"}
"""CPU flags of native bf16 arithmetic, best first: AMX tiles (about 1,024 bf16 FLOP per cycle
per core) and AVX-512 BF16 dot products (twice AVX-512's 64 fp32 FLOP per cycle per core)."""

BF16_GPU_CAPABILITY = (8, 0)
"""The CUDA compute capability from which a GPU has bf16 tensor cores (Ampere)."""


def native_bf16() -> str | None:
    """The hardware's native bf16 arithmetic: ``"GPU"`` (a visible GPU of compute capability
    :data:`BF16_GPU_CAPABILITY` or more), ``"AMX"`` or ``"AVX512-BF16"`` (the CPU's
    :data:`BF16_CPU_FLAGS`), or None (bf16 would be emulated: no faster than float32).

    Example:
        >>> native_bf16() in ("GPU", "AMX", "AVX512-BF16", None)
        True
    """
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        return "GPU" if capability and tuple(capability) >= BF16_GPU_CAPABILITY else None
    flags = _cpu_info()[1]
    return next((name for flag, name in BF16_CPU_FLAGS.items() if flag in flags), None)


Precision = Literal["auto", "float32", "bfloat16"]

PRECISIONS: tuple[str, ...] = get_args(Precision)
"""What ``precision=`` of :func:`fcn.predict`, :func:`fcn.evaluate` and export take."""


def bf16_runs_natively() -> bool:
    """Whether bf16 kernels run on native bf16 hardware here: a bf16 GPU, or a CPU with
    :func:`native_bf16` under oneDNN's kernels (Eigen's bf16 convolutions compute in float32:
    fc6 took 0.38 s either way on an AMD EPYC with avx512_bf16).

    Example:
        >>> bf16_runs_natively() in (True, False)  # True on an AMX or AVX512-BF16 CPU, oneDNN
        True
    """
    native = native_bf16()
    return native == "GPU" or (native is not None and cpu_kernels() == "oneDNN")


def resolve_precision(precision: Precision, argument: str = "precision") -> str:
    """``"float32"`` or ``"bfloat16"``: ``precision`` itself, or for ``"auto"`` bfloat16 where
    :func:`bf16_runs_natively`, else float32.

    Raises:
        ValueError: naming ``argument`` for anything but :data:`PRECISIONS`.

    Example:
        >>> resolve_precision("float32"), resolve_precision("auto") in ("float32", "bfloat16")
        ('float32', True)
    """
    if precision not in PRECISIONS:
        raise ValueError(f"{argument} must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    if precision != "auto":
        return precision
    return "bfloat16" if bf16_runs_natively() else "float32"


def auto_mixed_precision() -> str | None:
    """The Keras policy that ``mixed_precision="auto"`` of :func:`fcn.train` trains under:
    ``"mixed_bfloat16"`` where :func:`bf16_runs_natively`, else None (float32 throughout).

    Example:
        >>> auto_mixed_precision() in ("mixed_bfloat16", None)
        True
    """
    return "mixed_bfloat16" if bf16_runs_natively() else None


def cpu_summary() -> str:
    """One line for logs and benchmark tables: CPU model, the :data:`CPU_FLAGS` it has, its
    native bf16 (:func:`native_bf16`), the kernels, TensorFlow's thread settings (0 = its
    default, one per core) and the core count.

    Example:
        >>> cpu_summary().endswith(f"; {os.cpu_count()} cores")
        True
    """
    model, flags = _cpu_info()
    present = [flag for flag in CPU_FLAGS if flag in flags] or ["none of " + "/".join(CPU_FLAGS)]
    bf16 = native_bf16()
    threading = tf.config.threading
    return (
        f"{model}; {' '.join(present)}; native bf16: {bf16 or 'none'}; kernels {cpu_kernels()} "
        f"(TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}); "
        f"threads intra {threading.get_intra_op_parallelism_threads()} "
        f"inter {threading.get_inter_op_parallelism_threads()}; {os.cpu_count()} cores"
    )


def choose_strategy() -> tf.distribute.Strategy:
    """The strategy for what is visible: ``MultiWorkerMirroredStrategy`` when ``TF_CONFIG``
    names several workers (trained by :mod:`fcn.loop`'s loop), else
    ``MirroredStrategy`` over all GPUs when there are several, else the default single-device
    strategy. A multi-worker strategy must be made before TensorFlow runs anything else in the
    process (``fcn.train`` and ``fcn train`` do).

    Example:
        >>> choose_strategy().num_replicas_in_sync  # one CPU, no TF_CONFIG
        1
    """
    from fcn.loop import cluster_size

    if cluster_size() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    if len(tf.config.list_logical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()


def training_memory_estimate(model: keras.Model, crop_size: int, batch_size: int) -> int:
    """Rough bytes of one training step: weights, momentum and one weight-sized allowance for
    the gradients in flight and the allocator's pool, plus 1.5x every layer's activation for
    ``batch_size`` crops of ``crop_size`` pixels (4-byte floats): the activations the backward
    pass keeps and half again for the gradients it is computing.

    The 1.5 is measured: ``benchmarks/vs_pytorch.py --estimate`` (full FCN-8s, CPU RSS above
    ``import fcn``, oneDNN) put the step at 1.27-1.46x the activations per added crop, and this
    estimate within 0.88-1.05x of the measured peak at crops 320 and 500, batches 1, 2 and 4
    (``benchmarks/README.md``).

    Example:
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
    """Peak device memory since :func:`_reset_peak_memory`: the first GPU's allocator peak,
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


def available_host_memory() -> int | None:
    """Bytes of host memory a new allocation can get without swapping (Linux' MemAvailable),
    or None where the system does not say (no ``/proc/meminfo``).

    Example:
        >>> available_host_memory() > 0
        True
    """
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
    except OSError:
        return None
    return int(fields["MemAvailable"].split()[0]) * 1024


@dataclass(frozen=True)
class BatchSizeReport:
    """Outcome of :func:`find_batch_size`.

    Attributes:
        batch_size: the largest batch that fitted (0 if not even one crop did).
        crop_size: crop side the probes used, pixels.
        peak_bytes: measured peak memory per probed batch size that ran (bytes).
        memory_limit: the limit the probes were held to (bytes; None: only real OOM errors).

    Example:
        >>> report = BatchSizeReport(4, 320, {1: 3 * 2**30, 2: 4 * 2**30}, memory_limit=7 * 2**30)
        >>> report.batch_size, max(report.peak_bytes.values()) <= report.memory_limit
        (4, True)
    """

    batch_size: int
    crop_size: int
    peak_bytes: dict[int, int]
    memory_limit: int | None


WIDE_PROBE = 4
"""The batch :func:`find_batch_size` also runs on a CPU, where it is safe, to measure the growth
per crop over three crops instead of one."""


def find_batch_size(
    model: keras.Model,
    crop_size: int = 320,
    *,
    max_batch: int = 64,
    memory_limit: int | None = None,
) -> BatchSizeReport:
    """Find the largest training batch of ``crop_size`` crops that fits, by running real steps.

    Each probe is a real step: forward, backward and the update of :class:`~fcn.recipes.CaffeSGD`
    with momentum (in place, each variable as soon as its gradient is done).

    * On a GPU, batches 1, 2, 4, ... run until one fails, then the gap is bisected. A probe fails
      on ``ResourceExhaustedError`` or when the allocator's peak exceeds ``memory_limit`` (default:
      none, the device itself decides).
    * On a CPU, where peak RSS only grows and a failure is the kernel's OOM killer, batches 1 and
      2 run, then batch :data:`WIDE_PROBE` where :func:`training_memory_estimate` says it fits,
      and the largest batch whose peak RSS, extrapolated linearly from batch 1 through the
      largest batch run, stays under ``memory_limit`` (default: 80% of the available RAM) is
      returned. The wider probe matters under Eigen's kernels, whose allocator reuses most of a
      step's buffers: one crop more grew the peak by 0.2-0.3x the estimate, and by less than
      the noise once (batch 2 measured 12 MB below batch 1, which extrapolated to
      ``max_batch``).

    The model's weights are restored afterwards.

    Example:
        >>> from fcn import build_model
        >>> model = build_model("fcn8s", weights=None, width=1 / 16)
        >>> report = find_batch_size(model, 64, max_batch=4, memory_limit=2**40)
        >>> report.batch_size, report.crop_size, 1 in report.peak_bytes
        (4, 64, True)
    """
    # recipes -> model -> layers -> conv_gradients -> device: not at the top
    from fcn.recipes import CaffeSGD, segmentation_loss, update_order

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
        with tf.GradientTape() as tape:
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

    Example:
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
