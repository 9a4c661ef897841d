"""The one place where images are prepared for the VGG16 weights.

Keras' (and Caffe's) VGG16 ImageNet weights expect BGR channels in the 0..255 range with the
ImageNet mean subtracted. FCN models apply [`CaffePreprocess`][] as their first layer, so
train, evaluate and predict all feed plain RGB (uint8 or float, 0..255) and can never disagree.
"""

from __future__ import annotations

import keras
import numpy as np

MEAN_BGR: tuple[float, float, float] = (103.939, 116.779, 123.68)
"""ImageNet mean pixel of the VGG16 weights, BGR order, 0..255 (``keras.applications.vgg16``)."""

PAPER_MEAN_BGR: tuple[float, float, float] = (104.00698793, 116.66876762, 122.67891434)
"""The mean pixel the FCN paper's Caffe models subtract (``voc_layers.py`` of the FCN
repository), BGR, 0..255: within one grey level of [`MEAN_BGR`][], and the mean of the
models converted from Caffe ([`fcn.convert_caffe`][])."""

MEAN_RGB: tuple[int, int, int] = tuple(int(round(v)) for v in MEAN_BGR[::-1])
"""The same mean as a uint8 RGB colour: padding an image with it is zero after preprocessing."""


@keras.saving.register_keras_serializable(package="fcn")
class CaffePreprocess(keras.layers.Layer):
    """RGB 0..255 (any dtype) -> float BGR minus ``mean`` (BGR, default the ImageNet mean of
    Keras' VGG16, [`MEAN_BGR`][]). Shape (N, H, W, 3) kept.

    Examples:
        >>> rgb = np.array([[[[124, 117, 104]]]], np.uint8)  # (1, 1, 1, 3)
        >>> bgr = CaffePreprocess()(rgb)  # BGR, minus MEAN_BGR
        >>> bgr.dtype, bgr.numpy().astype(float).round(3).tolist()
        (tf.float32, [[[[0.061, 0.221, 0.32]]]])
    """

    def __init__(self, mean: tuple[float, float, float] = MEAN_BGR, **kwargs):
        super().__init__(**kwargs)
        self.mean = tuple(float(v) for v in mean)

    def call(self, images):
        x = keras.ops.cast(images, self.compute_dtype)
        x = keras.ops.flip(x, axis=-1)
        return x - keras.ops.convert_to_tensor(np.array(self.mean), dtype=self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "mean": list(self.mean)}
