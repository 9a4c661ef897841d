"""fcn: FCN-8s/16s/32s semantic segmentation for TensorFlow/Keras 3 that stays inside its memory."""

__version__ = "0.1.0"

from fcn.classes import IGNORE_LABEL, NUM_CLASSES, VOC_CLASSES
from fcn.device import OutOfMemoryError, enable_memory_growth, find_batch_size
from fcn.model import CROP_OFFSETS, VARIANTS, build_model, transfer_weights
from fcn.train import TrainResult, train

enable_memory_growth()  # before anything touches a GPU: no process takes a whole card

__all__ = [
    "CROP_OFFSETS",
    "IGNORE_LABEL",
    "NUM_CLASSES",
    "VARIANTS",
    "VOC_CLASSES",
    "OutOfMemoryError",
    "TrainResult",
    "__version__",
    "build_model",
    "find_batch_size",
    "train",
    "transfer_weights",
]
