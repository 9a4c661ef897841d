"""FCN-8s training throughput and peak memory at crop 320, batch 1, 2 and 4.

Each (batch, input) runs in a fresh process: the full-size FCN-8s (weights=None: the same
compute as VGG16-initialised) compiled with the practical recipe, trained by ``model.fit``
either on one constant batch held in memory ("no pipeline") or on ``fcn.data.train_dataset``
over a synthetic VOC-layout folder ("pipeline": decode, augment, crop, batch in parallel). If
the pipeline were the bottleneck, its images/s would fall below the constant-batch figure.
On a GPU, ``--mixed-precision`` adds the mixed_float16 runs and peak device memory is reported.

    python benchmarks/train_throughput.py [--batches 1 2 4] [--steps 4]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

CROP = 320


def measure(batch: int, pipeline: bool, steps: int, voc: str, policy: str) -> dict:
    import keras
    import numpy as np
    import tensorflow as tf

    import fcn
    from fcn.training.loss import segmentation_loss
    from fcn.training.optimizer import recipe_optimizer
    from fcn.training.recipes import RECIPES

    keras.mixed_precision.set_global_policy(policy)
    model = fcn.build_model("fcn8s", weights=None)
    model.compile(optimizer=recipe_optimizer(RECIPES["practical"], 1000), loss=segmentation_loss())
    if pipeline:
        data = fcn.data.train_dataset(
            fcn.data.voc_pairs(voc, "train"), crop_size=CROP, batch_size=batch, seed=0
        ).repeat()
    else:
        rng = np.random.default_rng(0)
        images = rng.integers(0, 256, (batch, CROP, CROP, 3), dtype=np.uint8)
        labels = rng.integers(0, 21, (batch, CROP, CROP), dtype=np.uint8)
        data = tf.data.Dataset.from_tensors((images, labels)).repeat()
    model.fit(data, epochs=1, steps_per_epoch=1, verbose=0)  # trace and warm up
    start = time.perf_counter()
    model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    seconds = time.perf_counter() - start
    gpus = tf.config.list_logical_devices("GPU")
    device_peak = tf.config.experimental.get_memory_info("GPU:0")["peak"] if gpus else None
    return {
        "batch": batch,
        "input": "pipeline" if pipeline else "no pipeline",
        "policy": policy,
        "device": "GPU" if gpus else "CPU",
        "images_per_s": round(batch * steps / seconds, 3),
        "s_per_step": round(seconds / steps, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_device_mb": round(device_peak / 2**20) if device_peak else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--steps", type=int, default=4, help="timed steps per run")
    parser.add_argument("--mixed-precision", action="store_true", help="also mixed_float16")
    parser.add_argument("--worker", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from fcn.device import cpu_summary

    print(f"# {cpu_summary()}", flush=True)  # the kernel set every figure below ran with
    if args.worker:
        batch, pipeline, steps, voc, policy = args.worker
        print(json.dumps(measure(int(batch), pipeline == "1", int(steps), voc, policy)))
        return
    from fcn.data import write_synthetic_voc

    policies = ["float32", "mixed_float16"] if args.mixed_precision else ["float32"]
    with tempfile.TemporaryDirectory() as tmp:
        voc = write_synthetic_voc(tmp, 64)
        for policy in policies:
            for batch in args.batches:
                for pipeline in ("0", "1"):
                    command = [sys.executable, __file__, "--worker", str(batch), pipeline]
                    command += [str(args.steps), str(voc), policy]
                    out = subprocess.run(command, capture_output=True, text=True, check=True)
                    print(out.stdout.strip().splitlines()[-1], flush=True)


if __name__ == "__main__":
    main()
