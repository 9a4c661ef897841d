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
import numpy as np

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
    """The run's state (``epoch``, ``checkpoint``, ``best``, ``history``), or None if new.

    Example:
        >>> import tempfile
        >>> read_state(tempfile.mkdtemp()) is None  # a new run (see RunCheckpoint for one)
        True
    """
    path = Path(run_dir) / STATE_FILE
    return json.loads(path.read_text()) if path.exists() else None


def non_finite_weights(model: keras.Model) -> list[str]:
    """Paths of the variables of ``model`` and its optimizer holding a NaN or an infinity.

    Example:
        >>> fc = keras.layers.Dense(1, name="fc")
        >>> model = keras.Sequential([keras.Input((2,)), fc], name="net")
        >>> _ = fc.bias.assign([np.nan])
        >>> non_finite_weights(model)
        ['net/fc/bias']
    """
    variables = list(model.weights)
    if getattr(model, "optimizer", None) is not None:  # an uncompiled model has no optimizer
        variables += list(model.optimizer.variables)
    return [v.path for v in variables if not _finite(keras.ops.convert_to_numpy(v.value))]


def _finite(array: np.ndarray, chunk: int = 2**20) -> bool:
    """No NaN or infinity in ``array``, checked ``chunk`` elements at a time (a 392 MB fc6
    kernel needs a 1 MB mask, not a 98 MB one)."""
    flat = array.reshape(-1)
    return all(np.isfinite(flat[i : i + chunk]).all() for i in range(0, flat.size, chunk))


class RunCheckpoint(keras.callbacks.Callback):
    """Save the model and optimizer after each completed epoch, and the best model by ``monitor``.

    Before training, a run without a checkpoint saves ``epoch-0000.keras`` (the initial
    weights), so that there is always a last good checkpoint. An epoch that :attr:`guard`
    stopped is not saved. A checkpoint is deleted only once its checked successor is in place.
    List :attr:`guard` before the callbacks that use the epoch's weights (the evaluation) and
    this one after the callback that adds ``monitor`` to the logs.

    Example:
        >>> import tempfile
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> checkpoint = RunCheckpoint(tempfile.mkdtemp())
        >>> _ = model.fit(np.ones((4, 2)), np.ones(4), epochs=2, verbose=0,
        ...               callbacks=[checkpoint.guard, checkpoint])
        >>> read_state(checkpoint.run_dir)["epoch"], sorted(os.listdir(checkpoint.run_dir))
        (2, ['epoch-0002.keras', 'log.csv', 'state.json'])
    """

    def __init__(self, run_dir: str | os.PathLike, monitor: str = "val_mean_iou"):
        super().__init__()
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.monitor = monitor
        self.state = read_state(self.run_dir) or {
            "epoch": 0, "checkpoint": None, "best": None, "best_epoch": None, "history": [],
        }  # fmt: skip
        self.guard = FiniteGuard(self)

    @property
    def failure(self) -> str | None:
        """Why :attr:`guard` stopped training (None: it did not)."""
        return self.guard.failure

    def on_train_begin(self, logs: dict | None = None) -> None:
        if self.state["checkpoint"] is None:
            self._save(self.state["epoch"], logs=None)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self.failure:
            return
        logs = {k: float(v) for k, v in (logs or {}).items()}
        score, best = logs.get(self.monitor), self.state["best"]
        improved = score is not None and math.isfinite(score) and (best is None or score > best)
        self._save(epoch + 1, {"epoch": epoch, **logs}, best=score if improved else None)

    def _save(self, epochs: int, logs: dict | None, best: float | None = None) -> None:
        """Write the checkpoint after ``epochs`` epochs (and best.keras with a new ``best``
        score), then the state naming it, then delete the previous checkpoint."""
        checkpoint = self.run_dir / f"epoch-{epochs:04d}.keras"
        _replace_atomically(self.model.save, checkpoint)
        if best is not None:
            copy = lambda tmp: shutil.copyfile(checkpoint, tmp)  # noqa: E731
            _replace_atomically(copy, self.run_dir / BEST_FILE)
            self.state.update(best=best, best_epoch=epochs)
        previous = self.state["checkpoint"]
        self.state.update(epoch=epochs, checkpoint=checkpoint.name)
        if logs is not None:
            self.state["history"].append(logs)
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


class FiniteGuard(keras.callbacks.Callback):
    """At the end of each epoch, check the loss and every weight (model and optimizer): if one
    is not finite, stop training, set :attr:`failure` to why, and give the model the last good
    checkpoint's weights back, before anything uses or saves the epoch's weights (without a
    ``checkpoint``, as on a worker that writes no run directory, it only stops).

    Checked on the weights, not only the loss: under oneDNN a ReLU maps NaN to 0, so a NaN
    conv1_1 kernel leaves the loss finite while every prediction is garbage.

    Example:
        >>> import tempfile
        >>> fc = keras.layers.Dense(1, name="fc")
        >>> model = keras.Sequential([keras.Input((2,)), fc], name="net")
        >>> model.compile("sgd", "mse")
        >>> checkpoint = RunCheckpoint(tempfile.mkdtemp())
        >>> _ = model.fit(np.ones((4, 2)), np.full(4, np.inf), epochs=3, verbose=0,
        ...               callbacks=[checkpoint.guard, checkpoint])  # an infinite target
        >>> checkpoint.failure, non_finite_weights(model)
        ('epoch 1: non-finite weights in net/fc/kernel, net/fc/bias; kept epoch-0000.keras
        (epoch 0) and restored its weights', [])
    """

    def __init__(self, checkpoint: RunCheckpoint | None = None):
        super().__init__()
        self.checkpoint = checkpoint
        self.failure: str | None = None

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        bad = non_finite_weights(self.model)
        if not bad and math.isfinite(float((logs or {}).get("loss", 0.0))):
            return
        what = f"non-finite weights in {', '.join(bad[:3])}" if bad else "non-finite loss"
        self.failure = f"epoch {epoch + 1}: {what}{' and more' if len(bad) > 3 else ''}"
        self.model.stop_training = True
        if self.checkpoint is not None:
            state = self.checkpoint.state
            self.failure += (
                f"; kept {state['checkpoint']} (epoch {state['epoch']}) and restored its weights"
            )
            self.model.load_weights(self.checkpoint.run_dir / state["checkpoint"])
