"""Issue 4: peak memory and speed of ``fcn.evaluate`` beside a keep-every-prediction evaluator.

Part 1 (scaling): synthetic VOC-layout validation sets (JPEG + palette PNG, 500x375 and
375x500) of 100, 400 and 1,600 images, read with ``fcn.data.eval_dataset``, scored by a
width-1/16 FCN-8s (same graph as the paper's, so the same geometry; the point is how memory
grows with the number of images). Every (evaluator, size) runs in a fresh subprocess.

Part 2 (one huge image): a 4000x3000 image through the full-size FCN-8s (weights=None) in tiles,
for each ``--big-max-pixels`` budget. ``--big-tiles N`` runs only the N largest tiles: tiles run
one at a time, so the largest sets the peak, and the whole image takes hours of this CPU at the
smallest budget; the total time is projected from their seconds per tile.

Peak RSS is the kernel's VmHWM, reset (``/proc/self/clear_refs``) after the model is built, so
it covers evaluation only: the model's resting footprint is in it, building it is not.

Usage: python benchmarks/eval_memory.py [--sizes 100 400 1600] [--big-tiles 3]
"""

from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from fcn.classes import NUM_CLASSES  # noqa: E402
from fcn.data import write_synthetic_voc  # noqa: E402

WIDTH = 1 / 16


def reset_peak() -> None:
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")


def memory_mib() -> dict[str, float]:
    """Current (VmRSS) and peak-since-reset (VmHWM) resident memory, MiB."""
    fields = dict(line.split(":") for line in Path("/proc/self/status").read_text().splitlines())
    return {k: int(fields[k].split()[0]) / 1024 for k in ("VmRSS", "VmHWM")}


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
    from fcn.metrics import scores
    from fcn.tiling import compiled_forward

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
    return scores(hist).mean_iou


def scaling_worker(method: str, root: str, count: int) -> dict:
    from fcn.data import eval_dataset, voc_pairs
    from fcn.evaluate import evaluate

    model = random_model(WIDTH)
    ids = (Path(root) / "ImageSets/Segmentation/val.txt").read_text().split()[:count]
    dataset = eval_dataset(voc_pairs(root, ids))
    rest = memory_mib()["VmRSS"]
    reset_peak()
    start = time.perf_counter()
    if method == "fcn.evaluate":
        mean_iou = evaluate(model, dataset).mean_iou
    else:
        mean_iou = naive_evaluate(model, dataset)
    seconds = time.perf_counter() - start
    return {"method": method, "images": count, "rest_mib": rest, "peak_mib": memory_mib()["VmHWM"],
            "images_per_s": count / seconds, "mean_iou": mean_iou}  # fmt: skip


def big_worker(max_pixels: int, tiles: int) -> dict:
    """The largest ``tiles`` tiles (0: all) of one 4000x3000 image through the full FCN-8s,
    each reduced to confusion counts as evaluate() does. Projected time: every tile as slow as
    the largest (an upper bound)."""
    import tensorflow as tf

    from fcn.metrics import confusion_counts
    from fcn.tiling import DEFAULT_MARGIN, compiled_forward, plan_tiles

    height, width = 3000, 4000
    rng = np.random.default_rng(0)
    coarse = Image.fromarray(rng.integers(0, 256, (60, 80, 3), dtype=np.uint8))
    image = np.asarray(coarse.resize((width, height), Image.BILINEAR))
    label = rng.integers(0, NUM_CLASSES, (height, width)).astype(np.uint8)
    model = random_model(1.0)
    forward = compiled_forward(model)

    def area(tile) -> int:
        return (tile.source[0].stop - tile.source[0].start) * (
            tile.source[1].stop - tile.source[1].start
        )

    plan = sorted(plan_tiles(height, width, max_pixels, DEFAULT_MARGIN), key=area, reverse=True)
    rest = memory_mib()["VmRSS"]
    reset_peak()
    confusion = tf.Variable(tf.zeros((NUM_CLASSES, NUM_CLASSES), tf.int64))
    times, first_peak = [], 0.0
    for tile in plan[: tiles or None]:
        if len(times) == 1:  # the first tile also traced the graph
            first_peak = memory_mib()["VmHWM"]
            reset_peak()
        start = time.perf_counter()
        logits = forward(image[None, tile.source[0], tile.source[1]])[0]
        kept = logits[tile.keep[0], tile.keep[1]]
        confusion.assign_add(confusion_counts(label[tile.region], kept, NUM_CLASSES))
        times.append(time.perf_counter() - start)
    per_tile = float(np.mean(times[1:] or times))
    rows, cols = plan[0].source
    return {"max_pixels": max_pixels, "tiles_total": len(plan), "tiles_run": len(times),
            "largest_tile": f"{rows.stop - rows.start}x{cols.stop - cols.start}",
            "rest_mib": rest, "first_tile_peak_mib": first_peak or memory_mib()["VmHWM"],
            "steady_peak_mib": memory_mib()["VmHWM"], "s_per_tile": per_tile,
            "projected_s": per_tile * len(plan)}  # fmt: skip


def run_worker(*args: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--worker", *args], check=True, capture_output=True, text=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[100, 400, 1600])
    parser.add_argument("--big-max-pixels", type=int, nargs="*", default=[544 * 544, 1024 * 1024])
    parser.add_argument("--big-tiles", type=int, default=3, help="0: the whole image")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        result = scaling_worker(rest[0], rest[1], int(rest[2])) if kind == "scaling" else (
            big_worker(int(rest[0]), int(rest[1])))  # fmt: skip
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
    for max_pixels in args.big_max_pixels:
        result = run_worker("big", str(max_pixels), str(args.big_tiles))
        print(json.dumps(result), flush=True)
        hours = result["projected_s"] / 3600
        print(f"4000x3000, max_pixels={max_pixels}: {math.ceil(hours * 60)} min projected")


if __name__ == "__main__":
    main()
