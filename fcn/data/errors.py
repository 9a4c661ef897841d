"""How bad input is reported: a [`DataError`][], or a [`SkipLog`][] when asked to skip."""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Literal

import tensorflow as tf

logger = logging.getLogger("fcn.data")


class DataError(ValueError):
    """A dataset file or listing is missing, unreadable or inconsistent; the message names it.

    Raised as is by the listing functions and by [`fcn.data.read_pair`][]. Inside a
    ``tf.data`` pipeline TensorFlow re-raises it as ``tf.errors.InvalidArgumentError`` whose
    message starts with this error's text (file name included).

    Examples:
        >>> import tempfile
        >>> from fcn.data import voc_pairs
        >>> voc_pairs(tempfile.mkdtemp(), "train")
        Traceback (most recent call last):
        fcn.data.errors.DataError: dataset root not found: no ImageSets/Segmentation folder in ...
    """


@contextmanager
def data_errors_named() -> Iterator[None]:
    """Re-raise the [`DataError`][] behind a ``tf.errors.InvalidArgumentError`` of a
    ``tf.data`` pipeline as that DataError: one line naming the file, not TensorFlow's
    traceback of the decoder thread. Other errors pass unchanged.

    Examples:
        >>> with data_errors_named():
        ...     raise tf.errors.InvalidArgumentError(None, None, "... DataError: a.png: empty")
        Traceback (most recent call last):
        fcn.data.errors.DataError: a.png: empty
    """
    try:
        yield
    except tf.errors.InvalidArgumentError as err:
        found = re.search(r"DataError: (.*)", err.message)
        if found is None:
            raise
        raise DataError(found.group(1).strip()) from err


class SkipLog:
    """Thread-safe record of what ``on_error=SkipLog()`` skipped, filled as data is listed or read.

    ``len(log)`` is the number of skipped files or pairs and ``log.entries`` lists
    ``(file, reason)``; every skip is also logged as a warning on the ``fcn.data`` logger.

    Examples:
        >>> log = SkipLog()
        >>> report([("a.png", "empty file (0 bytes)")], "1 bad pair", on_error=log)
        >>> len(log), log.entries
        (1, [('a.png', 'empty file (0 bytes)')])
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: list[tuple[str, str]] = []

    def add(self, file: str, reason: str) -> None:
        with self._lock:
            self._entries.append((file, reason))
        logger.warning("skipped %s: %s", file, reason)

    @property
    def entries(self) -> list[tuple[str, str]]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


_SHOWN = 10
"""Problems named in one error message before "and N more"."""

OnError = Literal["raise", "skip"] | SkipLog
"""``"raise"`` (default): stop with a [`DataError`][]. ``"skip"``: drop the bad pair and log a
warning. A [`SkipLog`][]: skip, log, and record each skipped pair in it."""


def skip_log(on_error: OnError) -> SkipLog | None:
    """The log to skip into, or None when errors must be raised.

    Examples:
        >>> skip_log("raise") is None, type(skip_log("skip")).__name__
        (True, 'SkipLog')
    """
    if on_error == "raise":
        return None
    if on_error == "skip":
        return SkipLog()
    if isinstance(on_error, SkipLog):
        return on_error
    raise ValueError(f"on_error must be 'raise', 'skip' or a SkipLog, got {on_error!r}")


def report(problems: list[tuple[str, str]], summary: str, on_error: OnError) -> None:
    """Raise one [`DataError`][] naming the first ``(file, reason)`` problems, or skip them all.

    Args:
        problems: ``(file, reason)`` for every bad file, in order.
        summary: what went wrong as a whole, first in the error message.
        on_error: see [`OnError`][].

    Examples:
        >>> report([("a.png", "no label"), ("b.png", "no label")], "2 unmatched", "raise")
        Traceback (most recent call last):
        fcn.data.errors.DataError: 2 unmatched: a.png (no label); b.png (no label)
    """
    log = skip_log(on_error)
    if log is None:
        shown = "; ".join(f"{file} ({reason})" for file, reason in problems[:_SHOWN])
        more = f"; and {len(problems) - _SHOWN} more" if len(problems) > _SHOWN else ""
        raise DataError(f"{summary}: {shown}{more}")
    for file, reason in problems:
        log.add(file, reason)
