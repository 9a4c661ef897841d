"""Files that appear whole: written under a temporary name of their own beside the file, then
renamed into place (``os.replace`` is atomic), so a reader, or a process killed mid-write,
never leaves or sees a part of one."""

from __future__ import annotations

import os
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
            with open(tmp, "rb") as f:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
