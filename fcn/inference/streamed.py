"""Exact FCN inference in memory bounded by the image width: the network streams through rows.

An FCN's activations are largest where its resolution is: conv1_1 and conv1_2 output 64 float32
channels per pixel of the input padded by 100 px per side, so conv1_2 alone needs 512 bytes per
pixel, and fc6/fc7 (4096 channels at 1/32) another 32. Yet everything the coarse-to-fine fusion
reads is small: score_fr, score_pool4 and score_pool3 hold C channels at 1/32, 1/16 and 1/8
resolution, about 1.7 bytes per pixel for C = 21. [`compiled_forward`][] therefore runs

1. the network from the input to ``score_fr`` as a stream: a band of input rows is
   preprocessed, padded and sent through every layer in turn; each layer computes the output
   rows that the rows it has seen determine and carries the last few input rows (at most
   ``kernel - 1``) over to the next band, so nothing is computed twice and only one band of each
   layer exists at a time. The per-pixel branches off the pools (score_pool4, score_pool3 and
   the at-once scaling) run on each band as it passes; their outputs and score_fr are collected;
2. the fusion (upscore2, the crops and sums, at 1/8 resolution and below) in one go;
3. the last upsampling and the crop onto the input grid in bands of output rows, each band
   reduced to class indices (``output="labels"``) before the next one is made, if asked.

Every output row is computed from the same rows, weights and zero padding as in whole-image
inference, so the result equals ``model(images, training=False)`` up to float summation order
(``tests/test_forward.py``). Memory is a few bands of every layer plus the collected scores:
a 4000x3000 image streams through the full FCN-8s at ~0.4 GiB above the model's resting
footprint (``benchmarks/README.md``).

Which layer is what comes from [`fcn.model.Topology`][], which [`fcn.model`][] publishes
beside [`fcn.build_model`][]; the graph is checked against it. A model without an FCN's
layers, or whose graph differs from its topology (a layer inserted, a branch added), runs
whole, with a warning that says why and what it costs (its default pixel budget is
``WHOLE_MAX_PIXELS``, not ``STREAMED_MAX_PIXELS``). All sizes are in
[`fcn.inference.budget`][].
"""

from __future__ import annotations

import functools
import warnings
import weakref
from collections.abc import Callable

import keras
import numpy as np
import tensorflow as tf

from fcn.conv_gradients import conv2d
from fcn.inference import budget
from fcn.layers import LeanConv2D, Scale, class_labels, label_dtype
from fcn.model import Topology, topology_of
from fcn.options import Output


def _is_pool(layer) -> bool:
    return isinstance(layer, keras.layers.MaxPooling2D)


def _is_pointwise(layer) -> bool:
    return isinstance(layer, (keras.layers.Dropout, Scale)) or (
        _is_conv(layer) and layer.kernel_size == (1, 1)
    )


def _is_conv(layer) -> bool:
    return (
        type(layer) in (keras.layers.Conv2D, LeanConv2D)
        and layer.strides == (1, 1)
        and layer.dilation_rate == (1, 1)
        and layer.kernel_size[0] == layer.kernel_size[1]
        and layer.kernel_size[0] % 2 == 1
    )


def _streamable(layer) -> bool:
    if _is_pool(layer):
        return layer.pool_size == layer.strides and layer.padding == "same"
    return _is_conv(layer) or _is_pointwise(layer)


def _output_size(layer, size):
    """Output height (or width) of a streamable ``layer`` for ``size`` input rows (columns)."""
    if _is_pool(layer):
        return -(-size // layer.strides[0])
    if _is_conv(layer) and layer.padding == "valid":
        return size - layer.kernel_size[0] + 1
    return size


def _value_bytes(layer) -> int:
    """Bytes per value of ``layer``'s output: its compute dtype's (2 in bfloat16, 4 in float32)."""
    return tf.as_dtype(layer.compute_dtype).size


def _row_padding(layer) -> int:
    """Zero rows a streamed conv reads above and below its input ("same" padding)."""
    return layer.kernel_size[0] // 2 if _is_conv(layer) and layer.padding == "same" else 0


def _conv(layer: keras.layers.Conv2D, rows):
    """``layer`` on ``rows``, valid along the rows (their padding is in ``rows`` already)."""
    side = _row_padding(layer)
    dtype = layer.compute_dtype
    padding = [[0, 0], [0, 0], [side, side], [0, 0]] if side else "VALID"
    out = conv2d(tf.cast(rows, dtype), tf.cast(layer.kernel.value, dtype), padding)
    if layer.use_bias:
        out = tf.nn.bias_add(out, tf.cast(layer.bias.value, dtype))
    return layer.activation(out)


def _step(layer, rows, done, total, least):
    """Advance one streamed ``layer`` by one band.

    Args:
        rows: the rows carried over from the last band and the new ones: every input row from
            the first that the next output row reads (for a "same" conv the first band starts
            with its zero row(s), see ``_StreamedFCN.stream``).
        done: output rows made so far.
        total: the height of the layer's whole input (without padding rows).
        least: output rows a conv waits for before it runs (unless they are its last).

    Returns:
        The new output rows (possibly none), the new ``done`` and the rows to carry over.
    """
    count = tf.shape(rows)[1]
    if not (_is_conv(layer) or _is_pool(layer)):  # dropout, scaling: row by row
        return layer(rows, training=False), done + count, rows[:, count:]
    if _is_pool(layer):
        step = layer.strides[0]
        last = tf.equal(step * done + count, total)
        ready = done + tf.where(last, -(-count // step), count // step)

        def make():  # "same" padding completes an odd last window; other odd rows wait
            return layer(rows)[:, : ready - done]

        stop, used = ready, step * (ready - done)
    else:
        pad, size = _row_padding(layer), layer.kernel_size[0]
        if pad:  # the input's last rows are here: add the zero rows below them
            complete = tf.equal(done + count, total + pad)
            rows = tf.pad(rows, [[0, 0], [0, tf.where(complete, pad, 0)], [0, 0], [0, 0]])
        ready = done + tf.shape(rows)[1] - size + 1
        out_total = total + 2 * pad - size + 1
        enough = (ready - done >= least) | tf.equal(ready, out_total)
        stop = tf.maximum(tf.where(enough, ready, done), done)

        def make():
            return _conv(layer, rows)

        used = stop - done
    return tf.cond(stop > done, make, lambda: _no_rows(layer, rows)), stop, rows[:, used:]


def _no_rows(layer, rows):
    """The output of ``layer`` for none of ``rows``, made without running the layer: kernels
    disagree on empty input (a oneDNN 1x1 conv returns its input's channels, or raises)."""
    shape = tf.shape(rows)
    width = _output_size(layer, shape[2])
    return tf.zeros([shape[0], 0, width, layer.output.shape[-1]], layer.compute_dtype)


def _has_rows(x):
    return tf.shape(x)[1] > 0


def _advance(layer, carry, new, done, total, least):
    """``_step`` on ``carry`` + ``new``, where no kernel ever sees an empty band: with no
    ``new`` rows a layer can make no output rows (its last rows never wait), so it is skipped."""

    def step():
        rows = tf.cond(_has_rows(carry), lambda: tf.concat([carry, new], axis=1), lambda: new)
        return _step(layer, rows, done, total, least)

    return tf.cond(_has_rows(new), step, lambda: (_no_rows(layer, new), done, carry))


def _pointwise_path(path: list, rows):
    """The per-pixel ``path`` (a branch off the chain) on ``rows``, which may be empty."""

    def run():
        out = rows
        for layer in path:
            out = layer(out, training=False)
        return out

    return tf.cond(_has_rows(rows), run, lambda: _no_rows(path[-1], rows))


def _rows_first(x):
    """Swap the batch and row axes (TensorArray.concat joins along axis 0)."""
    return tf.transpose(x, [1, 0, *range(2, len(x.shape))])


class NotStreamableError(ValueError):
    """A model with an FCN's layer names whose graph differs from its [`Topology`][].

    [`streams`][] catches it and warns that the model runs whole, with its message.

    Examples:
        >>> issubclass(NotStreamableError, ValueError)
        True
    """


class _StreamedFCN:
    """The three stages of the module docstring, for a model of the given ``topology``.

    Raises:
        NotStreamableError: naming the first layer where the graph differs from ``topology``
            or cannot run in bands of rows.
    """

    def __init__(self, model: keras.Model, topology: Topology):
        layers = {layer.name: layer for layer in model.layers}

        def require(ok: bool, problem: str) -> None:
            if not ok:
                raise NotStreamableError(problem)

        def reads(layer, before) -> None:
            require(layer.input is before.output, f"{layer.name} does not read {before.name}")

        self.preprocess = layers[topology.preprocess]
        pad_layer = layers[topology.pad]
        reads(pad_layer, self.preprocess)
        padding = pad_layer.padding  # ((top, bottom), (left, right))
        self.pad = padding[0][0]
        require(set(np.ravel(padding)) == {self.pad}, f"{pad_layer.name} pads unevenly")
        self.chain = [layers[name] for name in topology.chain]
        self.branches: dict[int, list] = {}  # chain index -> per-pixel layers fed by it
        for name, path in topology.branches.items():
            self.branches[topology.chain.index(name)] = [layers[n] for n in path]
        for before, layer in zip([pad_layer, *self.chain], self.chain):
            reads(layer, before)
            require(_streamable(layer), f"{layer.name} cannot run in bands of rows")
        for i, path in self.branches.items():
            for before, layer in zip([self.chain[i], *path], path):
                reads(layer, before)
                require(_is_pointwise(layer), f"{layer.name} is not a per-pixel layer")
        for i, layer in enumerate(self.chain[:-1]):
            known = [self.chain[i + 1], *self.branches.get(i, [])[:1]]
            for other in model.layers:
                if other not in known and any(
                    t is layer.output for t in tf.nest.flatten(other.input)
                ):
                    require(False, f"{other.name} reads {layer.name} outside the topology")
        self.upscore = layers[topology.upsampler]
        crop = layers[topology.crop]
        require(crop.input[0] is self.upscore.output, f"{crop.name} does not crop its upsampler")
        require(
            isinstance(self.upscore, keras.layers.Conv2DTranspose)
            and self.upscore.padding == "valid",
            f"{self.upscore.name} is not a transposed convolution without padding",
        )
        self.offset = crop.offset
        taps = [path[-1].output for path in self.branches.values()] + [self.chain[-1].output]
        self.fusion = keras.Model(taps, self.upscore.input) if len(taps) > 1 else None

    def input_rows(self, images, lo, hi):
        """Rows ``[lo, hi)`` of the preprocessed, padded images (what conv1_1 reads)."""
        shape, pad = tf.shape(images), self.pad
        first = tf.clip_by_value(lo - pad, 0, shape[1])
        stop = tf.clip_by_value(hi - pad, 0, shape[1])
        rows = tf.cond(  # a band inside the top or bottom padding reads no image row
            stop > first,
            lambda: self.preprocess(images[:, first:stop]),
            lambda: tf.zeros([shape[0], 0, shape[2], 3], self.preprocess.compute_dtype),
        )
        top = tf.clip_by_value(pad - lo, 0, hi - lo)
        bottom = hi - lo - top - (stop - first)
        return tf.pad(rows, [[0, 0], [top, bottom], [pad, pad], [0, 0]])

    def widths(self, width) -> list:
        """The columns each layer of the chain reads, for images ``width`` columns wide."""
        widths = [width + 2 * self.pad]
        for layer in self.chain[:-1]:
            widths.append(_output_size(layer, widths[-1]))
        return widths

    def band_rows(self, batch, width) -> tuple[list, tf.Tensor]:
        """For ``batch`` images ``width`` columns wide: the output rows each layer of the chain
        waits for (a band of at most ``BAND_BYTES`` of its output, at most ``MIN_ROWS``, of
        [`fcn.inference.budget`][]) and the input rows of one band (at least 2; conv1_1's
        output of them within ``BAND_BYTES``), each layer's values of its compute dtype's size.

        Examples:
            >>> from fcn import build_model
            >>> engine = _streamed(build_model("fcn8s", weights=None, width=1 / 16))
            >>> least, chunk = engine.band_rows(1, 300)
            >>> int(chunk) == budget.BAND_BYTES // (500 * 4 * 4)  # conv1_1: 4 float32 channels
            True
        """
        least = []
        for layer, columns in zip(self.chain, self.widths(width)):
            channels = layer.filters if _is_conv(layer) else 1
            row_bytes = batch * _output_size(layer, columns) * channels * _value_bytes(layer)
            least.append(tf.clip_by_value(budget.BAND_BYTES // row_bytes, 1, budget.MIN_ROWS))
        first = self.chain[0]
        first_row_bytes = batch * (width + 2 * self.pad) * first.filters * _value_bytes(first)
        return least, tf.maximum(2, budget.BAND_BYTES // first_row_bytes)

    def stream(self, images) -> list:
        """The outputs of the branches and of the chain's end, whole, for ``images``."""
        shape = tf.shape(images)
        total = [shape[1] + 2 * self.pad]
        for layer in self.chain[:-1]:
            total.append(_output_size(layer, total[-1]))
        widths = self.widths(shape[2])
        least, chunk = self.band_rows(shape[0], shape[2])
        count = -(-total[0] // chunk)
        taps = [*self.branches, len(self.chain) - 1]

        def band(i, dones, carries, parts):
            new = self.input_rows(images, i * chunk, tf.minimum((i + 1) * chunk, total[0]))
            dones, carries, parts = list(dones), list(carries), list(parts)
            for k, layer in enumerate(self.chain):
                new, dones[k], carries[k] = _advance(
                    layer, carries[k], new, dones[k], total[k], least[k]
                )
                if k in taps:
                    out = _pointwise_path(self.branches[k], new) if k in self.branches else new
                    j = taps.index(k)
                    parts[j] = parts[j].write(i, _rows_first(out))
            return i + 1, dones, carries, parts

        carries, channels, dtype = [], 3, self.preprocess.compute_dtype
        for k, layer in enumerate(self.chain):  # a "same" conv starts on its top zero rows
            top = _row_padding(layer)
            carries.append(tf.zeros([shape[0], top, widths[k], channels], dtype))
            channels = layer.filters if _is_conv(layer) else channels
            dtype = layer.compute_dtype
        dtypes = [self.branches[k][-1].compute_dtype for k in self.branches] + [dtype]
        parts = [
            tf.TensorArray(d, size=count, infer_shape=False, element_shape=[None] * 4)
            for d in dtypes
        ]
        scalars = [tf.TensorShape([])] * len(self.chain)
        invariants = (
            tf.TensorShape([]),
            scalars,
            [tf.TensorShape([None, None, None, c.shape[-1]]) for c in carries],
            [tf.TensorShape(None)] * len(parts),
        )
        *_, parts = tf.while_loop(
            lambda i, *_: i < count,
            band,
            (tf.constant(0), [tf.constant(0)] * len(self.chain), carries, parts),
            shape_invariants=invariants,
            parallel_iterations=1,
        )
        return [_rows_first(p.concat()) for p in parts]

    def __call__(self, images, output: Output):
        taps = self.stream(images)
        scores = self.fusion(taps, training=False) if self.fusion else taps[0]
        return self.head(scores, tf.shape(images), output)

    def head(self, scores, image_shape, output: Output):
        """The last upsampler and the crop onto the image, in bands of output rows."""
        up, offset = self.upscore, self.offset
        size, step = up.kernel_size[0], up.strides[0]
        height, width = image_shape[1], image_shape[2]
        last = tf.shape(scores)[1] - 1
        # the upsampler's output and its float32 crop
        row_bytes = image_shape[0] * (width + 2 * offset) * up.filters * (_value_bytes(up) + 4)
        band = tf.maximum(step, budget.BAND_BYTES // row_bytes)

        def one(lo, hi):
            first = tf.maximum(-((size - 1 - lo - offset) // step), 0)
            stop = tf.minimum((hi + offset - 1) // step, last) + 1
            logits = up(scores[:, first:stop])
            top = lo + offset - step * first
            logits = tf.cast(logits[:, top : top + hi - lo, offset : offset + width], "float32")
            return class_labels(logits) if output == "labels" else logits

        if output == "labels":
            return _in_bands(height, band, one, label_dtype(up.filters), 3)
        return _in_bands(height, band, one, tf.float32, 4)


def _in_bands(rows, band, compute: Callable, dtype, rank: int):
    """``compute(lo, hi)`` for consecutive bands of at most ``band`` rows covering ``[0, rows)``,
    one band at a time, concatenated along axis 1. Each result has ``dtype`` and ``rank``."""

    def body(i, parts):
        lo = i * band
        return i + 1, parts.write(i, _rows_first(compute(lo, tf.minimum(lo + band, rows))))

    count = -(-rows // band)
    parts = tf.TensorArray(dtype, size=count, infer_shape=False, element_shape=[None] * rank)
    _, parts = tf.while_loop(lambda i, _: i < count, body, (0, parts), parallel_iterations=1)
    return _rows_first(parts.concat())


_STREAMED: weakref.WeakKeyDictionary[keras.Model, _StreamedFCN | None] = (
    weakref.WeakKeyDictionary()
)
"""Each model's streamed form, or None where it runs whole; an entry goes with its model."""

_FORWARDS: weakref.WeakKeyDictionary[keras.Model, dict[str, Callable]] = (
    weakref.WeakKeyDictionary()
)
"""Each model's [`compiled_forward`][] functions, by output; an entry goes with its model
(the functions hold only a weak reference to it)."""


def _streamed(model: keras.Model) -> _StreamedFCN | None:
    """The streamed form of ``model`` (made once: ``_STREAMED``), or None, with a warning
    saying why and what running whole costs."""
    if model not in _STREAMED:
        found, engine = topology_of(model), None
        if found is None:
            reason = "it lacks the layers of an fcn.build_model FCN"
        else:
            try:
                engine = _StreamedFCN(model, found)
            except NotStreamableError as err:
                reason = f"its graph differs from {found.variant}'s: {err}"
        if engine is None:
            warnings.warn(
                f"model {model.name!r} runs whole, not streamed: {reason}. Whole inference "
                "needs ~0.55 KiB per padded input pixel for the full FCN-8s, so images above "
                f"{budget.WHOLE_MAX_PIXELS:,} pixels (not {budget.STREAMED_MAX_PIXELS:,}) run "
                "in tiles by default.",
                stacklevel=3,
            )
        _STREAMED[model] = engine
    return _STREAMED[model]


def streams(model: keras.Model) -> bool:
    """Whether ``model``'s forward passes stream in bands of rows (an FCN of
    [`fcn.build_model`][], checked against its [`Topology`][]); else they run
    whole, and a warning said why once.

    Examples:
        >>> from fcn import build_model
        >>> streams(build_model("fcn8s", weights=None, width=1 / 16))
        True
    """
    return _streamed(model) is not None


def compiled_forward(
    model: keras.Model, output: Output = "logits"
) -> Callable[[np.ndarray], tf.Tensor]:
    """Inference with ``model`` as ``tf.function``s (streamed, or whole where
    [`runs_whole`][fcn.inference.budget.runs_whole]), each traced once per input dtype for every
    batch and image size.

    Args:
        model: an FCN from [`fcn.build_model`][] (or any image -> logits model, run whole).
        output: ``"logits"``: float32 (N, H, W, C); ``"labels"``: their argmax (N, H, W),
            uint8 (int32 above 256 classes), taken band by band so that the logits never exist
            whole.

    Returns:
        A function of RGB images (N, H, W, 3), uint8 (kept uint8 until each band is read) or
        float 0..255, to the output above. It holds ``model`` for as long as it lives; its
        traced functions are made once per model and output (``_FORWARDS``, which holds the
        model weakly: they go with it).

    Examples:
        >>> from fcn import build_model
        >>> forward = compiled_forward(build_model("fcn8s", weights=None, width=1 / 16), "labels")
        >>> labels = forward(np.zeros((2, 40, 60, 3), np.uint8))
        >>> labels.shape, labels.dtype
        (TensorShape([2, 40, 60]), tf.uint8)
    """
    cache = _FORWARDS.setdefault(model, {})
    if output not in cache:
        streamed = _streamed(model)
        classes, weak_model = model.output_shape[-1], weakref.ref(model)

        def whole(images):
            logits = weak_model()(tf.cast(images, tf.float32), training=False)
            return class_labels(logits) if output == "labels" else logits

        def banded(images):
            return streamed(images, output)

        traced = {
            (run, dtype): tf.function(
                run, input_signature=[tf.TensorSpec((None, None, None, 3), dtype)]
            )
            for run in (whole, banded)
            for dtype in (tf.uint8, tf.float32)
        }  # traced on first use only

        def forward(images):
            images = tf.convert_to_tensor(images)
            if images.dtype != tf.uint8:
                images = tf.cast(images, tf.float32)
            if 0 in images.shape[:3]:  # no pixel: no kernel runs (oneDNN's differ on empty)
                if output == "labels":
                    return tf.zeros(images.shape[:3], label_dtype(classes))
                return tf.zeros([*images.shape[:3], classes], tf.float32)
            if streamed is None:
                return traced[whole, images.dtype](images)
            small = budget.runs_whole(*images.shape[:3], streamed.pad)
            return traced[whole if small else banded, images.dtype](images)

        cache[output] = forward
    # the cached function holds the model weakly (else the cache would keep its key alive);
    # the caller's holds it strongly: a function kept after its model was dropped still runs
    held = functools.partial(cache[output])
    held.model = model
    return held
