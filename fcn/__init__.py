"""fcn: FCN-8s/16s/32s semantic segmentation for TensorFlow/Keras 3 that stays inside its memory.

The package, by floor (``docs/architecture.md``): facts on the ground floor ([`fcn.layout`][],
[`fcn.classes`][], [`fcn.options`][], [`fcn.presets`][], [`fcn.device`][]); the model
([`fcn.model`][], its layers, VGG16 weights, in-place initialisation, lean gradients), data
([`fcn.data`][]), scores and pictures ([`fcn.metrics`][], [`fcn.results`][],
[`fcn.plots`][]) above them; the inference wing ([`fcn.inference`][]) and the training wing
([`fcn.training`][]) on top; the command line (``fcn.cli``) at the front door.

Every public name below is a name of ``fcn`` itself, loaded when first used (PEP 562): ``import
fcn`` imports no TensorFlow, so ``fcn --help`` answers at once; ``fcn.train`` imports the
training wing the first time it is read. Importing changes no global TensorFlow setting either:
[`enable_memory_growth`][] runs when a model is loaded or trained and in the ``fcn`` command, not
when one is built (see its docstring); the CPU kernel set is [`choose_kernels`][]'s to set, called
before TensorFlow starts (the ``fcn`` command calls it for each command).

Examples:
    >>> import fcn
    >>> fcn.VARIANTS, fcn.NUM_CLASSES
    (('fcn32s', 'fcn16s', 'fcn8s', 'fcn8s_atonce'), 21)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

if TYPE_CHECKING:  # what the names below are, for type checkers and the API reference
    from fcn import data
    from fcn.caffe import convert_caffe
    from fcn.classes import IGNORE_LABEL, NUM_CLASSES, VOC_CLASSES
    from fcn.cpu import choose_kernels
    from fcn.device import OutOfMemoryError, enable_memory_growth
    from fcn.inference.evaluate import EvaluationCallback, evaluate
    from fcn.inference.export import export_model
    from fcn.inference.model_files import load_model
    from fcn.inference.predict import predict, predict_files, predict_proba
    from fcn.layout import CROP_OFFSETS, VARIANTS
    from fcn.metrics import ConfusionMatrix, MeanIoU
    from fcn.model import build_model, transfer_weights
    from fcn.results import EvaluationResult
    from fcn.training.batch_size import find_batch_size
    from fcn.training.config import TrainConfig
    from fcn.training.train import TrainResult, train

_PUBLIC: dict[str, str] = {
    "data": "fcn.data",
    "convert_caffe": "fcn.caffe",
    "IGNORE_LABEL": "fcn.classes", "NUM_CLASSES": "fcn.classes", "VOC_CLASSES": "fcn.classes",
    "choose_kernels": "fcn.cpu",
    "OutOfMemoryError": "fcn.device", "enable_memory_growth": "fcn.device",
    "EvaluationCallback": "fcn.inference.evaluate", "evaluate": "fcn.inference.evaluate",
    "export_model": "fcn.inference.export",
    "load_model": "fcn.inference.model_files",
    "predict": "fcn.inference.predict", "predict_files": "fcn.inference.predict",
    "predict_proba": "fcn.inference.predict",
    "CROP_OFFSETS": "fcn.layout", "VARIANTS": "fcn.layout",
    "ConfusionMatrix": "fcn.metrics", "MeanIoU": "fcn.metrics",
    "build_model": "fcn.model", "transfer_weights": "fcn.model",
    "EvaluationResult": "fcn.results",
    "find_batch_size": "fcn.training.batch_size",
    "TrainConfig": "fcn.training.config",
    "TrainResult": "fcn.training.train", "train": "fcn.training.train",
}  # fmt: skip
"""Each public name and the module it lives in (the imports above say the same for static
tools; ``tests/test_architecture.py`` checks that they agree)."""

__all__ = ["__version__", *_PUBLIC]


def __getattr__(name: str) -> Any:
    """``fcn.<name>``: the public name, imported from its module on first use and kept."""
    if name not in _PUBLIC:
        raise AttributeError(f"module 'fcn' has no attribute {name!r}")
    module = importlib.import_module(_PUBLIC[name])
    value = module if module.__name__ == f"fcn.{name}" else getattr(module, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
