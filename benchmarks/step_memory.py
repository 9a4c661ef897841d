"""Where a training step's memory goes: the full FCN-8s, one kind of step per fresh process.

Kinds, each adding one piece: ``grads`` (forward and backward, the gradients returned),
``sgd`` (+ Keras SGD without momentum), ``momentum`` (+ momentum 0.9), ``fused`` (momentum
through TensorFlow's in-place ``ResourceApplyKerasMomentum``), ``fit`` (the practical recipe's
``CaffeSGD`` through ``compile_for_training`` and ``train_on_batch``, i.e. ``fit``'s step).
Prints, per kind, the first and steady steps' peak RSS above the built model, what stays
resident after, and the steady step's time.

    python benchmarks/step_memory.py                       # 320x320 batch 1, every kind
    python benchmarks/step_memory.py --size 500 --kinds fit momentum
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from procmem import reset_peak, rss_mib

KINDS = ("grads", "sgd", "momentum", "fused", "fit")


def measure(kind: str, size: int, batch: int) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    import fcn
    from fcn.training.loss import segmentation_loss
    from fcn.training.recipes import RECIPES
    from fcn.training.train import compile_for_training

    model = fcn.build_model("fcn8s", weights=None)
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
    labels = rng.integers(0, 21, (batch, size, size), dtype=np.uint8)
    built = rss_mib()["VmRSS"]
    variables = model.trainable_variables
    loss_fn = segmentation_loss()
    if kind == "fit":
        compile_for_training(model, RECIPES["practical"], total_batches=1000, pretrained=False)

        def step():
            model.train_on_batch(images, labels)
    else:
        optimizer = keras.optimizers.SGD(1e-9, momentum=0.0 if kind == "sgd" else 0.9)
        if kind != "grads":  # its momentum (none for plain SGD) is part of the step
            optimizer.build(variables)
        accumulators = optimizer.momentums if kind == "fused" else []

        @tf.function
        def traced(x, y):
            with tf.GradientTape() as tape:
                loss = loss_fn(y, model(x, training=True))
            grads = tape.gradient(loss, variables)
            if kind == "grads":
                return loss, grads
            if kind == "fused":
                for variable, accumulator, grad in zip(variables, accumulators, grads):
                    tf.raw_ops.ResourceApplyKerasMomentum(
                        var=variable.handle, accum=accumulator.handle, lr=tf.constant(1e-9),
                        grad=grad, momentum=tf.constant(0.9), use_nesterov=False,
                    )  # fmt: skip
            else:
                optimizer.apply(grads, variables)
            return loss

        def step():
            traced(images, labels)

    reset_peak()
    step()
    first = rss_mib()["VmHWM"]
    reset_peak()
    start = time.perf_counter()
    step()
    step()
    seconds = (time.perf_counter() - start) / 2
    memory = rss_mib()
    return {
        "kind": kind, "size": size, "batch": batch, "built_mib": built,
        "first_step_peak_above_built": first - built,
        "steady_peak_above_built": memory["VmHWM"] - built,
        "resting_above_built": memory["VmRSS"] - built, "step_s": seconds,
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=320)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.one, args.size, args.batch)))
        return
    from fcn.device import cpu_summary

    print(f"# {cpu_summary()}", flush=True)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    for kind in args.kinds:
        command = [sys.executable, __file__, "--one", kind, "--size", str(args.size),
                   "--batch", str(args.batch)]  # fmt: skip
        run = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
        print(run.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
