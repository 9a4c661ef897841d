"""fcn: FCN-8s/16s/32s semantic segmentation for TensorFlow/Keras 3 that stays inside its memory."""

__version__ = "0.1.0"

from fcn.classes import IGNORE_LABEL, NUM_CLASSES, VOC_CLASSES
from fcn.model import CROP_OFFSETS, VARIANTS, build_model, transfer_weights

__all__ = [
    "CROP_OFFSETS",
    "IGNORE_LABEL",
    "NUM_CLASSES",
    "VARIANTS",
    "VOC_CLASSES",
    "__version__",
    "build_model",
    "transfer_weights",
]
