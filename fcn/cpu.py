"""The CPU (ground floor, plain facts: no TensorFlow): its model and feature flags, and the
TensorFlow kernel set each workload was measured fastest under on CPUs of its kind.

TensorFlow runs its CPU ops under one of two kernel sets, decided once per process when
TensorFlow starts: oneDNN (on by default where the CPU has AVX-512 VNNI or BF16, AVX-VNNI or
AMX: [`ONEDNN_DEFAULT_FLAGS`][]) or Eigen (elsewhere). ``TF_ENABLE_ONEDNN_OPTS=1`` / ``=0``
forces one. Neither is fastest for every workload on every CPU: on an AVX2-only CPU (no
AVX-512, no VNNI) the default training step runs faster under oneDNN and the forward pass under
Eigen (``benchmarks/README.md``, "The kernel set by CPU and workload"). [`choose_kernels`][]
sets the variable for a workload before TensorFlow starts, never over a value the user set; the
``fcn`` command calls it for each command, and a library user may call it first thing (``import
fcn`` itself changes nothing).

Examples:
    >>> cpu_class(frozenset({"sse4_2", "avx2", "fma"})), cpu_class(frozenset({"avx2", "avx_vnni"}))
    ('AVX2', None)
    >>> avx2 = frozenset({"avx", "avx2", "fma"})
    >>> fastest_kernels("training", avx2), fastest_kernels("inference", avx2)
    ('oneDNN', 'Eigen')
    >>> fastest_kernels("training", frozenset({"avx2", "avx512f"})) is None  # not measured
    True
"""

from __future__ import annotations

import functools
import os
import sys
from typing import Literal

Workload = Literal["training", "inference"]
"""What a process will mostly run: training steps, or forward passes (evaluate, predict)."""

WORKLOADS: tuple[Workload, ...] = ("training", "inference")

ONEDNN_VARIABLE = "TF_ENABLE_ONEDNN_OPTS"
"""The environment variable TensorFlow reads when it starts: ``1`` oneDNN, ``0`` Eigen."""

ONEDNN_DEFAULT_FLAGS = ("avx512_vnni", "avx512_bf16", "avx_vnni", "amx_tile", "amx_bf16")
"""CPU flags with which TensorFlow turns oneDNN on by default (Linux x86, TensorFlow 2.9+)."""

KERNEL_SET_VALUES = {"oneDNN": "1", "Eigen": "0"}
"""[`ONEDNN_VARIABLE`][]'s value for each kernel set."""

FASTEST_KERNELS: dict[tuple[str, Workload], str] = {
    ("AVX2", "training"): "oneDNN",
    ("AVX2", "inference"): "Eigen",
}
"""The kernel set measured fastest, by [`cpu_class`][] and workload (float32, on a 2-core AMD
EPYC with AVX2 only: benchmarks/README.md, "The kernel set by CPU and workload"). CPU classes
not listed keep TensorFlow's own default (oneDNN on the AVX512-BF16 and AMX CPUs measured)."""


@functools.cache
def cpu_info() -> tuple[str, frozenset[str]]:
    """The CPU's model name and feature flags (Linux' /proc/cpuinfo; elsewhere unknown, none).

    Examples:
        >>> model, flags = cpu_info()
        >>> isinstance(model, str), isinstance(flags, frozenset)
        (True, True)
    """
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


def cpu_class(flags: frozenset[str] | None = None) -> str | None:
    """``"AVX2"`` for an x86 CPU with AVX2 and none of [`ONEDNN_DEFAULT_FLAGS`][] nor AVX-512
    (``flags``, default this CPU's: one where TensorFlow picks Eigen itself), else None: a class
    [`FASTEST_KERNELS`][] has no measurement for.

    Examples:
        >>> cpu_class(frozenset({"avx2", "avx512f", "avx512_bf16"})) is None
        True
    """
    flags = cpu_info()[1] if flags is None else flags
    plain_avx2 = "avx2" in flags and not flags & {"avx512f", *ONEDNN_DEFAULT_FLAGS}
    return "AVX2" if plain_avx2 else None


def fastest_kernels(workload: Workload, flags: frozenset[str] | None = None) -> str | None:
    """The kernel set measured fastest for ``workload`` on a CPU with ``flags`` (default this
    CPU's), by its [`cpu_class`][]; None where nothing was measured (TensorFlow's default stands).

    Examples:
        >>> fastest_kernels("inference", frozenset({"avx", "avx2"}))
        'Eigen'
    """
    if workload not in WORKLOADS:
        raise ValueError(f"workload {workload!r}: expected one of {', '.join(WORKLOADS)}")
    return FASTEST_KERNELS.get((cpu_class(flags), workload))


_chosen: tuple[str, Workload] | None = None


def choose_kernels(workload: Workload) -> str | None:
    """Set [`ONEDNN_VARIABLE`][] to the kernel set measured fastest for ``workload`` on this
    CPU ([`fastest_kernels`][]), where TensorFlow has not started yet and the user has not set
    the variable. Call it before anything imports TensorFlow.

    Returns:
        The kernel set chosen, or None: nothing measured for this CPU, the variable already set
        (the user's value stands), or TensorFlow already started (too late to change).

    Examples:
        >>> from unittest import mock
        >>> with mock.patch.dict(os.environ, {"TF_ENABLE_ONEDNN_OPTS": "0"}):  # the user's
        ...     choose_kernels("training") is None  # value stands: nothing is chosen
        True
    """
    global _chosen
    choice = fastest_kernels(workload)
    if choice is None or ONEDNN_VARIABLE in os.environ or _tensorflow_started():
        return None
    os.environ[ONEDNN_VARIABLE] = KERNEL_SET_VALUES[choice]
    _chosen = (choice, workload)
    return choice


def kernels_note() -> str:
    """Where [`choose_kernels`][] set the kernel set in this process, what the machine line adds
    (``"fcn's choice for training on AVX2-only CPUs; TF_ENABLE_ONEDNN_OPTS=0 for Eigen"``),
    else ``""``.

    Examples:
        >>> kernels_note()  # nothing chosen in this process
        ''
    """
    if _chosen is None or os.environ.get(ONEDNN_VARIABLE) != KERNEL_SET_VALUES[_chosen[0]]:
        return ""
    choice, workload = _chosen
    other = next(name for name in KERNEL_SET_VALUES if name != choice)
    return (
        f"fcn's choice for {workload} on {cpu_class()}-only CPUs; "
        f"{ONEDNN_VARIABLE}={KERNEL_SET_VALUES[other]} for {other}"
    )


def _tensorflow_started() -> bool:
    """Whether this process has imported TensorFlow (its kernel set is then fixed)."""
    return "tensorflow" in sys.modules
