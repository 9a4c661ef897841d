"""The small custom pieces of an FCN graph: Caffe-style crop, constant scale, bilinear kernels.

All are registered for ``.keras`` serialisation (no Lambda layers anywhere).
"""

from __future__ import annotations

import keras
import numpy as np


def bilinear_filter(size: int) -> np.ndarray:
    """The (size, size) bilinear interpolation kernel of the reference FCN ``surgery.py``."""
    factor = (size + 1) // 2
    center = factor - 1 if size % 2 == 1 else factor - 0.5
    rows, cols = np.ogrid[:size, :size]
    return (1 - abs(rows - center) / factor) * (1 - abs(cols - center) / factor)


@keras.saving.register_keras_serializable(package="fcn")
class BilinearUpsampling(keras.initializers.Initializer):
    """Kernel initializer for a (k, k, C, C) transposed conv: bilinear on the diagonal, 0 off it.

    Each class is upsampled on its own, exactly as ``surgery.interp`` fills Caffe's
    ``Deconvolution`` weights.
    """

    def __call__(self, shape, dtype=None):
        height, width, out_channels, in_channels = shape
        if height != width or out_channels != in_channels:
            raise ValueError(f"bilinear upsampling needs a (k, k, C, C) kernel, got {shape}")
        kernel = np.zeros(shape, dtype="float32")
        filt = bilinear_filter(height)
        for c in range(in_channels):
            kernel[:, :, c, c] = filt
        return keras.ops.convert_to_tensor(kernel, dtype=dtype)


@keras.saving.register_keras_serializable(package="fcn")
class CaffeCrop(keras.layers.Layer):
    """Caffe's ``Crop`` layer: cut ``x`` to the height and width of ``reference``.

    Called on ``[x, reference]``; the window starts ``offset`` pixels from the top-left corner of
    ``x`` on both axes. ``x`` is (N, H, W, C), ``reference`` is (N, h, w, any); output (N, h, w, C).
    """

    def __init__(self, offset: int, **kwargs):
        super().__init__(**kwargs)
        self.offset = int(offset)

    def call(self, inputs):
        x, reference = inputs
        shape = keras.ops.shape(reference)
        o = self.offset
        return x[:, o : o + shape[1], o : o + shape[2], :]

    def compute_output_shape(self, input_shapes):
        x_shape, ref_shape = input_shapes
        return (x_shape[0], ref_shape[1], ref_shape[2], x_shape[3])

    def get_config(self):
        return {**super().get_config(), "offset": self.offset}


@keras.saving.register_keras_serializable(package="fcn")
class ScoreCrop(CaffeCrop):
    """The last crop, onto the input's pixel grid, of an FCN's class scores: a
    :class:`CaffeCrop` that also names its C channels (``class_names``), so that a saved model
    knows its classes."""

    def __init__(self, offset: int, class_names: tuple[str, ...] | None = None, **kwargs):
        super().__init__(offset, **kwargs)
        self.class_names = tuple(class_names) if class_names else None

    def get_config(self):
        return {**super().get_config(), "class_names": self.class_names}


@keras.saving.register_keras_serializable(package="fcn")
class Scale(keras.layers.Layer):
    """Multiply by a fixed constant (the at-once FCN-8s scales pool4 by 0.01, pool3 by 1e-4)."""

    def __init__(self, factor: float, **kwargs):
        super().__init__(**kwargs)
        self.factor = float(factor)

    def call(self, x):
        return x * keras.ops.cast(self.factor, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}
