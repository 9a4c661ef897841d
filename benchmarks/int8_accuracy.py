"""What int8 costs in accuracy: one trained FCN-8s scored as Keras float32, as LiteRT float32
and int8 files, and as an ONNX int8 file, on the same held-out images with fcn's evaluator.

The model: a ``.keras`` FCN-8s trained from the real ImageNet VGG16 weights on the 118
training ids of ``../shared/voc_train148`` (``time_to_accuracy.py``'s split; a run of it keeps
its checkpoints, ``--model``); scored on the 30 held-out ids, at full resolution. The int8
files are calibrated on ``--calibration-images`` of the 118 training images (never a scored
one). Rows:

* ``keras fp32``: ``fcn.evaluate(model, precision="float32")``, each image whole.
* ``litert fp32`` / ``litert int8``: ``fcn.evaluate("x.tflite")``: windows of ``--size``
  filled with the mean colour below and right of the image (``fcn.inference.tiling``); the
  float row separates the fill's effect from the quantisation's.
* ``onnx int8``: the any-size ONNX int8 file run by ONNX Runtime on each image whole, its
  labels counted by :class:`fcn.metrics.ConfusionMatrix` here (``fcn.evaluate`` runs LiteRT
  files only).

Prints one JSON line per row (mean IoU, per-class IoU, seconds) and a table of per-class
changes against ``keras fp32``.

    python benchmarks/int8_accuracy.py --model runs/tta/epoch-0050.keras
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from time_to_accuracy import VOC148, split


def onnx_result(path: Path, holdout, class_names):
    """``fcn.evaluate``'s result for an ONNX file run whole on each held-out pair."""
    import onnxruntime

    from fcn.data import read_image
    from fcn.data.decode import read_label
    from fcn.metrics import ConfusionMatrix
    from fcn.results import EvaluationResult

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = os.cpu_count()
    session = onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
    matrix = ConfusionMatrix(len(class_names))
    for image, label in zip(holdout.images, holdout.labels):
        (labels,) = session.run(["labels"], {"image": read_image(image)[None]})
        matrix.update(read_label(label), labels[0])
    return EvaluationResult(matrix, tuple(class_names), len(holdout.images))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="a .keras FCN-8s trained on the split")
    parser.add_argument("--voc", default=str(VOC148))
    parser.add_argument("--size", type=int, nargs=2, default=(512, 512), metavar=("H", "W"))
    parser.add_argument("--calibration-images", type=int, default=100)
    parser.add_argument("--json", help="append the rows here")
    args = parser.parse_args()

    import fcn
    from fcn.data import eval_dataset, voc_pairs
    from fcn.device import cpu_summary
    from fcn.model import class_names

    print(f"# {cpu_summary()}", flush=True)
    train_ids, holdout_ids = split(args.voc)
    holdout = voc_pairs(args.voc, holdout_ids)
    calibration = voc_pairs(args.voc, train_ids).images
    model = fcn.load_model(args.model, precision="float32")
    names = class_names(model)
    folder = Path(tempfile.mkdtemp(prefix="fcn-int8-"))
    size = tuple(args.size)
    int8 = {"quantize": "int8", "calibration": calibration,
            "calibration_images": args.calibration_images}  # fmt: skip
    files = {
        "litert fp32": ("litert", folder / "fp32.tflite", {"size": size}),
        "litert int8": ("litert", folder / "int8.tflite", {"size": size, **int8}),
        "onnx int8": ("onnx", folder / "int8.onnx", int8),
    }
    start = time.perf_counter()
    result = fcn.evaluate(model, eval_dataset(holdout), precision="float32")
    rows = [("keras fp32", result, time.perf_counter() - start)]
    for name, (format, path, kwargs) in files.items():
        start = time.perf_counter()
        fcn.export_model(model, path, format, **kwargs)
        exported, start = time.perf_counter() - start, time.perf_counter()
        if format == "litert":
            result = fcn.evaluate(path, eval_dataset(holdout))
        else:
            result = onnx_result(path, holdout, names)
        rows.append((name, result, time.perf_counter() - start))
        print(f"# {name}: exported in {exported:.0f} s, {path.stat().st_size / 2**20:.0f} MiB",
              flush=True)  # fmt: skip
    reference = rows[0][1]
    for name, result, seconds in rows:
        line = {"row": name, "mean_iou": result.mean_iou, "pixel_accuracy": result.pixel_accuracy,
                "class_iou": result.class_iou, "evaluate_s": seconds, "model": args.model,
                "size": size, "calibration_images": args.calibration_images}  # fmt: skip
        print(json.dumps(line), flush=True)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(line) + "\n")
    print("| class | " + " | ".join(name for name, _, _ in rows) + " |")
    print(f"|{'---|' * (len(rows) + 1)}")
    for cls in ("mean IoU", *names):
        cells = []
        for _, result, _ in rows:
            value = result.mean_iou if cls == "mean IoU" else result.class_iou[cls]
            base = reference.mean_iou if cls == "mean IoU" else reference.class_iou[cls]
            cells.append(f"{value:.3f} ({100 * (value - base):+.1f})")
        print(f"| {cls} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
