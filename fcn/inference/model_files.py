"""Model files: a known model's file (downloaded and converted once), where a default model is
looked for, its checksum, and safe loading.

The one place that opens a ``.keras`` file for inference: [`load_model`][] (``fcn.predict``,
``fcn.evaluate`` through the CLI, the demo) deserialises in Keras' safe mode (no arbitrary
code: the FCN has no Lambda layers) and checks the file against a ``SHA256SUMS`` beside it. (A
resumed training run builds its model from its recorded settings and reads only the values of
its checkpoint: [`fcn.train`][].)

The models known by name are [`fcn.presets.PRESETS`][] (the paper's trained VOC models, released
as Caffe files): by name (``load_model("fcn8s-voc")``) the file is downloaded once from the authors'
address into Keras' cache (resumable, MD5-checked where a checksum is published), converted once
([`fcn.convert_caffe`][]) and kept as ``<name>.keras`` in the cache's ``fcn`` folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import keras

from fcn.caffe import convert_caffe
from fcn.data.atomic import write_whole
from fcn.data.download import fetch, file_digest
from fcn.device import enable_memory_growth, resolve_precision
from fcn.inference.precision import set_precision
from fcn.initialize import load_keras_in_place
from fcn.options import Precision
from fcn.presets import (
    DEFAULT_MODEL,
    PRESETS,
    cache_dir,
    download_url,
    known_names,
    placed_model,
    preset,
)

DEFAULT_MODEL_FILE = f"{DEFAULT_MODEL}.keras"
"""Its file name: a model trained or converted by hand and placed in
[`weights_dirs`][fcn.presets.weights_dirs] wins over the download."""


class ModelUnavailableError(RuntimeError):
    """A known model is not cached and could not be downloaded; the message says from where
    and how to place the file by hand.

    Examples:
        >>> issubclass(ModelUnavailableError, RuntimeError)  # the CLI's one-line user errors
        True
    """

CHECKSUM_FILE = "SHA256SUMS"
"""``<sha256>  <file name>`` lines (the format of ``sha256sum``) beside model files."""


def check_sum(path: str | os.PathLike) -> None:
    """Compare ``path`` with its line in the [`CHECKSUM_FILE`][] beside it, if it has one.

    Raises:
        ValueError: the file's SHA-256 differs from the listed one (damaged or replaced).

    Examples:
        >>> import hashlib, tempfile
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
    if file_digest(path, "sha256") != listed[path.name]:
        raise ValueError(f"{path}: SHA-256 differs from {sums}: the file is damaged or replaced")


def _existing(path: str | os.PathLike) -> Path:
    path = Path(path)
    if not path.exists():
        if path.suffix or len(path.parts) > 1:  # a file's path
            raise FileNotFoundError(f"{path}: model file not found")
        raise FileNotFoundError(
            f"{path}: no such model file, and no known model has that name "
            f"({known_names(str(path))}; fcn models describes them)"
        )
    check_sum(path)
    return path


def known_model_path(name: str) -> Path:
    """The ``.keras`` file of the known model ``name``: the first ``<name>.keras`` in
    [`weights_dirs`][fcn.presets.weights_dirs], else downloaded and converted into
    ``cache_dir() / "fcn"``.

    Raises:
        ModelUnavailableError: not cached and the download failed (offline, a wrong checksum):
            the message names the file, the address and how to place it by hand.

    Examples:
        >>> import tempfile
        >>> from fcn import build_model
        >>> folder = Path(tempfile.mkdtemp())
        >>> build_model("fcn32s", weights=None, width=1 / 16).save(folder / "fcn32s-voc.keras")
        >>> os.environ["FCN_WEIGHTS_DIR"] = str(folder)
        >>> known_model_path("fcn32s-voc") == folder / "fcn32s-voc.keras"  # no download
        True
        >>> del os.environ["FCN_WEIGHTS_DIR"]
    """
    placed = placed_model(name)
    if placed is not None:
        return placed
    known = preset(name)
    caffemodel, url = cache_dir() / known.caffemodel, download_url(name)
    target = cache_dir() / "fcn" / f"{name}.keras"
    if not caffemodel.exists():
        caffemodel.parent.mkdir(parents=True, exist_ok=True)
        try:
            fetch(url, caffemodel, known.md5, progress=True)
        except (OSError, ValueError) as err:  # urllib's errors are OSErrors; a bad MD5 a DataError
            raise ModelUnavailableError(
                f"{name}: {known.caffemodel} is not in {caffemodel.parent} and downloading it "
                f"from {url} failed ({type(err).__name__}: {err}). Download it by hand into "
                f"that folder, or convert it yourself: fcn convert {known.caffemodel} "
                f"--variant {known.variant} --out {target}"
            ) from err
    target.parent.mkdir(parents=True, exist_ok=True)
    write_whole(target, convert_caffe(caffemodel, known.variant).save)  # a cached one is whole
    return target


def default_model_path() -> Path:
    """The first [`DEFAULT_MODEL_FILE`][] in [`weights_dirs`][fcn.presets.weights_dirs], else the
    known [`DEFAULT_MODEL`][] downloaded and converted ([`known_model_path`][]).

    Examples:
        >>> import tempfile
        >>> from fcn import build_model
        >>> folder = Path(tempfile.mkdtemp())
        >>> build_model("fcn8s", weights=None, width=1 / 16).save(folder / DEFAULT_MODEL_FILE)
        >>> os.environ["FCN_WEIGHTS_DIR"] = str(folder)
        >>> default_model_path().parent == folder  # a placed model wins over the download
        True
        >>> del os.environ["FCN_WEIGHTS_DIR"]
    """
    return known_model_path(DEFAULT_MODEL)


def load_model(
    path: str | os.PathLike | None = None, *, precision: Precision | None = None
) -> keras.Model:
    """Load a ``.keras`` FCN for inference: safe mode, checksum checked, every kernel written
    in place ([`fcn.initialize.load_keras_in_place`][]: no second copy of the weights).

    Args:
        path: a ``.keras`` file, the name of a [`fcn.presets.PRESETS`][] model (``"fcn8s-voc"``:
            downloaded and converted on first use), or None: [`default_model_path`][].
        precision: None (the model as the file has it), ``"float32"``, ``"bfloat16"`` or
            ``"auto"`` ([`fcn.inference.precision`][]): the model is built in that precision
            and each weight read from the file into it, so no float32 copy of a bf16 model
            ever exists.

    Examples:
        >>> import fcn, tempfile
        >>> path = tempfile.mkdtemp() + "/tiny.keras"
        >>> fcn.build_model("fcn8s", weights=None, width=1 / 16).save(path)
        >>> load_model(path).output_shape
        (None, None, None, 21)
    """
    enable_memory_growth()
    if path is None:
        path = default_model_path()
    elif str(path) in PRESETS:
        path = known_model_path(str(path))
    if precision is None:
        return load_keras_in_place(_existing(path), safe_mode=True)
    dtype = resolve_precision(precision)  # refused before anything is read
    return load_keras_in_place(
        _existing(path), safe_mode=True, edit=lambda config: set_precision(config, dtype)
    )
