"""A training run's directory: atomic checkpoints, the run state, logs; resumable after SIGKILL.

Layout of ``run_dir``::

    epoch-0007.keras   model + optimizer state after 7 completed epochs (the latest one only)
    best.keras         the model with the best validation mean IoU so far
    state.json         completed epochs, best score, full history; names the latest checkpoint
    log.csv            one row per completed epoch (rewritten from state.json)
    tensorboard/       TensorBoard event files

Every file is written to a temporary name in the same folder and renamed into place
(``os.replace`` is atomic), and ``state.json`` only ever names a checkpoint that is complete:
a crash at any moment leaves the previous consistent state.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from pathlib import Path

import keras

STATE_FILE = "state.json"
BEST_FILE = "best.keras"
LOG_FILE = "log.csv"


def _replace_atomically(write, path: Path) -> None:
    """Call ``write(tmp_path)``, flush it to disk, then rename it to ``path``."""
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    write(tmp)
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _write_text(text: str):
    return lambda tmp: Path(tmp).write_text(text)


def read_state(run_dir: str | os.PathLike) -> dict | None:
    """The run's state (``epoch``, ``checkpoint``, ``best``, ``history``), or None if new."""
    path = Path(run_dir) / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None


class RunCheckpoint(keras.callbacks.Callback):
    """Save the model and optimizer after each completed epoch, and the best model by ``monitor``.

    An epoch whose training loss is not finite is not saved (the last good checkpoint stays) and
    training stops. Put it after the callback that adds ``monitor`` to the logs.
    """

    def __init__(self, run_dir: str | os.PathLike, monitor: str = "val_mean_iou"):
        super().__init__()
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.monitor = monitor
        self.state = read_state(self.run_dir) or {
            "epoch": 0, "checkpoint": None, "best": None, "best_epoch": None, "history": [],
        }  # fmt: skip
        self.stopped_on_nan = False

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        logs = {k: float(v) for k, v in (logs or {}).items()}
        if not math.isfinite(logs.get("loss", 0.0)):
            self.stopped_on_nan = True
            self.model.stop_training = True
            return
        checkpoint = self.run_dir / f"epoch-{epoch + 1:04d}.keras"
        _replace_atomically(self.model.save, checkpoint)
        score = logs.get(self.monitor)
        best = self.state["best"]
        improved = score is not None and (best is None or score > best)
        if improved:
            copy = lambda tmp: shutil.copyfile(checkpoint, tmp)  # noqa: E731
            _replace_atomically(copy, self.run_dir / BEST_FILE)
        previous = self.state["checkpoint"]
        self.state.update(epoch=epoch + 1, checkpoint=checkpoint.name)
        if improved:
            self.state.update(best=score, best_epoch=epoch + 1)
        self.state["history"].append({"epoch": epoch, **logs})
        state = json.dumps(self.state, indent=1)
        _replace_atomically(_write_text(state), self.run_dir / STATE_FILE)
        if previous and previous != checkpoint.name:
            (self.run_dir / previous).unlink(missing_ok=True)
        self._write_csv()

    def _write_csv(self) -> None:
        history = self.state["history"]
        columns = sorted({key for row in history for key in row} - {"epoch"})

        def write(tmp):
            with open(tmp, "w", newline="") as f:
                writer = csv.DictWriter(f, ["epoch", *columns])
                writer.writeheader()
                writer.writerows(history)

        _replace_atomically(write, self.run_dir / LOG_FILE)
