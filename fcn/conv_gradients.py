"""Convolutions whose gradients' temporaries stay small (what makes an FCN training step lean),
and whose large-kernel forward runs as matrix products (what makes fc6 fast).

TensorFlow's own backward kernels for a convolution can cost several times their results:

* fc6 (a 7x7 convolution of 512 into 4096 channels): its kernel gradient needs temporaries the
  size of its kernel, and under oneDNN its input gradient a reordered copy of the kernel. Here
  both gradients are single matrix products over the layer's patch matrix
  ([`patch_gradients`][]), a small fraction of the kernel's size.
* 3x3 convolutions under Eigen (TensorFlow's CPU kernels where oneDNN is off): each of the two
  backward kernels builds the layer's whole im2col matrix, many times its activation. Under
  Eigen the gradients here are computed in bands of output rows ([`banded_gradients`][]), each
  band's matrix within [`IM2COL_BAND_BYTES`][]. oneDNN's kernels stay within twice the
  activation, so they run as they are.

The forward pass is TensorFlow's own convolution, except for kernels of at least
[`ROW_PRODUCT_KERNEL`][] rows without padding (fc6): those run as one matrix product per kernel
row ([`row_products`][]), because oneDNN's convolution reads fc6's kernel into its own blocked
layout on every call. Every path computes the same sums (in another order: equal to float
rounding). The figures: `docs/design.md#training-fcntraining` ("A lean training step") and
`docs/design.md#bf16-where-the-hardware-has-it-fcninferenceprecisionpy-fcndevicepy` (fc6's
forward).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import tensorflow as tf

from fcn.device import cpu_kernels

IM2COL_BAND_BYTES = 32 * 2**20
"""Bytes of im2col matrix per band of [`banded_gradients`][] (the input rows a band of output
rows reads, times the kernel's height, width and input channels): a training step's memory, not
inference's bands ([`fcn.inference.budget.BAND_BYTES`][])."""

ROW_PRODUCT_COLUMNS = 256
"""Output channels per matrix product of [`row_products`][]: a kernel row's band (fc6: 3,584 x
256 floats, 3.5 MiB) stays in cache while every output position reads it, where a whole row
(56 MiB) does not. The figures: benchmarks/README.md, "The default step: where its time
goes"."""

ROW_PRODUCT_KERNEL = 7
"""Kernels with at least this many rows, unpadded, run forward as [`row_products`][] (measured
on fc6's 7x7 only; 3x3 convolutions run at the kernels' peak as they are)."""


_native_only = False


@contextlib.contextmanager
def native_convolutions() -> Iterator[None]:
    """Within it, what is traced runs every convolution as ``tf.nn.conv2d``: for graphs that
    other runtimes read (LiteRT lacks ``ExtractImagePatches``, tf2onnx cannot shape its
    reshapes), at fc6's oneDNN speed.

    Examples:
        >>> with native_convolutions():
        ...     conv2d(tf.zeros((1, 9, 9, 2)), tf.zeros((7, 7, 2, 4)), "VALID").shape
        TensorShape([1, 3, 3, 4])
    """
    global _native_only
    before, _native_only = _native_only, True
    try:
        yield
    finally:
        _native_only = before


def conv2d(x: tf.Tensor, kernel: tf.Tensor, padding) -> tf.Tensor:
    """The forward of a stride-1 convolution: [`row_products`][] for a kernel of at least
    [`ROW_PRODUCT_KERNEL`][] rows and ``"VALID"`` padding, else ``tf.nn.conv2d`` (``padding``
    as it takes it: ``"SAME"``, ``"VALID"`` or explicit pairs).

    Examples:
        >>> conv2d(tf.zeros((1, 9, 9, 2)), tf.zeros((7, 7, 2, 4)), "VALID").shape
        TensorShape([1, 3, 3, 4])
    """
    if not _native_only and isinstance(padding, str) and padding.upper() == "VALID" and (
        kernel.shape[0] >= ROW_PRODUCT_KERNEL
    ):
        return row_products(x, kernel)
    return tf.nn.conv2d(x, kernel, 1, padding)


def row_products(x: tf.Tensor, kernel: tf.Tensor) -> tf.Tensor:
    """``tf.nn.conv2d(x, kernel, 1, "VALID")`` as matrix products, one per kernel row and band
    of [`ROW_PRODUCT_COLUMNS`][] output channels: the (N * OH * OW, k * Cin) patches of input
    rows ``i .. i + OH`` times kernel row ``i``'s columns, summed over ``i``. Temporaries: one
    row's patches (``k * Cin`` values per output position, for fc6 7/8 of the output's size)
    and the running sums (the output's size).

    Examples:
        >>> x, k = tf.random.normal((2, 9, 8, 3)), tf.random.normal((7, 7, 3, 5))
        >>> y = row_products(x, k)
        >>> y.shape, bool(tf.reduce_all(abs(y - tf.nn.conv2d(x, k, 1, "VALID")) < 1e-3))
        (TensorShape([2, 3, 2, 5]), True)
    """
    kh, kw, cin, cout = kernel.shape
    rows = tf.shape(x)[1] - kh + 1
    bands = [(start, min(start + ROW_PRODUCT_COLUMNS, cout))
             for start in range(0, cout, ROW_PRODUCT_COLUMNS)]  # fmt: skip
    sums = [None] * len(bands)
    for i in range(kh):
        patches = tf.image.extract_patches(x[:, i : i + rows], [1, 1, kw, 1], [1] * 4, [1] * 4,
                                           "VALID")  # fmt: skip
        matrix = tf.reshape(patches, [-1, kw * cin])
        for b, (start, stop) in enumerate(bands):
            product = tf.matmul(matrix, tf.reshape(kernel[i, :, :, start:stop], [-1, stop - start]))
            sums[b] = product if sums[b] is None else sums[b] + product
    shape = tf.shape(patches)
    out = sums[0] if len(sums) == 1 else tf.concat(sums, axis=-1)
    return tf.reshape(out, [shape[0], shape[1], shape[2], cout])


def lean_conv2d(x: tf.Tensor, kernel: tf.Tensor, padding: str) -> tf.Tensor:
    """``tf.nn.conv2d(x, kernel, 1, padding)`` whose gradients are lean (see the module).

    Args:
        x: (N, H, W, Cin) input.
        kernel: (k, k, Cin, Cout) kernel, ``k`` odd.
        padding: ``"same"`` or ``"valid"`` (either case).

    Returns:
        (N, OH, OW, Cout): ``H`` and ``W`` with ``same`` padding, ``H - k + 1``, ``W - k + 1``
        with ``valid``.

    Examples:
        >>> x, k = tf.random.normal((1, 9, 9, 4)), tf.random.normal((3, 3, 4, 5))
        >>> with tf.GradientTape() as tape:
        ...     tape.watch(k)
        ...     y = lean_conv2d(x, k, "same")
        >>> tape.gradient(y, k).shape
        TensorShape([3, 3, 4, 5])
    """
    padding = padding.upper()
    banded = _eigen_kernels()

    @tf.custom_gradient
    def conv(x, kernel):
        def grad(dy):
            def whole():
                return _native_gradients(x, kernel, dy, padding)

            def bands():
                return banded_gradients(x, kernel, dy, padding)

            if kernel.shape[0] == 1:  # a matrix product already, under every kernel set
                return whole()
            fallback = bands if banded else whole
            if padding != "VALID":
                return fallback()
            known = dy.shape[:3].num_elements()  # fixed crops: the choice made when traced,
            if known is not None:  # so that an input gradient nothing reads is never computed
                return patch_gradients(x, kernel, dy) if known <= kernel.shape[-1] else fallback()
            positions = tf.reduce_prod(tf.shape(dy)[:3])
            return tf.cond(  # the patch matrix is at most the kernel's size: use it
                positions <= kernel.shape[-1], lambda: patch_gradients(x, kernel, dy), fallback
            )

        return conv2d(x, kernel, padding), grad

    return conv(x, kernel)


def patch_gradients(x: tf.Tensor, kernel: tf.Tensor, dy: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """(dx, dkernel) of a stride-1 ``valid`` convolution from its patch matrix P (one row per
    output position, ``k * k * Cin`` columns): ``dkernel = P^T dy`` and ``dP = dy kernel^T``,
    scattered back onto ``x``'s pixels. Temporaries: P and dP, each ``N * OH * OW * k * k * Cin``
    values; the kernel gradient is written once.

    Examples:
        >>> x, k = tf.random.normal((1, 6, 6, 2)), tf.random.normal((3, 3, 2, 4))
        >>> dx, dk = patch_gradients(x, k, dy=tf.ones((1, 4, 4, 4)))
        >>> native = _native_gradients(x, k, tf.ones((1, 4, 4, 4)), "VALID")  # TensorFlow's
        >>> dx.shape, [bool(tf.reduce_all(abs(a - b) < 1e-3)) for a, b in zip((dx, dk), native)]
        (TensorShape([1, 6, 6, 2]), [True, True])
    """
    x, kernel, dy = (tf.convert_to_tensor(v) for v in (x, kernel, dy))
    kh, kw, cin, cout = kernel.shape
    with tf.GradientTape() as tape:
        tape.watch(x)
        patches = tf.image.extract_patches(x, [1, kh, kw, 1], [1] * 4, [1] * 4, "VALID")
    matrix = tf.reshape(patches, [-1, kh * kw * cin])
    dy = tf.reshape(dy, [-1, cout])
    dkernel = tf.reshape(tf.matmul(matrix, dy, transpose_a=True), kernel.shape)
    dpatches = tf.matmul(dy, tf.reshape(kernel, [-1, cout]), transpose_b=True)
    dx = tape.gradient(patches, x, output_gradients=tf.reshape(dpatches, tf.shape(patches)))
    return dx, dkernel


def banded_gradients(
    x: tf.Tensor,
    kernel: tf.Tensor,
    dy: tf.Tensor,
    padding: str,
    band_bytes: int = IM2COL_BAND_BYTES,
) -> tuple[tf.Tensor, tf.Tensor]:
    """(dx, dkernel) of a stride-1 convolution (odd ``k x k`` kernel, ``"SAME"`` or ``"VALID"``),
    computed in bands of rows whose im2col matrices hold at most ``band_bytes`` (at least one row
    a band). dkernel sums the bands' kernel gradients (each band of output rows with the input
    rows it reads, zero rows where the padding is); dx is written band by band of input rows, each
    from the output rows that read it. Sizes known when traced that fit in one band take
    TensorFlow's own kernels (no loops to trace).

    Examples:
        >>> x, k = tf.random.normal((1, 9, 9, 2)), tf.random.normal((3, 3, 2, 4))
        >>> dx, dk = banded_gradients(x, k, tf.ones((1, 9, 9, 4)), "SAME", band_bytes=1024)
        >>> native = _native_gradients(x, k, tf.ones((1, 9, 9, 4)), "SAME")  # TensorFlow's
        >>> dx.shape, [bool(tf.reduce_all(abs(a - b) < 1e-3)) for a, b in zip((dx, dk), native)]
        (TensorShape([1, 9, 9, 2]), [True, True])
    """
    x, kernel, dy = (tf.convert_to_tensor(v) for v in (x, kernel, dy))
    kh, kw, cin, _ = kernel.shape
    ph, pw = ((kh - 1) // 2, (kw - 1) // 2) if padding == "SAME" else (0, 0)
    if x.shape.is_fully_defined() and dy.shape.is_fully_defined():
        whole = x.shape[0] * dy.shape[1] * (x.shape[2] + 2 * pw) * kh * kw * cin * x.dtype.size
        if whole <= band_bytes:  # one band, known when traced: TensorFlow's own kernels
            return _native_gradients(x, kernel, dy, padding)
    n, h, w = tf.shape(x)[0], tf.shape(x)[1], tf.shape(x)[2]
    oh = tf.shape(dy)[1]
    row_bytes = n * (w + 2 * pw) * kh * kw * cin * x.dtype.size
    rows = tf.maximum(1, band_bytes // row_bytes)
    strides = [1, 1, 1, 1]

    def kernel_band(i, total):
        r0 = i * rows
        r1 = tf.minimum(r0 + rows, oh)
        top, bottom = r0 - ph, r1 - ph + kh - 1  # the input rows [top, bottom) they read
        band = x[:, tf.maximum(top, 0) : tf.minimum(bottom, h)]
        zeros = [[0, 0], [tf.maximum(-top, 0), tf.maximum(bottom - h, 0)], [pw, pw], [0, 0]]
        band = tf.pad(band, zeros)
        return i + 1, total + tf.raw_ops.Conv2DBackpropFilter(
            input=band, filter_sizes=tf.shape(kernel), out_backprop=dy[:, r0:r1],
            strides=strides, padding="VALID",
        )  # fmt: skip

    bands = (oh + rows - 1) // rows
    _, dkernel = tf.while_loop(
        lambda i, _: i < bands, kernel_band, (tf.constant(0), tf.zeros_like(kernel))
    )

    def input_band(i, parts):
        s0 = i * rows
        s1 = tf.minimum(s0 + rows, h)
        a = tf.maximum(s0 + ph - kh + 1, 0)  # the output rows [a, b) that read rows [s0, s1)
        b = tf.minimum(s1 + ph, oh)
        padded = tf.raw_ops.Conv2DBackpropInput(  # row t: padded input row a + t
            input_sizes=tf.stack([n, b - a + kh - 1, w + 2 * pw, cin]), filter=kernel,
            out_backprop=dy[:, a:b], strides=strides, padding="VALID",
        )  # fmt: skip
        band = padded[:, s0 + ph - a : s1 + ph - a, pw : pw + w]
        return i + 1, parts.write(i, tf.transpose(band, [1, 0, 2, 3]))  # rows first, to concat

    bands = (h + rows - 1) // rows
    parts = tf.TensorArray(x.dtype, size=bands, infer_shape=False)
    _, parts = tf.while_loop(lambda i, _: i < bands, input_band, (tf.constant(0), parts))
    dx = tf.transpose(parts.concat(), [1, 0, 2, 3])
    return tf.ensure_shape(dx, x.shape), dkernel


def _native_gradients(x, kernel, dy, padding):
    """TensorFlow's own backward kernels."""
    strides = [1, 1, 1, 1]
    dx = tf.raw_ops.Conv2DBackpropInput(
        input_sizes=tf.shape(x), filter=kernel, out_backprop=dy, strides=strides, padding=padding
    )
    dkernel = tf.raw_ops.Conv2DBackpropFilter(
        input=x, filter_sizes=tf.shape(kernel), out_backprop=dy, strides=strides, padding=padding
    )
    return dx, dkernel


def _eigen_kernels() -> bool:
    """Banded gradients pay where Eigen's CPU kernels run them (not on a GPU, not under oneDNN)."""
    return cpu_kernels() == "Eigen" and not tf.config.list_logical_devices("GPU")
