"""This process's resident memory for the benchmarks (Linux ``/proc``; no TensorFlow import).

Example:
    >>> from procmem import reset_peak, rss_mib  # benchmarks/ is on sys.path when a script runs
    >>> reset_peak(); rss_mib()["VmHWM"] >= 0
    True
"""

from __future__ import annotations

import ctypes
from pathlib import Path


def reset_peak() -> None:
    """Return freed heap to the kernel (``malloc_trim``), then reset VmHWM to the current RSS."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")


def rss_mib() -> dict[str, float]:
    """Current (VmRSS) and peak-since-reset (VmHWM) resident memory, MiB."""
    fields = dict(line.split(":") for line in Path("/proc/self/status").read_text().splitlines())
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}
