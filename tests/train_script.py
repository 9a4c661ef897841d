"""Training runs that tests start in their own process (SIGKILL, logical devices).

python tests/train_script.py RUN_DIR {kill-in-write,mirrored,long}

kill-in-write: a 3-epoch run that SIGKILLs itself halfway through writing epoch 2's checkpoint.
long: a run of 1,000 epochs (a process that holds its run directory until it is killed).
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import tensorflow as tf

MODE = sys.argv[2]
if MODE == "mirrored":  # two logical CPUs, before TensorFlow initialises its devices
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
from conftest import write_shapes  # noqa: E402

import fcn  # noqa: E402

run_dir = Path(sys.argv[1])
files = write_shapes(run_dir.parent / "shapes", 8, size=64)
common = dict(
    train_files=files, val_files=(), weights=None, width=1 / 16, num_classes=3, crop_size=64,
    augment=False, verbose=0,
)  # fmt: skip


if MODE == "kill-in-write":
    from fcn.training import checkpoint

    write_whole = checkpoint.write_whole

    def torn(path, write, *args, **kwargs):
        if path.name != "epoch-0002.keras":
            return write_whole(path, write, *args, **kwargs)
        tmp = path.with_name(f".{path.stem}.tmp-torn{path.suffix}")  # as write_whole names it
        write(tmp, *args)
        os.truncate(tmp, tmp.stat().st_size // 2)
        os.kill(os.getpid(), signal.SIGKILL)

    checkpoint.write_whole = torn
    fcn.train(**common, run_dir=run_dir, epochs=3, steps_per_epoch=2, batch_size=2)
elif MODE == "long":
    fcn.train(**common, run_dir=run_dir, epochs=1000, steps_per_epoch=1, batch_size=2)
elif MODE == "mirrored":
    losses = {}
    for name, strategy in [
        ("one", tf.distribute.OneDeviceStrategy("/cpu:0")),
        ("two", tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])),
    ]:
        keras.utils.set_random_seed(0)
        result = fcn.train(
            **common, run_dir=run_dir / name, epochs=2, steps_per_epoch=2, batch_size=4,
            strategy=strategy,
        )  # fmt: skip
        losses[name] = [row["loss"] for row in result.history]
        losses[name + "_replicas"] = strategy.num_replicas_in_sync
    print(json.dumps(losses))
