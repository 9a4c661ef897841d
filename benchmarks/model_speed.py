"""FCN-8s speed on this machine: forward and forward+backward, with the FLOPs of the graph.

Each configuration runs in a fresh process so that its peak RSS is its own.

    python benchmarks/model_speed.py            # 500x500 batch 1 and 320x320 batch 4
    python benchmarks/model_speed.py --repeats 5
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

CONFIGS = [(500, 1), (320, 4)]


def graph_flops(model, size: int, batch: int) -> float:
    """Multiply-adds x 2 of every conv and transposed conv for a (batch, size, size, 3) input."""
    import keras
    import numpy as np

    convs = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]
    probe = keras.Model(model.input, [layer.output for layer in convs])
    total = 0.0
    for layer, out in zip(convs, probe(np.zeros((1, size, size, 3), np.float32))):
        kh, kw, a, b = layer.kernel.shape
        h, w = out.shape[1:3]
        if isinstance(layer, keras.layers.Conv2DTranspose):  # one kernel per INPUT pixel
            stride = layer.strides[0]
            h, w = (h - kh) // stride + 1, (w - kw) // stride + 1
        total += 2 * kh * kw * a * b * h * w
    return total * batch


def measure(size: int, batch: int, repeats: int) -> dict:
    import numpy as np
    import tensorflow as tf

    import fcn

    model = fcn.build_model("fcn8s", weights=None)
    images = tf.constant(
        np.random.default_rng(0).integers(0, 256, (batch, size, size, 3)), tf.uint8
    )
    labels = tf.constant(np.random.default_rng(1).integers(0, 21, (batch, size, size)), tf.int32)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function(jit_compile=False)
    def forward(x):
        return model(x, training=False)

    @tf.function(jit_compile=False)
    def forward_backward(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        return loss, tape.gradient(loss, model.trainable_weights)

    def timed(fn, *args):
        fn(*args)  # trace and warm up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            out = fn(*args)
            tf.nest.map_structure(lambda t: t.numpy(), out)
            times.append(time.perf_counter() - start)
        return min(times), float(np.median(times))

    fwd_best, fwd_median = timed(forward, images)
    rss_after_forward = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    bwd_best, bwd_median = timed(forward_backward, images, labels)
    flops = graph_flops(model, size, batch)
    return {
        "size": size,
        "batch": batch,
        "forward_s": round(fwd_median, 3),
        "forward_best_s": round(fwd_best, 3),
        "forward_backward_s": round(bwd_median, 3),
        "forward_backward_best_s": round(bwd_best, 3),
        "forward_gflop": round(flops / 1e9, 1),
        "forward_gflops_per_s": round(flops / fwd_best / 1e9, 1),
        "forward_backward_gflops_per_s": round(3 * flops / bwd_best / 1e9, 1),
        "peak_rss_forward_mb": round(rss_after_forward),
        "peak_rss_forward_backward_mb": round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--one", nargs=2, type=int, metavar=("SIZE", "BATCH"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    from fcn.device import cpu_summary

    print(f"# {cpu_summary()}", flush=True)  # the kernel set every figure below ran with
    if args.one:
        print(json.dumps(measure(*args.one, args.repeats)))
        return
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    rows = []
    for size, batch in CONFIGS:
        command = [sys.executable, __file__, "--one", str(size), str(batch)]
        command += ["--repeats", str(args.repeats)]
        out = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()
