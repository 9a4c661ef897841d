"""Model files: where a default model is looked for, its checksum, and safe loading.

The one place that opens a ``.keras`` file: :func:`load_model` for inference (``fcn.predict``,
``fcn.evaluate`` through the CLI, the demo) and :func:`load_checkpoint` for resuming training,
which also needs the optimizer's state. Both deserialise in Keras' safe mode (no arbitrary
code: the FCN has no Lambda layers) and check the file against a ``SHA256SUMS`` beside it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import keras

from fcn.device import enable_memory_growth
from fcn.initialize import load_keras_in_place

DEFAULT_MODEL_FILE = "fcn8s-voc.keras"
"""Name of the trained VOC model that :func:`load_model` looks for (:func:`weights_dirs`)."""

CHECKSUM_FILE = "SHA256SUMS"
"""``<sha256>  <file name>`` lines (the format of ``sha256sum``) beside model files."""


def weights_dirs() -> list[Path]:
    """Where :func:`load_model` looks for :data:`DEFAULT_MODEL_FILE`, in order:
    ``$FCN_WEIGHTS_DIR``, ``./weights`` (the current folder's), and the per-user cache
    ``$KERAS_HOME/models/fcn`` (default ``~/.keras/models/fcn``). Nothing inside the installed
    package: site-packages is no place for a 500 MB model.

    Example:
        >>> [d.name for d in weights_dirs()][-2:]
        ['weights', 'fcn']
    """
    dirs = [Path(os.environ["FCN_WEIGHTS_DIR"])] if "FCN_WEIGHTS_DIR" in os.environ else []
    keras_home = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras"))
    return [*dirs, Path.cwd() / "weights", keras_home / "models" / "fcn"]


def check_sum(path: str | os.PathLike) -> None:
    """Compare ``path`` with its line in the :data:`CHECKSUM_FILE` beside it, if it has one.

    Raises:
        ValueError: the file's SHA-256 differs from the listed one (damaged or replaced).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp(), "m.keras")
        >>> _ = path.write_bytes(b"model"), (path.parent / CHECKSUM_FILE).write_text(
        ...     hashlib.sha256(b"model").hexdigest() + "  m.keras")
        >>> check_sum(path)  # listed and equal: nothing to say
        >>> _ = path.write_bytes(b"changed"); check_sum(path)
        Traceback (most recent call last):
        ValueError: ...m.keras: SHA-256 differs from ...SHA256SUMS: the file is damaged or replaced
    """
    path = Path(path)
    sums = path.parent / CHECKSUM_FILE
    if not sums.exists():
        return
    listed = dict(line.split()[::-1] for line in sums.read_text().splitlines() if line.strip())
    if path.name not in listed:
        return
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != listed[path.name]:
        raise ValueError(f"{path}: SHA-256 differs from {sums}: the file is damaged or replaced")


def _existing(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model file not found: {path}")
    check_sum(path)
    return path


def default_model_path() -> Path:
    """The first :data:`DEFAULT_MODEL_FILE` in :func:`weights_dirs`.

    Raises:
        FileNotFoundError: there is none; the message says where it looked and how to make one.

    Example:
        >>> import tempfile, unittest.mock
        >>> folder = tempfile.mkdtemp(); Path(folder, DEFAULT_MODEL_FILE).touch()
        >>> with unittest.mock.patch.dict(os.environ, FCN_WEIGHTS_DIR=folder):
        ...     default_model_path() == Path(folder, DEFAULT_MODEL_FILE)
        True
    """
    for folder in weights_dirs():
        if (folder / DEFAULT_MODEL_FILE).exists():
            return folder / DEFAULT_MODEL_FILE
    raise FileNotFoundError(
        f"no model given and no {DEFAULT_MODEL_FILE} in "
        f"{', '.join(str(d) for d in weights_dirs())}. Train one "
        "(`fcn train VOC_ROOT`, then copy RUN_DIR/best.keras to "
        f"weights/{DEFAULT_MODEL_FILE}) or pass model='path/to/model.keras'."
    )


def load_model(path: str | os.PathLike | None = None) -> keras.Model:
    """Load a ``.keras`` FCN for inference: safe mode, checksum checked, every kernel written
    in place (:func:`fcn.initialize.load_keras_in_place`: no second copy of the weights).

    Args:
        path: a ``.keras`` file; None: :func:`default_model_path`.

    Example:
        >>> import fcn, tempfile
        >>> path = tempfile.mkdtemp() + "/tiny.keras"
        >>> fcn.build_model("fcn8s", weights=None, width=1 / 16).save(path)
        >>> load_model(path).output_shape
        (None, None, None, 21)
    """
    enable_memory_growth()
    return load_keras_in_place(_existing(path or default_model_path()), safe_mode=True)


def load_checkpoint(path: str | os.PathLike) -> keras.Model:
    """Load a training checkpoint with its compiled optimizer and state (to resume training):
    Keras' own loader, in safe mode, checksum checked.

    Example:
        >>> import fcn, tempfile
        >>> model, path = fcn.build_model("fcn8s", weights=None, width=1 / 16), tempfile.mkdtemp()
        >>> model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        >>> model.save(path + "/last.keras")
        >>> type(load_checkpoint(path + "/last.keras").optimizer).__name__
        'SGD'
    """
    enable_memory_growth()
    return keras.models.load_model(_existing(path), safe_mode=True)
