"""One training process per run directory: [`hold`][] locks ``run_dir/.lock`` for a run's life.

Two copies of ``fcn train --run-dir runs/x`` (a second terminal, a scheduler restarting a job
whose first copy still runs, ``--resume`` beside a live run) would otherwise both train to the
end, interleaving checkpoints, ``state.json``, ``log.csv`` and ``best.keras``. ``fcn.train``
holds the lock from before it reads the run's state until it returns (the chief alone, under
several workers): a second start is refused at once, naming the folder and the holder.

The lock is an advisory ``flock`` on the file (POSIX: Linux, macOS), which the operating system
releases when its process ends however it ends, so a killed run never blocks the next one. The
file records its holder (pid, host, start time) and is removed on a normal release: a record
found when the lock is free was left by a process that was killed, and taking it over says so.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from fcn.training.checkpoint import check_writable

LOCK_FILE = ".lock"
"""The lock's file name in the run directory."""


class RunDirectoryBusyError(RuntimeError):
    """Another process holds the run directory; the message names it and the holder.

    Examples:
        >>> issubclass(RunDirectoryBusyError, RuntimeError)  # the CLI's one-line user errors
        True
    """


@contextmanager
def hold(run_dir: str | os.PathLike) -> Iterator[Path]:
    """Hold ``run_dir``'s lock for the ``with`` block; yields the lock file's path.

    ``run_dir`` is made if need be (and checked writable: PermissionError naming it); a
    ``run_dir`` this call made is removed again on leaving if nothing else was written there.

    Raises:
        RunDirectoryBusyError: another live process holds it (its pid, host and start time are
            in the message); nothing was read or written.

    Examples:
        >>> import tempfile
        >>> run_dir = Path(tempfile.mkdtemp()) / "run"
        >>> with hold(run_dir) as lock:
        ...     holder = lock.read_text()
        ...     try:
        ...         with hold(run_dir):  # a second holder: refused, even in this process
        ...             pass
        ...     except RunDirectoryBusyError as error:
        ...         refused = str(error)
        >>> holder.startswith(f"pid {os.getpid()} on "), f"(pid {os.getpid()} on " in refused
        (True, True)
        >>> run_dir.exists()  # made here, left empty: removed
        False
    """
    run_dir = Path(run_dir)
    made = not run_dir.exists()
    path = run_dir / LOCK_FILE
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = _lock(path)
    except OSError:  # not writable, a read-only file system: said by check_writable, naming it
        check_writable(run_dir)
        raise
    try:
        check_writable(run_dir)  # held: its probe file cannot meet another start's
        left = os.pread(fd, 4096, 0).decode(errors="replace").strip()
        if left:
            warnings.warn(
                f"{run_dir}: taking over the lock left by {left}, which ended without releasing "
                "it (killed?)",
                stacklevel=3,
            )
        record = f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%c')}"
        os.ftruncate(fd, 0)
        os.pwrite(fd, record.encode(), 0)
        yield path
    finally:
        path.unlink(missing_ok=True)  # before the lock goes: a waiting open sees a new file
        os.close(fd)
        if made:
            try:
                run_dir.rmdir()  # nothing was written: leave no trace
            except OSError:
                pass


def _lock(path: Path) -> int:
    """An open descriptor of ``path`` holding its exclusive lock, or RunDirectoryBusyError."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 4096, 0).decode(errors="replace").strip() or "starting"
            os.close(fd)
            raise RunDirectoryBusyError(
                f"{path.parent} is in use by another training run ({holder}): wait for it to "
                "end or stop it, or pass another run_dir; nothing was read or written"
            ) from None
        except OSError as error:
            os.close(fd)
            raise OSError(
                f"{path} cannot be locked ({error.strerror or error}): pass a run_dir on a file "
                "system that supports file locks"
            ) from error
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder removed this file as it released it: lock the new one
