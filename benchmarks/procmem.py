"""This process's resident memory for the benchmarks (Linux ``/proc``; no TensorFlow import).

Example:
    >>> from procmem import reset_peak, rss_mib  # benchmarks/ is on sys.path when a script runs
    >>> reset_peak(); rss_mib()["VmHWM"] >= 0
    True
"""

from __future__ import annotations

import ctypes
from pathlib import Path

_earlier_peak_mib = 0.0


def reset_peak() -> None:
    """Return freed heap to the kernel (``malloc_trim``), then reset VmHWM to the current RSS
    (the peak so far is kept for :func:`process_peak_mib`)."""
    global _earlier_peak_mib
    _earlier_peak_mib = max(_earlier_peak_mib, rss_mib()["VmHWM"])
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")


def process_peak_mib() -> float:
    """This process's peak RSS since it started, MiB, across :func:`reset_peak` calls. (Not
    ``getrusage``: its ``ru_maxrss`` survives ``execve``, so a benchmark's worker would report
    the parent's peak at the fork.)"""
    return max(_earlier_peak_mib, rss_mib()["VmHWM"])


def rss_mib() -> dict[str, float]:
    """Current (VmRSS) and peak-since-reset (VmHWM) resident memory, MiB."""
    fields = dict(line.split(":") for line in Path("/proc/self/status").read_text().splitlines())
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}
