"""The trained models ``fcn`` knows by name (the paper's four), in one registry.

Pure data and paths: importing it imports nothing heavy, so ``fcn models`` lists them at once,
with where each is kept ([`weights_dirs`][], [`placed_model`][]). What a
name is made of: the architecture ([`fcn.VARIANTS`][]), its classes, where the file comes
from and its checksum, the licence, how it was trained and the accuracy its authors published.
[`fcn.load_model`][] turns a name into a model ([`fcn.inference.model_files`][]: download,
conversion, cache); ``fcn predict --model NAME`` and ``fcn demo`` read the same entries.
"""

from __future__ import annotations

import difflib
import os
from dataclasses import dataclass
from pathlib import Path

CAFFE_MODELS_URL = "http://dl.caffe.berkeleyvision.org/"
"""Where the FCN authors publish their trained Caffe models (``fcn.berkeleyvision.org``);
``$FCN_MODELS_URL`` replaces it (a mirror, ending in ``/``)."""

PAPER_TRAINING = (
    "Caffe, by the FCN authors: VGG16 (ImageNet) fine-tuned on SBD train + VOC2011 train less "
    "seg11valid, whole images at batch 1, SGD momentum 0.99, summed loss"
)
"""How the paper's VOC models were made (``voc-fcn*/solve.py`` of fcn.berkeleyvision.org)."""


@dataclass(frozen=True)
class Preset:
    """One trained model known by name.

    Attributes:
        name: what [`fcn.load_model`][], ``fcn predict --model`` and ``fcn models`` call it.
        variant: its [`fcn.VARIANTS`][] architecture.
        classes: class count of its score layers (21: background and VOC's 20 objects).
        caffemodel: the file name under [`CAFFE_MODELS_URL`][].
        md5: the file's MD5, or None where its authors publish none (the conversion still
            refuses a truncated file or one with other layers or shapes).
        licence: the licence its authors release it under.
        made: how it was trained.
        accuracy: its published accuracy (mean IU on VOC2011 seg11valid, 736 images).

    Examples:
        >>> preset = PRESETS["fcn8s-voc"]
        >>> preset.variant, CAFFE_MODELS_URL + preset.caffemodel
        ('fcn8s', 'http://dl.caffe.berkeleyvision.org/fcn8s-heavy-pascal.caffemodel')
    """

    name: str
    variant: str
    classes: int
    caffemodel: str
    md5: str | None
    licence: str
    made: str
    accuracy: str

    def describe(self) -> str:
        """One line for ``fcn models``.

        Examples:
            >>> PRESETS["fcn32s-voc"].describe()
            'fcn32s-voc  fcn32s, 21 classes, 63.6 mean IU on seg11valid; BSD-2-Clause'
        """
        return (
            f"{self.name}  {self.variant}, {self.classes} classes, {self.accuracy}; {self.licence}"
        )


def _paper(name: str, variant: str, caffemodel: str, md5: str | None, accuracy: float,
           how: str) -> Preset:  # fmt: skip
    return Preset(
        name, variant, 21, caffemodel, md5, "BSD-2-Clause", f"{PAPER_TRAINING}; {how}",
        f"{accuracy} mean IU on seg11valid",
    )


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        _paper("fcn8s-voc", "fcn8s", "fcn8s-heavy-pascal.caffemodel",
               "c03b2953ebd846c270da1a8e8f200c09", 65.5,
               "staged: from fcn16s-voc, then 8-pixel stride"),
        _paper("fcn16s-voc", "fcn16s", "fcn16s-heavy-pascal.caffemodel", None, 65.0,
               "staged: from fcn32s-voc, then 16-pixel stride"),
        _paper("fcn32s-voc", "fcn32s", "fcn32s-heavy-pascal.caffemodel", None, 63.6,
               "from VGG16, 32-pixel stride"),
        _paper("fcn8s-atonce-voc", "fcn8s_atonce", "fcn8s-atonce-pascal.caffemodel", None, 65.4,
               "all strides at once from VGG16, pool3/pool4 scaled by 1e-4/1e-2"),
    )
}  # fmt: skip
"""The known models by name. The MD5 of fcn8s-heavy-pascal is the one wkentaro/fcn checks for
the same download; the accuracies are those of fcn.berkeleyvision.org's README."""

DEFAULT_MODEL = "fcn8s-voc"
"""The model [`fcn.load_model`][] (and ``fcn.predict``, ``fcn predict``) use when none is
given."""


def preset(name: str) -> Preset:
    """The preset called ``name``.

    Raises:
        KeyError: no such preset; the message lists the known names.

    Examples:
        >>> preset("fcn16s-voc").variant
        'fcn16s'
    """
    if name not in PRESETS:
        raise KeyError(f"no model called {name!r}; {known_names(name)}")
    return PRESETS[name]


def known_names(name: str) -> str:
    """The known models' names, and the closest to ``name`` (a mistyped one) if any is close.

    Examples:
        >>> known_names("fcn9s-voc")
        'known models: fcn8s-voc, fcn16s-voc, fcn32s-voc, fcn8s-atonce-voc; did you mean fcn8s-voc?'
        >>> known_names("FCN16S-VOC").endswith("did you mean fcn16s-voc?"), known_names("unet")
        (True, 'known models: fcn8s-voc, fcn16s-voc, fcn32s-voc, fcn8s-atonce-voc')
    """
    folded = {known.casefold(): known for known in PRESETS}
    close = [folded[k] for k in difflib.get_close_matches(name.casefold(), folded, n=1)]
    return f"known models: {', '.join(PRESETS)}" + (f"; did you mean {close[0]}?" if close else "")


def cache_dir() -> Path:
    """Keras' per-user cache, ``$KERAS_HOME/models`` (default ``~/.keras/models``), read at
    call time: where known models' Caffe files are downloaded.

    Examples:
        >>> cache_dir().name
        'models'
    """
    return Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "models"


def weights_dirs() -> list[Path]:
    """Where [`fcn.load_model`][] looks for a known model's ``<name>.keras``, in order:
    ``$FCN_WEIGHTS_DIR``, ``./weights`` (the current folder's), and the per-user cache
    ``$KERAS_HOME/models/fcn`` (default ``~/.keras/models/fcn``). Nothing inside the installed
    package: site-packages is no place for a 500 MB model.

    Examples:
        >>> [d.name for d in weights_dirs()][-2:]
        ['weights', 'fcn']
    """
    dirs = [Path(os.environ["FCN_WEIGHTS_DIR"])] if "FCN_WEIGHTS_DIR" in os.environ else []
    return [*dirs, Path.cwd() / "weights", cache_dir() / "fcn"]


def placed_model(name: str) -> Path | None:
    """The first ``<name>.keras`` in [`weights_dirs`][] (placed by hand, or converted there
    on an earlier use), or None: [`fcn.load_model`][] would download it.

    Examples:
        >>> import tempfile
        >>> os.environ["FCN_WEIGHTS_DIR"] = folder = tempfile.mkdtemp()
        >>> placed_model("fcn16s-voc") is None
        True
        >>> _ = Path(folder, "fcn16s-voc.keras").write_bytes(b"")
        >>> placed_model("fcn16s-voc") == Path(folder, "fcn16s-voc.keras")
        True
        >>> del os.environ["FCN_WEIGHTS_DIR"]
    """
    paths = (folder / f"{name}.keras" for folder in weights_dirs())
    return next((path for path in paths if path.exists()), None)


def download_url(name: str) -> str:
    """Where the known model ``name``'s Caffe file is downloaded from: [`CAFFE_MODELS_URL`][],
    or ``$FCN_MODELS_URL`` (a mirror, ending in ``/``) where set.

    Examples:
        >>> download_url("fcn8s-voc")
        'http://dl.caffe.berkeleyvision.org/fcn8s-heavy-pascal.caffemodel'
    """
    return os.environ.get("FCN_MODELS_URL", CAFFE_MODELS_URL) + preset(name).caffemodel
