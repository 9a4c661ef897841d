"""bf16 against float32 from the real ImageNet VGG16 weights: training curves and inference labels.

Two parts, each training run in a fresh process (``--worker``):

1. ``train``: ``fcn.train`` of the full FCN-8s from the real VGG16 conv weights on the real VOC
   pairs of ``../shared/voc_train148`` (the first ``--train`` ids in sorted order; the last
   ``--holdout`` are held out), once in float32 and once under ``mixed_precision=
   "mixed_bfloat16"``, with the same seed, data order, crops and steps: the training loss of
   every step of each, and the time per step.
2. ``exactness``: a model that has learned object classes, not only the majority one (part 1's
   short runs label every pixel background): the practical recipe for ``--exact-epochs`` x 6
   steps on the shipped sample's 12 training images under ``mixed_bfloat16`` (the 120 steps
   that reached mean IoU 0.24 on them in float32, issue 11), then run with ``fcn.evaluate`` and
   ``fcn.predict`` in ``precision="float32"`` and ``"bfloat16"`` on those 12 images (where it
   has learned the classes), the sample's 8 val images and part 1's held-out pairs: the share
   of pixels whose label differs, and the mean IoU of each. Also part 1's models in float32.

    python benchmarks/precision.py                       # both parts, the defaults below
    python benchmarks/precision.py --steps 30 --epochs 2
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from convergence import WEIGHTS, LossRecorder

VOC148 = Path(__file__).resolve().parents[2] / "shared/voc_train148"


def _split(root: Path, holdout: int, train: int) -> tuple[list[str], list[str]]:
    from fcn.data import voc_ids

    ids = sorted(voc_ids(root, "train"))
    return ids[: min(train, len(ids) - holdout)], ids[-holdout:]


def train_worker(policy: str, root: str, weights: str, args, out: str) -> dict:
    """Part 1 for one policy (``root`` "sample": part 2's model); saves the model to ``out``."""
    import fcn
    from fcn.data import sample_voc_root, voc_pairs

    if root == "sample":
        files, epochs, steps = voc_pairs(sample_voc_root(), "train"), args.exact_epochs, 6
    else:
        files = voc_pairs(root, _split(Path(root), args.holdout, args.train)[0])
        epochs, steps = args.epochs, args.steps
    recorder = LossRecorder()
    start = time.time()
    result = fcn.train(
        train_files=files, val_files=(), weights=weights,
        run_dir=tempfile.mkdtemp(prefix=f"fcn-{policy}-"), epochs=epochs,
        steps_per_epoch=steps, batch_size=args.batch, crop_size=args.crop,
        mixed_precision=None if policy == "float32" else policy, seed=0,
        callbacks=[recorder], verbose=0,
    )  # fmt: skip
    seconds = time.time() - start
    result.model.save(out)
    return {"policy": policy, "losses": recorder.values, "failure": result.failure,
            "seconds": seconds, "seconds_per_step": seconds / len(recorder.values)}  # fmt: skip


def _labels(model, pairs, precision: str) -> list:
    import fcn

    return [fcn.predict(image, model, precision=precision) for image, _ in pairs]


def exactness(model_path: str, others: list[str], root: str, args) -> dict:
    """Part 2: float32 and bfloat16 inference of the model at ``model_path``."""
    import numpy as np

    import fcn
    from fcn.data import read_image, read_label, sample_voc_root, voc_pairs
    from fcn.device import cpu_summary

    _, holdout = _split(Path(root), args.holdout, args.train)
    model = fcn.load_model(model_path)
    sets = {"sample train (learned)": voc_pairs(sample_voc_root(), "train"),
            "sample val": voc_pairs(sample_voc_root(), "val"),
            "voc_train148 holdout": voc_pairs(root, holdout)}  # fmt: skip
    out = {"cpu": cpu_summary()}
    for name, files in sets.items():
        pairs = [(read_image(i), read_label(lbl)) for i, lbl in zip(files.images, files.labels)]
        scores, labels = {}, {}
        for precision in ("float32", "bfloat16"):
            scores[precision] = fcn.evaluate(model, pairs, precision=precision)
            labels[precision] = _labels(model, pairs, precision)
        differ = sum(int((a != b).sum()) for a, b in zip(labels["float32"], labels["bfloat16"]))
        pixels = sum(a.size for a in labels["float32"])
        scored = [(lbl != 255) for _, lbl in pairs]
        differ_scored = sum(
            int(((a != b) & s).sum())
            for a, b, s in zip(labels["float32"], labels["bfloat16"], scored)
        )  # fmt: skip
        out[name] = {
            "images": len(pairs),
            "pixels_differing": differ / pixels,
            "scored_pixels_differing": differ_scored / sum(int(s.sum()) for s in scored),
            "mean_iou_float32": scores["float32"].mean_iou,
            "mean_iou_bfloat16": scores["bfloat16"].mean_iou,
            "mean_iou_difference_points": 100
            * (scores["bfloat16"].mean_iou - scores["float32"].mean_iou),
            "pixel_accuracy_float32": scores["float32"].pixel_accuracy,
            "class_iou_float32": {k: v for k, v in scores["float32"].class_iou.items() if v > 0},
            "part_1_models_mean_iou_float32": [
                fcn.evaluate(fcn.load_model(path), pairs, precision="float32").mean_iou
                for path in others
            ],
            "fraction_predicted_background": float(
                np.mean([np.mean(a == 0) for a in labels["float32"]])
            ),
        }
    return out


def plot(runs: dict[str, dict], path: Path) -> None:
    """The two loss curves, step by step, and their relative gap."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True, height_ratios=[3, 1])
    for policy, run in runs.items():
        top.plot(range(1, len(run["losses"]) + 1), run["losses"], label=policy, lw=1.2)
    top.set_ylabel("training loss")
    top.legend()
    a, b = (runs[p]["losses"] for p in ("float32", "mixed_bfloat16"))
    bottom.plot(range(1, len(a) + 1), [100 * (y - x) / x for x, y in zip(a, b)], color="k", lw=1)
    bottom.set_ylabel("bf16 - fp32, %")
    bottom.set_xlabel("step (same crops)")
    fig.suptitle("FCN-8s from ImageNet VGG16: float32 and mixed_bfloat16")
    fig.savefig(path, dpi=100, bbox_inches="tight")


def _worker(args: list[str]) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                         env=env)  # fmt: skip
    if run.returncode:
        raise RuntimeError(run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voc", default=str(VOC148), help="a VOC root with a train split")
    parser.add_argument("--weights", default=str(WEIGHTS), help="a Keras VGG16 weights file")
    parser.add_argument("--train", type=int, default=120, help="training ids (sorted, first)")
    parser.add_argument("--holdout", type=int, default=28, help="held-out ids (sorted, last)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="steps per epoch")
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--crop", type=int, default=320)
    parser.add_argument("--exact-epochs", type=int, default=20, help="part 2: epochs of 6 steps")
    parser.add_argument("--parts", nargs="+", default=["train", "exactness"])
    parser.add_argument("--figure", default="precision_losses.png", help="part 1's curves")
    parser.add_argument("--out", default=tempfile.mkdtemp(prefix="fcn-precision-"))
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "train":
            root = rest[2] if len(rest) > 2 else args.voc
            print(json.dumps(train_worker(rest[0], root, args.weights, args, rest[1])))
        else:
            print(json.dumps(exactness(rest[0], rest[1:], args.voc, args)))
        return
    if not Path(args.voc).exists() or not Path(args.weights).exists():
        sys.exit(f"needs {args.voc} and {args.weights} (the shared real data and weights)")
    names = ("voc", "weights", "train", "holdout", "epochs", "steps", "batch", "crop",
             "exact_epochs")  # fmt: skip
    common = [f"--{k.replace('_', '-')}={getattr(args, k)}" for k in names]
    paths = {p: str(Path(args.out) / f"{p}.keras") for p in ("float32", "mixed_bfloat16")}
    if "train" in args.parts:
        runs = {}
        for policy, path in paths.items():
            runs[policy] = _worker([*common, "--worker", "train", policy, path])
            print(json.dumps(runs[policy]), flush=True)
        a, b = runs["float32"]["losses"], runs["mixed_bfloat16"]["losses"]
        gaps = [abs(x - y) / x for x, y in zip(a, b)]
        print(json.dumps({"loss_relative_gap_median": statistics.median(gaps),
                          "loss_relative_gap_max": max(gaps), "steps": len(a),
                          "speedup": runs["float32"]["seconds_per_step"]
                          / runs["mixed_bfloat16"]["seconds_per_step"]}), flush=True)  # fmt: skip
        plot(runs, Path(args.figure))
    if "exactness" in args.parts:
        learned = str(Path(args.out) / "learned.keras")
        run = _worker([*common, "--worker", "train", "mixed_bfloat16", learned, "sample"])
        print(json.dumps(run), flush=True)
        others = [p for p in paths.values() if Path(p).exists()]
        print(json.dumps(_worker([*common, "--worker", "exact", learned, *others])), flush=True)


if __name__ == "__main__":
    main()
