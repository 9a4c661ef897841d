"""fcn: FCN-8s/16s/32s semantic segmentation for TensorFlow/Keras 3 that stays inside its memory."""

__version__ = "0.1.0"

from fcn import data
from fcn.classes import IGNORE_LABEL, NUM_CLASSES, VOC_CLASSES
from fcn.config import TrainConfig
from fcn.device import OutOfMemoryError, enable_memory_growth, find_batch_size
from fcn.evaluate import EvaluationCallback, evaluate
from fcn.metrics import MeanIoU
from fcn.model import CROP_OFFSETS, VARIANTS, build_model, transfer_weights
from fcn.predict import load_model, predict, predict_files
from fcn.results import EvaluationResult
from fcn.train import TrainResult, train

enable_memory_growth()  # before anything touches a GPU: no process takes a whole card

__all__ = [
    "CROP_OFFSETS",
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
    "data",
    "evaluate",
    "find_batch_size",
    "load_model",
    "predict",
    "predict_files",
    "train",
    "transfer_weights",
]
