"""Peak memory and speed of the streaming training pipeline against a decode-then-cache one.

Generates one synthetic VOC-layout folder (500x375 JPEGs, palette PNG labels with classes and
void borders) with splits of each size, then runs two epochs (``--epochs``) of each pipeline
(crop 320, batch 8) in a fresh subprocess per size and prints a table and JSON lines. Peak RSS
is the process high-water mark (``ru_maxrss``); growth is peak minus the mark before iterating.

    python benchmarks/loader_memory.py                      # sizes 200 800 3200, naive 200 400
    python benchmarks/loader_memory.py --data /tmp/voc_bench --sizes 200 800
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
from pathlib import Path

CROP, BATCH = 320, 8
WIDTH, HEIGHT = 500, 375


def generate(root: Path, count: int, sizes: list[int]) -> Path:
    """``count`` synthetic VOC pairs (:func:`fcn.data.write_synthetic_voc`) with a split
    ``train<n>`` listing the first n ids for each size."""
    from fcn.data import write_synthetic_voc

    return write_synthetic_voc(root, count, {f"train{n}": n for n in sizes})


def streaming(voc: Path, split: str):
    from fcn.data import train_dataset, voc_pairs

    return train_dataset(voc_pairs(voc, split), crop_size=CROP, batch_size=BATCH, seed=0)


def naive(voc: Path, split: str):
    """Issue 3's pattern: decode, resize, one-hot float32, ``.cache()`` it all, then shuffle."""
    import tensorflow as tf

    from fcn.data import read_label, voc_pairs

    files = voc_pairs(voc, split)

    def load(image_path, label_path):
        image = tf.image.decode_jpeg(tf.io.read_file(image_path), channels=3)
        image = tf.image.resize(tf.cast(image, tf.float32), (CROP, CROP))
        label = tf.numpy_function(lambda p: read_label(p.decode()), [label_path], tf.uint8)
        label.set_shape((None, None))
        label = tf.image.resize(label[..., None], (CROP, CROP), method="nearest")[..., 0]
        return image, tf.one_hot(tf.cast(label, tf.int32), 21, dtype=tf.float32)

    dataset = tf.data.Dataset.from_tensor_slices((list(files.images), list(files.labels)))
    dataset = dataset.map(load, num_parallel_calls=tf.data.AUTOTUNE).cache()
    return dataset.shuffle(1000, seed=0).batch(BATCH, drop_remainder=True).prefetch(2)


def measure(pipeline: str, voc: Path, size: int, epochs: int) -> dict:
    """Runs in the worker process: ``epochs`` passes, then the figures as a dict."""
    dataset = {"streaming": streaming, "naive": naive}[pipeline](voc, f"train{size}")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    start, seen = time.perf_counter(), 0
    for _ in range(epochs):
        for images, _labels in dataset:
            seen += int(images.shape[0])
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {
        "pipeline": pipeline, "images": size, "epochs": epochs, "crops_seen": seen,
        "rss_before_mb": round(before, 1), "peak_rss_mb": round(peak, 1),
        "growth_mb": round(peak - before, 1), "seconds": round(seconds, 1),
        "images_per_s": round(seen / seconds, 1),
    }  # fmt: skip


def run_worker(pipeline: str, voc: Path, size: int, epochs: int) -> dict:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    out = subprocess.run(
        [sys.executable, __file__, "--worker", pipeline, "--data", str(voc), "--sizes", str(size),
         "--epochs", str(epochs)],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def slope(rows: list[dict]) -> float:
    """Peak RSS growth per image (MB) between the smallest and the largest set."""
    first, last = rows[0], rows[-1]
    return (last["peak_rss_mb"] - first["peak_rss_mb"]) / (last["images"] - first["images"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 800, 3200])
    parser.add_argument(
        "--naive-sizes", type=int, nargs="*", default=[200, 400],
        help="the naive pipeline holds ~9.8 MB per image: keep these small",
    )  # fmt: skip
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--data", type=Path, help="where the synthetic data is (made if absent)")
    parser.add_argument("--worker", choices=["streaming", "naive"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    from fcn.device import cpu_summary

    print(f"# {cpu_summary()}", flush=True)  # the kernel set every figure below ran with
    if args.worker:
        print(json.dumps(measure(args.worker, args.data, args.sizes[0], args.epochs)))
        return
    data = args.data or Path(tempfile.gettempdir()) / "fcn_loader_memory"
    sizes = sorted(set(args.sizes) | set(args.naive_sizes))
    voc = generate(data, max(sizes), sizes)
    results = {
        name: [run_worker(name, voc, size, args.epochs) for size in chosen]
        for name, chosen in (("streaming", sorted(args.sizes)), ("naive", sorted(args.naive_sizes)))
    }
    print(f"{'pipeline':10} {'images':>7} {'peak RSS MB':>12} {'growth MB':>10} {'img/s':>7}")
    for rows in results.values():
        for r in rows:
            print(f"{r['pipeline']:10} {r['images']:7} {r['peak_rss_mb']:12.1f} "
                  f"{r['growth_mb']:10.1f} {r['images_per_s']:7.1f}")  # fmt: skip
    for name, rows in results.items():
        if len(rows) > 1:
            print(f"{name}: peak RSS grows {slope(rows):.4f} MB per image")
    for rows in results.values():
        for r in rows:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
