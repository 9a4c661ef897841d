"""Multi-worker training runs that tests start as separate processes on 127.0.0.1.

TF_CONFIG=... python tests/distributed_script.py worker DATA RUN_DIR EPOCHS STEPS [FLAGS]
python tests/distributed_script.py reference DATA EPOCHS STEPS CHIEF_CHECKPOINT

``worker`` trains as the worker its ``TF_CONFIG`` names
(:func:`fcn.training.distribute.local_cluster`) through ``fcn.train``, with FLAGS among
``resume``, ``slow`` (0.3 s after each step), ``val`` (validates), ``names`` (class names from a
file of each worker's own), ``unwritable`` (the chief's run_dir under a file), ``phases`` (from the
VGG16 notop file of the model's width that the test wrote as DATA/vgg16_notop.h5: the head
phase, then every layer from half the schedule), and for worker 1
alone ``fewer`` (one pair fewer), ``faster`` (twice the learning rate) or ``bare`` (no
settings); ``reference`` runs the same steps on the same global batches in one process, with the
default strategy and with MirroredStrategy on two logical CPUs, and compares the final weights
with the chief's checkpoint. Each prints one JSON line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from pathlib import Path

MODE, DATA = sys.argv[1], Path(sys.argv[2])

import tensorflow as tf  # noqa: E402

if MODE == "reference":  # two logical CPUs, before TensorFlow initialises its devices
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402
from conftest import width_reduced_build  # noqa: E402

import fcn  # noqa: E402
import fcn.training.train  # noqa: E402
from fcn.training import loop, phases  # noqa: E402
from fcn.training.recipes import RECIPES  # noqa: E402
from fcn.training.train import compile_for_training, input_fn  # noqa: E402

ROOT = fcn.data.write_synthetic_voc(
    DATA, 8, {"train": 8, "val": 2}, shapes=[(130, 90), (64, 64), (100, 150)], num_classes=3
)  # void rows between 50-pixel class blocks: each crop has its own count of labelled pixels;
# every worker writes this folder as it starts, and each file appears whole (renamed into place)
FILES = fcn.data.voc_pairs(ROOT, "train")
GLOBAL_BATCH = 2
SETTINGS = {
    "weights": None, "width": 1 / 16, "num_classes": 3, "dropout": 0.0, "crop_size": 64,
    "batch_size": GLOBAL_BATCH, "learning_rate": 0.01, "augment": False, "seed": 0,
    "mixed_precision": None,
}  # fmt: skip
"""Deterministic steps (no dropout, no scaling; crops and flips seeded per input pipeline), in
float32: the comparisons' tolerances are float32's (a bf16 CPU would train in bf16 by default)."""


class Losses(keras.callbacks.Callback):
    """Each step's loss, from the running means ``fit`` logs."""

    def __init__(self):
        super().__init__()
        self.means: list[float] = []

    def on_train_batch_end(self, batch, logs=None):
        self.means.append((batch, logs["loss"]))

    def losses(self) -> list[float]:
        steps, previous = [], 0.0
        for batch, mean in self.means:
            steps.append(mean * (batch + 1) - previous * batch)
            previous = mean
        return steps


class Slow(keras.callbacks.Callback):
    def on_train_batch_end(self, batch, logs=None):
        time.sleep(0.3)


if MODE == "worker":
    run_dir, epochs, steps = Path(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    flags = sys.argv[6:]
    files, settings = FILES, {**SETTINGS, "epochs": epochs, "steps_per_epoch": steps}
    index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
    if "names" in flags:  # the same names, from a file of each worker's own
        names = DATA / f"names-{index}.txt"
        names.write_text("sky\nroad\ncar\n")
        settings["class_names"] = str(names)
    if index == 0 and "unwritable" in flags:  # a run_dir under a file: it cannot be made
        (DATA / "a-file").write_text("")
        run_dir = DATA / "a-file" / "run"
    if "phases" in flags:  # a pretrained body: the head phase, then every layer
        phases.HEAD_MIN_IMAGES = 0  # the switch at half the schedule, however short
        fcn.training.train.build_model = width_reduced_build  # a VGG16 file of the model's width
        settings["weights"] = str(DATA / "vgg16_notop.h5")  # the test's; the chief reads it
        settings["unfreeze"] = "auto"
    if index == 1:  # worker 1 may differ
        if "fewer" in flags:
            files = fcn.data.SegmentationFiles(FILES.images[:-1], FILES.labels[:-1])
        if "faster" in flags:
            settings["learning_rate"] = 2 * SETTINGS["learning_rate"]
        if "bare" in flags:  # every setting is the chief's (width 1.0 and 50 epochs if not)
            settings = {}
    keras.utils.set_random_seed(0)
    recorder = Losses()
    result = fcn.train(
        train_files=files, run_dir=run_dir,
        val_files=fcn.data.voc_pairs(ROOT, "val") if "val" in flags else (),
        resume="resume" in flags, verbose=0,
        callbacks=[recorder, *([Slow()] if "slow" in flags else [])], **settings,
    )  # fmt: skip
    print(json.dumps({
        "losses": recorder.losses(),
        "epochs": [row.get("epoch") for row in result.history],
        "iterations": int(result.model.optimizer.iterations.numpy()),
        "failure": result.failure,
        "conv1_1": result.model.get_layer("conv1_1").kernel.numpy().tolist(),
        "conv1_1_trains": result.model.get_layer("conv1_1").trainable,
    }))  # fmt: skip
elif MODE == "reference":
    epochs, steps, chief_checkpoint = int(sys.argv[3]), int(sys.argv[4]), Path(sys.argv[5])
    overrides = ("crop_size", "batch_size", "learning_rate", "augment")  # as fcn.train does
    recipe = dataclasses.replace(RECIPES["practical"], **{k: SETTINGS[k] for k in overrides})

    def global_batches() -> tf.data.Dataset:
        """What the two workers' input pipelines give, side by side: each global batch."""
        fn = input_fn(FILES, recipe, SETTINGS["seed"], SETTINGS["num_classes"])
        parts = [fn(tf.distribute.InputContext(2, k, 2)) for k in range(2)]
        return tf.data.Dataset.zip(tuple(parts)).map(
            lambda a, b: (tf.concat([a[0], b[0]], 0), tf.concat([a[1], b[1]], 0))
        )

    report = {}
    for name, strategy in [
        ("one", tf.distribute.get_strategy()),
        ("two", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
    ]:
        keras.utils.set_random_seed(0)
        with strategy.scope():
            model = fcn.build_model("fcn8s", 3, None, width=1 / 16, dropout=0.0)
            compile_for_training(model, recipe, epochs * steps, pretrained=False)
        data = global_batches()
        if strategy.num_replicas_in_sync > 1:
            data = strategy.experimental_distribute_dataset(data)
        recorder = Losses()
        loop.fit(
            model, strategy, data, epochs=epochs, initial_epoch=0, steps_per_epoch=steps,
            callbacks=[recorder], verbose=0,
        )  # fmt: skip
        report[name] = recorder.losses()
        report[name + "_weights"] = [np.asarray(w) for w in model.get_weights()]
    chief = keras.models.load_model(chief_checkpoint).get_weights()
    for name in ("one", "two"):
        ours = report.pop(name + "_weights")
        scale = max(float(np.abs(w).max()) for w in ours)
        report[name + "_vs_chief"] = max(
            float(np.abs(a - b).max()) for a, b in zip(ours, chief, strict=True)
        ) / scale
    print(json.dumps(report))
