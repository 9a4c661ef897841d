"""Where the FCN-8s forward spends its time: layer by layer, fc6's implementations, band sizes.

Three parts, all on one 500x500 image of the full FCN-8s (fresh weights), in this process (run
it once per kernel set: ``TF_ENABLE_ONEDNN_OPTS=1`` / ``=0``):

* ``layers``: each layer in its own ``tf.function`` on the previous layer's output, median of 3;
  seconds and GFLOP/s (2 x multiply-adds) of the layers above 10 ms.
* ``fc6``: fc6's shape (22x22x512 -> 16x16x4096) as ``tf.nn.conv2d`` and as
  :func:`fcn.conv_gradients.row_products`, median of 5, float32 and bfloat16.
* ``bands``: the streamed forward at several ``BAND_BYTES`` beside the whole-image pass,
  interleaved 4 times (min and median).

    python benchmarks/forward_profile.py --parts layers fc6 bands --policy float32
"""

from __future__ import annotations

import argparse
import statistics
import time

import keras
import numpy as np
import tensorflow as tf

import fcn
from fcn.conv_gradients import row_products
from fcn.device import cpu_summary
from fcn.inference import budget, streamed
from fcn.inference.streamed import compiled_forward


def _median_time(run, repeats: int) -> float:
    run()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def layers(model, image) -> None:
    outputs = {id(model.input): tf.cast(image, tf.float32)}
    total = 0.0
    for layer in model.layers[1:]:
        args = [outputs[id(t)] for t in tf.nest.flatten(layer.input)]
        arg = args if isinstance(layer.input, (list, tuple)) else args[0]
        run = tf.function(lambda a, layer=layer: layer(a, training=False))
        out = run(arg)
        seconds = _median_time(lambda run=run, arg=arg: run(arg).numpy(), 3)
        total += seconds
        outputs[id(layer.output)] = out
        flops = ""
        if type(layer) in (keras.layers.Conv2D, fcn.layers.LeanConv2D):
            count = 2 * np.prod(out.shape[1:]) * np.prod(layer.kernel.shape[:-1])
            flops = f"{count / seconds / 1e9:.0f} GFLOP/s"
        if seconds > 0.01:
            print(f"{layer.name:10s} {tuple(out.shape[1:])} {seconds:.3f} s {flops}")
    print(f"sum of layers {total:.2f} s")


def fc6(dtype: str) -> None:
    rng = np.random.default_rng(0)
    x = tf.cast(rng.standard_normal((1, 22, 22, 512)), dtype)
    kernel = tf.Variable(tf.cast(rng.standard_normal((7, 7, 512, 4096)) * 0.01, dtype))
    for name, op in (("conv2d", lambda v: tf.nn.conv2d(v, kernel, 1, "VALID")),
                     ("row_products", lambda v: row_products(v, kernel))):  # fmt: skip
        run = tf.function(op)
        print(f"fc6 {dtype} {name}: {_median_time(lambda run=run: run(x).numpy(), 5):.3f} s")


def bands(model, image, sizes_mib: list[int]) -> None:
    runs = {}
    for mib in sizes_mib:
        streamed._FORWARDS.pop(model, None)  # a new function, traced with these bands
        budget.BAND_BYTES = mib * 2**20  # read when the streamed graph is traced
        runs[f"bands of {mib} MiB"] = compiled_forward(model, "labels")
        np.asarray(runs[f"bands of {mib} MiB"](image))
    whole = tf.function(lambda im: tf.argmax(model(tf.cast(im, tf.float32), training=False), -1))
    runs["whole"] = whole
    np.asarray(whole(image))
    times = {name: [] for name in runs}
    for _ in range(4):
        for name, run in runs.items():
            start = time.perf_counter()
            np.asarray(run(image))
            times[name].append(time.perf_counter() - start)
    for name, values in times.items():
        print(f"{name}: min {min(values):.2f} s, median {statistics.median(values):.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=["layers", "fc6", "bands"])
    parser.add_argument("--policy", default="float32", help="Keras dtype policy of the model")
    parser.add_argument("--bands", nargs="+", type=int, default=[4, 16, 64], help="MiB")
    args = parser.parse_args()
    print(f"# {cpu_summary()}; policy {args.policy}")
    keras.mixed_precision.set_global_policy(args.policy)
    keras.utils.set_random_seed(0)
    model = fcn.build_model("fcn8s", weights=None)
    image = np.random.default_rng(0).integers(0, 256, (1, 500, 500, 3), dtype=np.uint8)
    if "layers" in args.parts:
        layers(model, image)
    if "fc6" in args.parts:
        for dtype in ("float32", "bfloat16"):
            fc6(dtype)
    if "bands" in args.parts:
        bands(model, image, args.bands)


if __name__ == "__main__":
    main()
