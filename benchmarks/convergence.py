"""fcn.train from the real ImageNet VGG16 weights: both recipes, and why the old rates diverged.

Two parts, each configuration in a fresh process (``--worker``):

1. ``diagnose``: the full FCN-8s from the real ImageNet VGG16 conv weights, one 320x320 crop per
   step from the real VOC sample: the energy (mean squared L2 norm per pixel) of the inputs of
   the three score layers, per-layer gradient norms of the first steps at the old default rate,
   and the loss of ``--diagnose-steps`` steps for learning rates and momenta with and without
   the skip-layer rates of :func:`fcn.training.rates.skip_kernel_lr_mults` (custom loop, no
   checkpoints).
2. ``train``: ``fcn.train`` itself, each recipe with nothing overridden but the batch (CPU
   time) and the run length: training loss per step, validation mean IoU per epoch (train on
   the sample's 12 images, validate on its 8, or a VOC root's train/val).

    python benchmarks/convergence.py           # weights: ../shared/vgg16_imagenet_notop/...
    python benchmarks/convergence.py --parts train --voc data/VOCdevkit/VOC2012 --epochs 50

Prints JSON lines and a summary; writes ``convergence.png`` (loss curves, validation mean IoU).
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

import keras

WEIGHTS = (
    Path(__file__).resolve().parents[2]
    / "shared/vgg16_imagenet_notop/vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
)
DIAGNOSE = [  # (label, learning rate, momentum, skip-layer rates)
    ("old default: 1e-3, m 0.9", 1e-3, 0.9, False),
    ("1e-4, m 0.9", 1e-4, 0.9, False),
    ("paper rate 1.9e-5, m 0.99", 1.875e-5, 0.99, False),
    ("1e-3, m 0.9 + skip rates", 1e-3, 0.9, True),
    ("practical: 1e-4, m 0.9 + skip rates", 1e-4, 0.9, True),
    ("paper: 1.9e-5, m 0.99 + skip rates", 1.875e-5, 0.99, True),
]
TRAIN = {  # recipe -> overrides for a CPU budget (batch only; the rest is the recipe's)
    "practical": {"batch_size": 2},
    "paper": {},
}


class LossRecorder(keras.callbacks.Callback):
    """The training loss of every step (``values``), from the epoch's running mean in the logs."""

    def __init__(self):
        super().__init__()
        self.values: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        done = (batch + 1) * logs["loss"] - batch * self.epoch_mean
        self.epoch_mean = logs["loss"]
        self.values.append(float(done))

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch_mean = 0.0


def _energies_and_first_gradients(model, batches, steps: int) -> dict:
    """Score-layer input energies, then ``steps`` plain steps at 1e-3 (the old default):
    loss, largest |logit|, and gradient / weight norms of some layers."""
    import keras
    import tensorflow as tf

    from fcn.training.loss import segmentation_loss
    from fcn.training.optimizer import CaffeSGD

    images, _ = batches[0]
    probe = keras.Model(model.input, [model.get_layer(n).output for n in ("pool3", "pool4", "fc7")])
    energies = {
        name: float(tf.reduce_mean(tf.reduce_sum(tf.square(x), -1)))
        for name, x in zip(("pool3", "pool4", "fc7"), probe(images, training=False))
    }
    optimizer, loss_fn = CaffeSGD(learning_rate=1e-3, momentum=0.9), segmentation_loss()
    layers = ["score_pool3", "score_pool4", "score_fr", "fc7", "conv5_3", "conv1_1"]
    rows = []
    for step in range(steps):
        images, labels = batches[step]
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = loss_fn(labels, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        norms = {v.path: (float(tf.norm(g)), float(tf.norm(v))) for v, g in
                 zip(model.trainable_variables, grads)}  # fmt: skip
        rows.append({
            "step": step + 1, "loss": float(loss), "max_logit": float(tf.reduce_max(abs(logits))),
            **{f"{n} grad/weight": norms[f"{n}/kernel"] for n in layers},
        })  # fmt: skip
        optimizer.apply(grads, model.trainable_variables)
    return {"energies": energies, "first_steps": rows}


def diagnose(weights: str, crop: int, steps: int, config: int) -> dict:
    """One configuration of part 1 (``config`` -1: energies and first gradients)."""
    import keras
    import numpy as np
    import tensorflow as tf

    import fcn
    from fcn.data import sample_voc_root, train_dataset, voc_pairs
    from fcn.training.loss import segmentation_loss
    from fcn.training.optimizer import CaffeSGD
    from fcn.training.rates import skip_kernel_lr_mults

    keras.utils.set_random_seed(0)
    model = fcn.build_model("fcn8s", weights=weights)
    data = train_dataset(voc_pairs(sample_voc_root(), "train"), crop_size=crop, batch_size=1,
                         seed=0).repeat()  # fmt: skip
    batches = list(data.take(steps).as_numpy_iterator())
    if config < 0:
        return _energies_and_first_gradients(model, batches, min(steps, 8))
    label, lr, momentum, skip = DIAGNOSE[config]
    mults = skip_kernel_lr_mults(model) if skip else {}
    optimizer = CaffeSGD(learning_rate=lr, momentum=momentum, kernel_lr_mults=mults)
    loss_fn = segmentation_loss()

    @tf.function(reduce_retracing=True)
    def step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        optimizer.apply(tape.gradient(loss, model.trainable_variables), model.trainable_variables)
        return loss

    losses = []
    for images, labels in batches:
        losses.append(float(step(images, labels)))
    finite = [x for x in losses if np.isfinite(x)]
    return {
        "config": label,
        "losses": losses,
        "max": max(finite) if finite else None,
        "first_nan_step": next((i + 1 for i, x in enumerate(losses) if not np.isfinite(x)), None),
        "last_10_mean": float(np.mean(losses[-10:])),
    }


def train_recipe(weights: str, voc: str | None, recipe: str, epochs: int, steps: int) -> dict:
    """Part 2 for one recipe: ``fcn.train`` with its defaults (batch for the CPU, run length)."""
    import numpy as np

    import fcn
    from fcn.data import sample_voc_root

    recorder = LossRecorder()
    start = time.time()
    result = fcn.train(
        voc or sample_voc_root(), run_dir=tempfile.mkdtemp(prefix=f"fcn-{recipe}-"),
        weights=weights, recipe=recipe, epochs=epochs, steps_per_epoch=steps,
        callbacks=[recorder], verbose=0, **TRAIN[recipe],
    )  # fmt: skip
    history = result.history
    seen = fcn.evaluate(result.model, voc or sample_voc_root(), "train")  # the images it saw
    return {
        "recipe": recipe,
        "overrides": TRAIN[recipe],
        "epochs": epochs,
        "steps_per_epoch": steps,
        "losses": recorder.values,
        "failure": result.failure,
        "val_mean_iou": [row.get("val_mean_iou") for row in history],
        "val_pixel_accuracy": [row.get("val_pixel_accuracy") for row in history],
        "train_mean_iou": seen.mean_iou,
        "train_class_iou": {name: iou for name, iou in seen.class_iou.items() if iou == iou},
        "finite": bool(np.isfinite(recorder.values).all()),
        "seconds": time.time() - start,
    }


def _worker(args: list[str]) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run([sys.executable, __file__, *args], capture_output=True,
                         text=True, env=env)  # fmt: skip
    if run.returncode:
        raise RuntimeError(run.stderr[-3000:])
    return json.loads(run.stdout.strip().splitlines()[-1])


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, (losses, ious) = plt.subplots(1, 2, figsize=(12, 4.5))
    for row in rows:
        name = row.get("config") or row["recipe"]
        values = np.array(row["losses"], dtype=float)
        losses.plot(np.arange(1, len(values) + 1), np.clip(values, 0, 10), label=name)
        if "val_mean_iou" in row:
            ious.plot(range(1, len(row["val_mean_iou"]) + 1), row["val_mean_iou"], "o-", label=name)
    losses.axhline(np.log(21), color="grey", ls=":", label="chance (ln 21)")
    losses.set(xlabel="step", ylabel="training loss (clipped at 10)", title="loss per step")
    ious.set(xlabel="epoch", ylabel="validation mean IoU", title="fcn.train, real weights")
    losses.legend(fontsize=7)
    ious.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--weights", default=str(WEIGHTS), help="a Keras VGG16 weights file")
    parser.add_argument("--voc", help="VOC2012 root for part 2 (default: the shipped sample)")
    parser.add_argument("--parts", nargs="+", default=["diagnose", "train"])
    parser.add_argument("--crop", type=int, default=320, help="part 1 crop")
    parser.add_argument("--diagnose-steps", type=int, default=30)
    parser.add_argument("--recipes", nargs="+", default=list(TRAIN), choices=list(TRAIN))
    parser.add_argument("--epochs", type=int, default=10, help="part 2 epochs")
    parser.add_argument("--steps-per-epoch", type=int, default=6, help="part 2 steps per epoch")
    parser.add_argument("--out", default="convergence.png")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "diagnose":
            out = diagnose(args.weights, args.crop, args.diagnose_steps, int(rest[0]))
        else:
            out = train_recipe(args.weights, args.voc, rest[0], args.epochs, args.steps_per_epoch)
        print(json.dumps(out))
        return
    from fcn.device import cpu_summary

    print(f"# {cpu_summary()}", flush=True)  # the kernel set every figure below ran with
    common = ["--weights", args.weights, "--crop", str(args.crop), "--diagnose-steps",
              str(args.diagnose_steps), "--epochs", str(args.epochs), "--steps-per-epoch",
              str(args.steps_per_epoch)] + (["--voc", args.voc] if args.voc else [])  # fmt: skip
    rows = []
    if "diagnose" in args.parts:
        print(json.dumps(_worker([*common, "--worker", "diagnose", "-1"])), flush=True)
        for i in range(len(DIAGNOSE)):
            rows.append(_worker([*common, "--worker", "diagnose", str(i)]))
            print(json.dumps(rows[-1]), flush=True)
    if "train" in args.parts:
        for recipe in args.recipes:
            rows.append(_worker([*common, "--worker", "train", recipe]))
            print(json.dumps(rows[-1]), flush=True)
    for row in rows:
        name = row.get("config") or row["recipe"]
        losses, iou = row["losses"], row.get("val_mean_iou")
        last = sum(losses[-10:]) / len(losses[-10:])
        seen = row.get("train_mean_iou")
        print(f"{name:40s} first {losses[0]:.2f} max {max(losses):.3g} last-10 {last:.3g} {iou}"
              + (f" train mean IoU {seen:.4f}" if seen is not None else ""))  # fmt: skip
    plot(rows, Path(args.out))
    print(f"plot: {args.out}")


if __name__ == "__main__":
    main()
