"""fcn: FCN-8s/16s/32s semantic segmentation for TensorFlow/Keras 3 that stays inside its memory.

The package, by wing: the model (:mod:`fcn.model`, its layers, VGG16 weights, in-place
initialisation, lean gradients), data (:mod:`fcn.data`), training (:mod:`fcn.training.train`,
:mod:`fcn.training.recipes`, :mod:`fcn.training.checkpoint`, :mod:`fcn.device`), inference
(:mod:`fcn.inference`: streamed forward pass, tiles, budgets, model files, evaluate, predict,
export), and scores and pictures (:mod:`fcn.metrics`, :mod:`fcn.results`, :mod:`fcn.plots`).
Importing it changes no global TensorFlow setting: :func:`enable_memory_growth` runs when a
model is built, loaded or trained (see its docstring).
"""

__version__ = "0.1.0"

from fcn import data
from fcn.caffe import convert_caffe
from fcn.classes import IGNORE_LABEL, NUM_CLASSES, VOC_CLASSES
from fcn.device import OutOfMemoryError, enable_memory_growth
from fcn.inference.evaluate import EvaluationCallback, evaluate
from fcn.inference.export import export_model
from fcn.inference.model_files import load_model
from fcn.inference.predict import predict, predict_files
from fcn.metrics import ConfusionMatrix, MeanIoU
from fcn.model import CROP_OFFSETS, VARIANTS, build_model, transfer_weights
from fcn.results import EvaluationResult
from fcn.training.batch_size import find_batch_size
from fcn.training.config import TrainConfig
from fcn.training.train import TrainResult, train

__all__ = [
    "CROP_OFFSETS",
    "ConfusionMatrix",
    "EvaluationCallback",
    "EvaluationResult",
    "MeanIoU",
    "IGNORE_LABEL",
    "NUM_CLASSES",
    "VARIANTS",
    "VOC_CLASSES",
    "OutOfMemoryError",
    "TrainConfig",
    "TrainResult",
    "__version__",
    "build_model",
    "convert_caffe",
    "data",
    "enable_memory_growth",
    "evaluate",
    "export_model",
    "find_batch_size",
    "load_model",
    "predict",
    "predict_files",
    "train",
    "transfer_weights",
]
