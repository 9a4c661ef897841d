"""Machine facts (ground floor): GPU memory growth, the CPU and its kernels, precisions, memory.

Nothing here depends on another ``fcn`` module but the named choices ([`fcn.options`][]), the
CPU's facts ([`fcn.cpu`][]) and the hook that asks TensorFlow for its CPU kernels
(``fcn._compat``); the training wing's
policies built on these facts (the strategy, batch-size probing) live in
[`fcn.training.distribute`][] and [`fcn.training.batch_size`][].

TensorFlow grabs (nearly) all of every GPU's memory the first time it touches it.
[`enable_memory_growth`][] turns on memory growth instead, so a process only holds what it
uses; ``fcn.load_model``, ``fcn.train`` and the ``fcn`` command call it before they touch a
device (``import fcn`` and ``fcn.build_model`` change nothing).
"""

from __future__ import annotations

import os
import warnings

import tensorflow as tf

from fcn._compat import onednn_enabled
from fcn.cpu import (
    KERNEL_SET_VALUES,
    ONEDNN_VARIABLE,
    Workload,
    cpu_class,
    cpu_info,
    fastest_kernels,
    kernels_note,
)
from fcn.options import PRECISIONS, Precision


class OutOfMemoryError(RuntimeError):
    """A training step did not fit in device memory; the message says what would.

    Examples:
        >>> issubclass(OutOfMemoryError, RuntimeError)  # `fcn` reports it as one line
        True
    """


def enable_memory_growth() -> None:
    """Let every visible GPU allocate on demand instead of all at once (no-op without GPUs, and
    for a GPU whose growth is on already).

    Called by [`fcn.load_model`][], [`fcn.train`][] and the command line, not by
    [`fcn.build_model`][]: call it yourself first in a program that builds a model, or
    otherwise touches a GPU, before any of those (a GPU already initialised cannot change: a
    warning says so).

    Examples:
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
"""The CPU features the machine line names (which turn TensorFlow's oneDNN kernels on by
default: [`fcn.cpu.ONEDNN_DEFAULT_FLAGS`][])."""


def cpu_kernels() -> str:
    """``"oneDNN"`` or ``"Eigen"``: the CPU kernels this TensorFlow process runs (decided by the
    CPU, or forced by ``TF_ENABLE_ONEDNN_OPTS=1`` / ``=0``). The two sum in different orders, so
    results agree to float rounding, not bit for bit.

    Examples:
        >>> cpu_kernels() in ("oneDNN", "Eigen")
        True
    """
    return "oneDNN" if onednn_enabled() else "Eigen"


def kernels_advice(workload: Workload) -> str | None:
    """What to do where this process runs ``workload`` under a kernel set slower than the one
    measured fastest on this CPU ([`fcn.cpu.fastest_kernels`][]) and the user set neither (a
    set ``TF_ENABLE_ONEDNN_OPTS`` is the user's choice): one sentence, else None.

    Examples:
        >>> advice = kernels_advice("training")
        >>> advice is None or "TF_ENABLE_ONEDNN_OPTS" in advice
        True
    """
    fastest = fastest_kernels(workload)
    if fastest is None or fastest == cpu_kernels() or ONEDNN_VARIABLE in os.environ:
        return None
    return (
        f"this {cpu_class()}-only CPU runs fcn's {workload} faster under TensorFlow's {fastest} "
        f"kernels than under {cpu_kernels()} (benchmarks/README.md): set "
        f"{ONEDNN_VARIABLE}={KERNEL_SET_VALUES[fastest]} before TensorFlow is imported, or call "
        f"fcn.choose_kernels({workload!r}) first (the fcn command does)"
    )


BF16_CPU_FLAGS = {"amx_bf16": "AMX", "avx512_bf16": "AVX512-BF16"}
"""CPU flags of native bf16 arithmetic, best first: AMX tiles (about 1,024 bf16 FLOP per cycle
per core) and AVX-512 BF16 dot products (twice AVX-512's 64 fp32 FLOP per cycle per core)."""

BF16_GPU_CAPABILITY = (8, 0)
"""The CUDA compute capability from which a GPU has bf16 tensor cores (Ampere)."""


def native_bf16() -> str | None:
    """The hardware's native bf16 arithmetic: ``"GPU"`` (a visible GPU of compute capability
    [`BF16_GPU_CAPABILITY`][] or more), ``"AMX"`` or ``"AVX512-BF16"`` (the CPU's
    [`BF16_CPU_FLAGS`][]), or None (bf16 would be emulated: no faster than float32).

    Examples:
        >>> from unittest import mock
        >>> def on(flags):  # a machine without a GPU whose CPU has these flags
        ...     cpu = ("a CPU", frozenset(flags))
        ...     with mock.patch.object(tf.config, "list_physical_devices", return_value=[]):
        ...         with mock.patch("fcn.device.cpu_info", return_value=cpu):
        ...             return native_bf16()
        >>> on({"avx512_bf16", "amx_bf16"}), on({"avx512_bf16"}), on({"avx512f", "avx2"})
        ('AMX', 'AVX512-BF16', None)
    """
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        capability = tf.config.experimental.get_device_details(gpus[0]).get("compute_capability")
        return "GPU" if capability and tuple(capability) >= BF16_GPU_CAPABILITY else None
    flags = cpu_info()[1]
    return next((name for flag, name in BF16_CPU_FLAGS.items() if flag in flags), None)


def bf16_runs_natively() -> bool:
    """Whether bf16 kernels run on native bf16 hardware here: a bf16 GPU, or a CPU with
    [`native_bf16`][] under oneDNN's kernels (Eigen's bf16 convolutions compute in float32, no
    faster: `docs/design.md#bf16-where-the-hardware-has-it-fcninferenceprecisionpy-fcndevicepy`).

    Examples:
        >>> from unittest import mock
        >>> def runs(native, kernels):  # on hardware with this native bf16, these CPU kernels
        ...     with mock.patch("fcn.device.native_bf16", return_value=native):
        ...         with mock.patch("fcn.device.cpu_kernels", return_value=kernels):
        ...             return bf16_runs_natively()
        >>> runs("AMX", "oneDNN"), runs("AVX512-BF16", "Eigen")  # Eigen: bf16 in float32
        (True, False)
        >>> runs("GPU", "Eigen"), runs(None, "oneDNN")  # a GPU's, whatever the CPU's kernels
        (True, False)
    """
    native = native_bf16()
    return native == "GPU" or (native is not None and cpu_kernels() == "oneDNN")


def resolve_precision(precision: Precision, argument: str = "precision") -> str:
    """``"float32"`` or ``"bfloat16"``: ``precision`` itself, or for ``"auto"`` bfloat16 where
    [`bf16_runs_natively`][], else float32.

    Raises:
        ValueError: naming ``argument`` for anything but [`PRECISIONS`][].

    Examples:
        >>> resolve_precision("float32"), resolve_precision("auto") in ("float32", "bfloat16")
        ('float32', True)
    """
    if precision not in PRECISIONS:
        raise ValueError(f"{argument} must be one of {', '.join(PRECISIONS)}; got {precision!r}")
    if precision != "auto":
        return precision
    return "bfloat16" if bf16_runs_natively() else "float32"


def auto_mixed_precision() -> str | None:
    """The Keras policy that ``mixed_precision="auto"`` of [`fcn.train`][] trains under:
    ``"mixed_bfloat16"`` where [`bf16_runs_natively`][], else None (float32 throughout).

    Examples:
        >>> from unittest import mock
        >>> with mock.patch("fcn.device.bf16_runs_natively", return_value=True):
        ...     auto_mixed_precision()
        'mixed_bfloat16'
        >>> with mock.patch("fcn.device.bf16_runs_natively", return_value=False):
        ...     print(auto_mixed_precision())
        None
    """
    return "mixed_bfloat16" if bf16_runs_natively() else None


def cpu_summary() -> str:
    """One line for logs and benchmark tables: CPU model, the [`CPU_FLAGS`][] it has, its
    native bf16 ([`native_bf16`][]), the kernels, TensorFlow's thread settings (0 = its
    default, one per core) and the core count.

    Examples:
        >>> cpu_summary().endswith(f"; {os.cpu_count()} cores")
        True
    """
    model, flags = cpu_info()
    present = [flag for flag in CPU_FLAGS if flag in flags] or ["none of " + "/".join(CPU_FLAGS)]
    bf16 = native_bf16()
    threading = tf.config.threading
    return (
        f"{model}; {' '.join(present)}; native bf16: {bf16 or 'none'}; kernels {cpu_kernels()} "
        f"(TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')}); "
        f"threads intra {threading.get_intra_op_parallelism_threads()} "
        f"inter {threading.get_inter_op_parallelism_threads()}; {os.cpu_count()} cores"
    )


def available_host_memory() -> int | None:
    """Bytes of host memory a new allocation can get without swapping (Linux' MemAvailable),
    or None where the system does not say (no ``/proc/meminfo``).

    Examples:
        >>> available_host_memory() > 0
        True
    """
    try:
        with open("/proc/meminfo") as f:
            fields = dict(line.split(":", 1) for line in f)
    except OSError:
        return None
    return int(fields["MemAvailable"].split()[0]) * 1024


def expected_gpu() -> str | None:
    """Why this machine looks as if it has an NVIDIA GPU (a ``/dev/nvidia0`` device, or
    ``CUDA_VISIBLE_DEVICES`` naming one), or None.

    Examples:
        >>> import os
        >>> os.environ["CUDA_VISIBLE_DEVICES"] = "0"
        >>> expected_gpu()
        'CUDA_VISIBLE_DEVICES=0'
        >>> del os.environ["CUDA_VISIBLE_DEVICES"]
    """
    if os.path.exists("/dev/nvidia0"):
        return "/dev/nvidia0 exists"
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible and visible != "-1":
        return f"CUDA_VISIBLE_DEVICES={visible}"
    return None


def compute_summary() -> str:
    """One line saying where ``fcn`` computes, for the command line to say once: the GPUs
    TensorFlow sees, or the CPU with its kernel set and the precision ``"auto"`` picks there;
    with a warning first when [`expected_gpu`][] says a GPU was expected but TensorFlow sees
    none.

    Examples:
        >>> compute_summary().startswith(("computing on", "warning:"))
        True
    """
    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        names = ", ".join(
            tf.config.experimental.get_device_details(gpu).get("device_name", gpu.name)
            for gpu in gpus
        )
        return f"computing on {len(gpus)} GPU{'s' * (len(gpus) > 1)} ({names}), memory growth on"
    model = cpu_info()[0]
    bf16 = native_bf16()
    precision = (
        f"bfloat16 where precision is auto ({bf16})" if bf16_runs_natively()
        else f"float32 (no native bf16{' under Eigen' if bf16 else ''})"
    )  # fmt: skip
    note = kernels_note()
    kernels = f"{cpu_kernels()} kernels" + (f" ({note})" if note else "")
    line = f"computing on the CPU: {model}, {kernels}, {precision}"
    reason = expected_gpu()
    if reason:
        line = (
            f"warning: {reason} but TensorFlow sees no GPU (a CPU-only TensorFlow? pip install "
            f"'tensorflow[and-cuda]'); {line}"
        )
    return line
