"""Files (and folders) that appear whole: written under a temporary name of their own beside the
path, then renamed into place (``os.replace`` is atomic), so a reader, or a process killed
mid-write, never leaves or sees a part of one."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any


def write_whole(
    path: str | os.PathLike,
    write: Callable[..., object],
    *args: Any,
    durable: bool = False,
    **kwargs: Any,
) -> None:
    """``write(tmp, *args, **kwargs)``, then rename ``tmp`` to ``path``. ``tmp`` is
    ``.<stem>.tmp-<random><suffix>`` in ``path``'s folder: its own for this call, so writers in
    other threads or processes never share one, and with ``path``'s suffix, for writers that
    choose a format by it (Keras' ``model.save``). ``durable``: flushed to disk before the
    rename, so that a crash leaves the old file or the new one. A write that raises leaves no
    temporary file; one killed leaves ``.<stem>.tmp*``, which nothing reads.

    ``write`` may make a folder instead (a SavedModel). A folder that ``path`` names already is
    replaced in two renames, the old one moved aside to a ``.<stem>.tmp*`` name and deleted
    after, so a reader may find no ``path`` for that moment, never a part of one.

    Examples:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp(), "ids.txt")
        >>> write_whole(path, Path.write_text, "2007_000033\\n", durable=True)
        >>> path.read_text(), sorted(p.name for p in path.parent.iterdir())
        ('2007_000033\\n', ['ids.txt'])
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp-{uuid.uuid4().hex}{path.suffix}")
    try:
        write(tmp, *args, **kwargs)
        if durable:
            for file in [tmp] if tmp.is_file() else [p for p in tmp.rglob("*") if p.is_file()]:
                with open(file, "rb") as f:
                    os.fsync(f.fileno())
        _move_into_place(tmp, path)
    except BaseException:
        if tmp.is_dir() and not tmp.is_symlink():
            shutil.rmtree(tmp)
        else:
            tmp.unlink(missing_ok=True)
        raise


def _move_into_place(new: Path, path: Path) -> None:
    """Rename ``new`` to ``path``; a folder at ``path``, which a rename cannot replace, is moved
    aside first (back again if the rename fails) and deleted after."""
    if not (new.is_dir() and path.is_dir() and not path.is_symlink()):
        os.replace(new, path)
        return
    old = path.with_name(f".{path.stem}.tmp-old-{uuid.uuid4().hex}{path.suffix}")
    path.rename(old)
    try:
        new.rename(path)
    except BaseException:
        old.rename(path)
        raise
    shutil.rmtree(old)
