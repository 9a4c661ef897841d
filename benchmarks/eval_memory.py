"""Issue 4: peak memory and speed of ``fcn.evaluate`` beside a keep-every-prediction evaluator.

Part 1 (scaling): synthetic VOC-layout validation sets (JPEG + palette PNG, 500x375 and
375x500) of 100, 400 and 1,600 images, read with ``fcn.data.eval_dataset``, scored by a
width-1/16 FCN-8s (same graph as the paper's, so the same geometry; the point is how memory
grows with the number of images). Every (evaluator, size) runs in a fresh subprocess.

Part 2 (one huge image): a 4000x3000 image and its label map through the full-size FCN-8s
(weights=None), each ``--big`` run in a fresh process: ``fcn.evaluate`` with its default budget
(the image streams through whole, :mod:`fcn.inference.streamed`), ``fcn.evaluate`` with
2,000,000-pixel tiles, and Keras' own forward pass of the whole image.

Peak RSS is the kernel's VmHWM, reset (``/proc/self/clear_refs``) after the model is built, so
it covers evaluation only: the model's resting footprint is in it, building it is not.

Usage: python benchmarks/eval_memory.py [--sizes 100 400 1600] [--big 'fcn.evaluate:0' ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from procmem import reset_peak, rss_mib  # noqa: E402

from fcn.classes import NUM_CLASSES  # noqa: E402
from fcn.data import write_synthetic_voc  # noqa: E402

WIDTH = 1 / 16


def random_model(width: float):
    """FCN-8s, weights=None, score layers made non-zero (they start at zero: all-0 logits)."""
    import keras

    from fcn.model import build_model

    keras.utils.set_random_seed(0)
    model = build_model("fcn8s", weights=None, width=width)
    rng = np.random.default_rng(0)
    for name in ("score_fr", "score_pool4", "score_pool3"):
        layer = model.get_layer(name)
        layer.set_weights([rng.normal(0, 0.01, w.shape).astype("float32") for w in layer.weights])
    return model


def naive_evaluate(model, dataset) -> float:
    """The keep-everything way (pytorch-fcn): every label and int64 prediction kept, then
    score.py's histogram over all of them. Returns mean IoU."""
    from fcn.inference.streamed import compiled_forward
    from fcn.metrics import ConfusionMatrix

    forward = compiled_forward(model)
    labels, predictions = [], []
    for image, label in dataset.as_numpy_iterator():
        labels.append(label)
        predictions.append(np.argmax(forward(image[None])[0], axis=-1))
    hist = np.zeros((NUM_CLASSES, NUM_CLASSES), np.int64)
    for label, prediction in zip(labels, predictions, strict=True):
        keep = label < NUM_CLASSES
        index = NUM_CLASSES * label[keep].astype(int) + prediction[keep]
        hist += np.bincount(index, minlength=NUM_CLASSES**2).reshape(hist.shape)
    return ConfusionMatrix(hist).scores().mean_iou


def scaling_worker(method: str, root: str, count: int) -> dict:
    from fcn.data import eval_dataset, voc_pairs
    from fcn.inference.evaluate import evaluate

    model = random_model(WIDTH)
    ids = (Path(root) / "ImageSets/Segmentation/val.txt").read_text().split()[:count]
    dataset = eval_dataset(voc_pairs(root, ids))
    rest = rss_mib()["VmRSS"]
    reset_peak()
    start = time.perf_counter()
    if method == "fcn.evaluate":
        mean_iou = evaluate(model, dataset).mean_iou
    else:
        mean_iou = naive_evaluate(model, dataset)
    seconds = time.perf_counter() - start
    return {"method": method, "images": count, "rest_mib": rest, "peak_mib": rss_mib()["VmHWM"],
            "images_per_s": count / seconds, "mean_iou": mean_iou}  # fmt: skip


def big_worker(method: str, max_pixels: int) -> dict:
    """One 4000x3000 image and label map through the full FCN-8s (weights=None).

    ``fcn.evaluate``: the real call, with ``max_pixels`` (0: the default budget, under which the
    image streams through whole). ``keras whole``: Keras' own forward pass of the whole image as
    one graph (``tf.function`` of ``model(image)``), then the same confusion matrix.
    """
    import tensorflow as tf

    from fcn.inference.budget import Budget
    from fcn.inference.evaluate import evaluate
    from fcn.inference.streamed import streams
    from fcn.inference.tiling import plan_tiles
    from fcn.metrics import ConfusionMatrix

    height, width = 3000, 4000
    rng = np.random.default_rng(0)
    coarse = Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8))
    image = np.asarray(coarse.resize((width, height), Image.BILINEAR))
    label = rng.integers(0, NUM_CLASSES, (height, width)).astype(np.uint8)
    model = random_model(1.0)
    max_pixels = Budget.default(streams(model), max_pixels or None).max_pixels
    rest = rss_mib()["VmRSS"]
    reset_peak()
    start = time.perf_counter()
    if method == "fcn.evaluate":
        mean_iou = evaluate(model, [(image, label)], max_pixels=max_pixels).mean_iou
        passes = len(plan_tiles(height, width, max_pixels))
    else:
        forward = tf.function(lambda x: model(x, training=False))
        logits = forward(tf.constant(image[None], tf.float32))
        counts = ConfusionMatrix.count_logits(label[None], logits, NUM_CLASSES).numpy()
        mean_iou = ConfusionMatrix(counts).scores().mean_iou
        passes = 1
    return {"method": method, "max_pixels": max_pixels, "passes": passes, "rest_mib": rest,
            "peak_mib": rss_mib()["VmHWM"], "seconds": time.perf_counter() - start,
            "mean_iou": mean_iou}  # fmt: skip


def run_worker(*args: str, env: dict[str, str] | None = None) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", *args],
        capture_output=True, text=True, env={**os.environ, **(env or {})},
    )  # fmt: skip
    if out.returncode:
        return {"worker": args, "env": env, "failed": out.returncode, "stderr": out.stderr[-500:]}
    return {**json.loads(out.stdout.strip().splitlines()[-1]), **({"env": env} if env else {})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 400, 1600])
    parser.add_argument(
        "--big", nargs="*", default=[
            "fcn.evaluate:0", "fcn.evaluate:0:MALLOC_ARENA_MAX=1", "fcn.evaluate:2000000",
            "keras whole:0",
        ],
        help="METHOD:MAX_PIXELS[:VAR=VALUE] runs on one 4000x3000 image (0: the default"
        " budget), optionally with an environment variable (e.g. MALLOC_ARENA_MAX=1)",
    )  # fmt: skip
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    from fcn.device import cpu_summary

    print(f"# {cpu_summary()}", flush=True)  # the kernel set every figure below ran with
    if args.worker:
        kind, *rest = args.worker
        result = scaling_worker(rest[0], rest[1], int(rest[2])) if kind == "scaling" else (
            big_worker(rest[0], int(rest[1])))  # fmt: skip
        print(json.dumps(result))
        return

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        if args.sizes:
            voc = write_synthetic_voc(tmp, max(args.sizes), {"val": max(args.sizes)})
        for count in args.sizes:
            for method in ("fcn.evaluate", "keep-all"):
                rows.append(run_worker("scaling", method, str(voc), str(count)))
                print(json.dumps(rows[-1]), flush=True)
    for method in ("fcn.evaluate", "keep-all"):
        mine = [r for r in rows if r["method"] == method]
        if len(mine) > 1:
            growth = (mine[-1]["peak_mib"] - mine[0]["peak_mib"]) / (
                mine[-1]["images"] - mine[0]["images"])  # fmt: skip
            print(f"{method}: peak RSS growth {growth:.4f} MiB per image")
    for run in args.big:
        method, max_pixels, *env = run.split(":")
        env = dict(item.split("=", 1) for item in env)
        print(json.dumps(run_worker("big", method, max_pixels, env=env)), flush=True)


if __name__ == "__main__":
    main()
