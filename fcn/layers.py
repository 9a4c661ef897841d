"""The small custom pieces of an FCN graph: Caffe-style crop, constant scale, bilinear kernels,
a convolution with a lean backward pass, and the reduction of scores to class labels (the
dtype convention of every label map ``fcn`` returns or exports).

All are registered for ``.keras`` serialisation (no Lambda layers anywhere).
"""

from __future__ import annotations

import keras
import numpy as np
import tensorflow as tf

from fcn.conv_gradients import lean_conv2d


def bilinear_filter(size: int) -> np.ndarray:
    """The (size, size) bilinear interpolation kernel of the reference FCN ``surgery.py``.

    Examples:
        >>> (bilinear_filter(4) * 16).astype(int)
        array([[1, 3, 3, 1],
               [3, 9, 9, 3],
               [3, 9, 9, 3],
               [1, 3, 3, 1]])
    """
    factor = (size + 1) // 2
    center = factor - 1 if size % 2 == 1 else factor - 0.5
    rows, cols = np.ogrid[:size, :size]
    return (1 - abs(rows - center) / factor) * (1 - abs(cols - center) / factor)


@keras.saving.register_keras_serializable(package="fcn")
class BilinearUpsampling(keras.initializers.Initializer):
    """Kernel initializer for a (k, k, C, C) transposed conv: bilinear on the diagonal, 0 off it.

    Each class is upsampled on its own, exactly as ``surgery.interp`` fills Caffe's
    ``Deconvolution`` weights.

    Examples:
        >>> kernel = np.asarray(BilinearUpsampling()((4, 4, 2, 2)))
        >>> kernel.shape, np.array_equal(kernel[:, :, 1, 1], bilinear_filter(4))
        ((4, 4, 2, 2), True)
        >>> int(np.count_nonzero(kernel[:, :, 0, 1]))  # class 0 never mixes into class 1
        0
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

    Examples:
        >>> x = np.arange(36, dtype="float32").reshape(1, 6, 6, 1)
        >>> CaffeCrop(offset=2)([x, np.zeros((1, 2, 3, 5))])[0, :, :, 0].numpy().tolist()
        [[14.0, 15.0, 16.0], [20.0, 21.0, 22.0]]
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
    [`CaffeCrop`][] that also names its C channels (``class_names``), so that a saved model
    knows its classes.

    Examples:
        >>> crop = ScoreCrop(31, class_names=["background", "cat"])
        >>> scores = crop([np.zeros((1, 90, 90, 2)), np.zeros((1, 20, 30, 3))])  # onto the image
        >>> tuple(scores.shape), crop.get_config()["class_names"]
        ((1, 20, 30, 2), ('background', 'cat'))
    """

    def __init__(self, offset: int, class_names: tuple[str, ...] | None = None, **kwargs):
        super().__init__(offset, **kwargs)
        self.class_names = tuple(class_names) if class_names else None

    def get_config(self):
        return {**super().get_config(), "class_names": self.class_names}


@keras.saving.register_keras_serializable(package="fcn")
class Scale(keras.layers.Layer):
    """Multiply by a fixed constant (the at-once FCN-8s scales pool4 by 0.01, pool3 by 1e-4).

    Examples:
        >>> Scale(0.25)(np.array([[4.0, 8.0]], "float32")).numpy().tolist()
        [[1.0, 2.0]]
    """

    def __init__(self, factor: float, **kwargs):
        super().__init__(**kwargs)
        self.factor = float(factor)

    def call(self, x):
        return x * keras.ops.cast(self.factor, x.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "factor": self.factor}


@keras.saving.register_keras_serializable(package="fcn")
class LeanConv2D(keras.layers.Conv2D):
    """Keras' ``Conv2D`` (same weights, config and results) with a lean backward pass.

    * The convolution's gradients are those of [`fcn.conv_gradients.lean_conv2d`][]: no
      temporaries the size of fc6's kernel, and under Eigen's CPU kernels no whole-layer im2col
      matrix. Convolutions other than stride 1, undilated, ungrouped with an odd square kernel
      run as Keras runs them.
    * The bias is added by ``tf.nn.bias_add``, whose gradient needs nothing of the forward pass.
      Keras adds it with a broadcasting ``add``, whose gradient reads the shape of the
      convolution's output when a dimension is unknown (the batch, or the size of whole
      images), which can keep pre-activations alive until the backward pass reaches them
      (the figure: `docs/design.md#training-fcntraining`, "A lean training step").

    Examples:
        >>> layer = LeanConv2D(8, 3, padding="same", activation="relu")
        >>> tuple(layer(np.zeros((1, 10, 10, 3), "float32")).shape)
        (1, 10, 10, 8)
    """

    def convolution_op(self, inputs, kernel):
        k = self.kernel_size
        if (
            self.strides != (1, 1) or self.dilation_rate != (1, 1) or self.groups != 1
            or k[0] != k[1] or k[0] % 2 == 0 or self.data_format != "channels_last"
        ):  # fmt: skip
            return super().convolution_op(inputs, kernel)
        return lean_conv2d(inputs, tf.convert_to_tensor(kernel), self.padding)

    def call(self, inputs):
        if self.data_format != "channels_last":
            return super().call(inputs)
        outputs = self.convolution_op(inputs, self.kernel)
        if self.use_bias:
            outputs = tf.nn.bias_add(outputs, tf.cast(self.bias, outputs.dtype))
        return outputs if self.activation is None else self.activation(outputs)


def label_dtype(num_classes: int) -> tf.DType:
    """The dtype of label maps of ``num_classes`` classes: uint8 up to 256, else int32.

    Examples:
        >>> label_dtype(21), label_dtype(1000)
        (tf.uint8, tf.int32)
    """
    return tf.uint8 if num_classes <= 256 else tf.int32


def class_labels(logits: tf.Tensor) -> tf.Tensor:
    """Class indices (...) of scores (..., C), in [`label_dtype`][] (C).

    Examples:
        >>> class_labels(tf.constant([[0.1, 2.0, -1.0], [3.0, 0.0, 0.0]])).numpy()
        array([1, 0], dtype=uint8)
    """
    indices = tf.argmax(logits, -1, output_type=tf.int32)
    return tf.cast(indices, label_dtype(logits.shape[-1]))


@keras.saving.register_keras_serializable(package="fcn")
class ClassLabels(keras.layers.Layer):
    """Scores (N, H, W, C) -> class labels (N, H, W) by [`class_labels`][]: the last layer of
    an exported labelling model ([`fcn.inference.export`][]). A plain ``tf.argmax``, which
    LiteRT runs with its builtin ops (``keras.ops.argmax`` adds a bitwise op it lacks).

    Examples:
        >>> ClassLabels()(np.array([[[[0.0, 1.0], [2.0, 1.0]]]], "float32")).numpy()
        array([[[1, 0]]], dtype=uint8)
    """

    def call(self, logits):
        return class_labels(logits)

    def compute_output_spec(self, logits):
        return keras.KerasTensor(logits.shape[:-1], label_dtype(logits.shape[-1]).name)
