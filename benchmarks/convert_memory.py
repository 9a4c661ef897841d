"""Issue 15: time and peak memory of converting the paper's full-size FCN-8s ``.caffemodel``
(``fcn.convert_caffe``), of caching it as ``.keras`` (what ``fcn.load_model("fcn8s-voc")``
does once), and of exporting it (``fcn.export_model``: SavedModel, LiteRT, ONNX).

The paper's file cannot be downloaded here, so a writer process makes one of the same layout:
every layer name and blob shape of ``fcn8s-heavy-pascal.caffemodel`` (VGG16 body, fc6/fc7 as
convolutions, 21 classes), random values, new-layout wire format (``fcn.testing.write_caffemodel``).
Each cell then runs in a fresh process. Its resting footprint is the RSS after ``import fcn``
and one TensorFlow op (the runtime started); its peak is the process' RSS high-water mark;
the bound of the issue is the model's bytes plus its largest blob's (fc6).

    python benchmarks/convert_memory.py [--dir /tmp/fcn_convert] [--cells convert save ...]
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

from procmem import reset_peak, rss_mib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
MIB = 2**20
EXPORT_SIZE = (500, 500)
"""The LiteRT file's fixed image size (H, W): the largest side of a VOC image."""

SERVE_SIZE = (1000, 1000)
"""The image (H, W) the ``serve`` cell runs through the exported SavedModel: one megapixel."""

CELLS = ("build", "convert", "save", "saved_model", "serve", "litert", "onnx")
"""build: ``fcn.build_model("fcn8s", weights=None)`` alone, the part of converting that is not
reading the file; convert: ``fcn.convert_caffe``; save: that and ``model.save(.keras)``; then
the exports of the saved model (each from ``fcn.load_model``, not timed); serve: one
:data:`SERVE_SIZE` image through the SavedModel, loaded by TensorFlow alone (not timed)."""
CONVERSIONS = ("build", "convert", "save")


def write(path: Path) -> dict:
    """A full-size FCN-8s caffemodel with random (Glorot) blobs at ``path``."""
    import fcn
    from fcn.testing import caffe_layers, write_caffemodel

    layers = caffe_layers(fcn.build_model("fcn8s", weights=None))
    write_caffemodel(path, layers)
    blobs = [blob.nbytes for _, _, layer_blobs in layers for blob in layer_blobs]
    return {"file_mib": path.stat().st_size / MIB, "model_mib": sum(blobs) / MIB,
            "largest_blob_mib": max(blobs) / MIB}  # fmt: skip


def measure(cell: str, folder: Path) -> dict:
    """One cell in this process: resting RSS, then the work, its seconds and peak RSS."""
    import tensorflow as tf

    import fcn

    tf.zeros(1) + 1  # start the runtime: part of any process that converts
    keras_file = folder / "fcn8s-voc.keras"
    model = fcn.load_model(keras_file) if cell not in (*CONVERSIONS, "serve") else None
    if cell == "serve":
        served = tf.saved_model.load(str(folder / "fcn8s")).signatures["serving_default"]
    reset_peak()
    resting = rss_mib()["VmRSS"]
    start = time.perf_counter()
    out = None
    if cell == "build":
        model = fcn.build_model("fcn8s", weights=None)
    elif cell == "serve":
        served(image=tf.zeros((1, *SERVE_SIZE, 3), tf.uint8))["labels"].numpy()
    elif cell in CONVERSIONS:
        model = fcn.convert_caffe(folder / "fcn8s-heavy-pascal.caffemodel", "fcn8s")
        if cell == "save":
            model.save(keras_file)
            out = keras_file
    else:
        from fcn.inference.export import FORMATS

        size = EXPORT_SIZE if cell == "litert" else None
        try:
            out = fcn.export_model(model, folder / f"fcn8s{FORMATS[cell].suffix}", cell, size=size)
        except fcn.OutOfMemoryError as err:  # refused before it started
            return {"cell": cell, "refused": str(err)}
    seconds = time.perf_counter() - start
    files = [] if out is None else [out] if out.is_file() else out.rglob("*")
    return {"cell": cell, "seconds": seconds, "resting_mib": resting,
            "peak_above_resting_mib": rss_mib()["VmHWM"] - resting,
            "output_mib": sum(p.stat().st_size for p in files if p.is_file()) / MIB}  # fmt: skip


def run(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"{args}: exit {out.returncode}\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, help="working folder (default: a temporary one)")
    parser.add_argument("--cells", nargs="+", default=list(CELLS), choices=CELLS)
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        result = write(args.dir) if args.worker == "write" else measure(args.worker, args.dir)
        print(json.dumps(result))
        return
    from fcn.device import cpu_summary

    print(cpu_summary())
    folder = args.dir or Path(tempfile.mkdtemp(prefix="fcn_convert_"))
    folder.mkdir(parents=True, exist_ok=True)
    caffemodel = folder / "fcn8s-heavy-pascal.caffemodel"
    sizes = run("--worker", "write", "--dir", str(caffemodel))
    print(json.dumps(sizes))
    bound = sizes["model_mib"] + sizes["largest_blob_mib"]
    print(f"{'cell':12} {'s':>7} {'resting MiB':>12} {'peak above':>11} {'bound':>7} "
          f"{'output MiB':>10}")  # fmt: skip
    for cell in args.cells:
        if cell not in CONVERSIONS and not (folder / "fcn8s-voc.keras").exists():
            run("--worker", "save", "--dir", str(folder))
        if cell == "serve" and not (folder / "fcn8s").exists():
            run("--worker", "saved_model", "--dir", str(folder))
        r = run("--worker", cell, "--dir", str(folder))
        if "refused" in r:
            print(f"{cell:12} refused: {r['refused']}")
            continue
        shown = f"{bound:7.0f}" if cell in CONVERSIONS else f"{'':7}"
        print(f"{cell:12} {r['seconds']:7.1f} {r['resting_mib']:12.0f} "
              f"{r['peak_above_resting_mib']:11.0f} {shown} {r['output_mib']:10.0f}")  # fmt: skip
        print(json.dumps(r))


if __name__ == "__main__":
    main()
