"""A training run's directory: atomic checkpoints, the run state, logs; resumable after SIGKILL.

Layout of ``run_dir``::

    epoch-0007.keras   model + optimizer state after 7 completed epochs (the latest one only)
    best.keras         the model with the best validation mean IoU so far
    state.json         completed epochs and batches, best score, full history, the run's
                       settings (TrainConfig.to_json); names the latest checkpoint
    log.csv            one row per completed epoch (rewritten from state.json)
    tensorboard/       TensorBoard event files

Every file is written to a temporary name in the same folder and renamed into place
(``os.replace`` is atomic), and ``state.json`` only ever names a checkpoint that is complete:
a crash at any moment leaves the previous consistent state. A temporary file that a killed
write left behind is never read, and [`resume_state`][] removes it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
import warnings
from pathlib import Path

import keras
import numpy as np

from fcn.data.atomic import write_whole
from fcn.training.config import BEST_FILE, LOG_FILE, STATE_FILE


def check_writable(folder: str | os.PathLike) -> None:
    """Create ``folder`` if need be; raise PermissionError naming it unless a file can be
    written and renamed there (checked before training, so that no epoch is trained that could
    not be saved).

    Examples:
        >>> import tempfile
        >>> check_writable(Path(tempfile.mkdtemp()) / "run")  # made, and writable
    """
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise PermissionError(
            f"run_dir {folder} cannot be made ({error.strerror or error}): make its parent "
            "writable or pass another run_dir; nothing was trained"
        ) from error
    probe = folder / ".write-probe.tmp"
    try:
        write_whole(probe, Path.write_text, "", durable=True)
        probe.unlink()
    except OSError as error:
        raise PermissionError(
            f"run_dir {folder} is not writable ({error.strerror or error}): make it writable "
            "or pass another run_dir; nothing was trained"
        ) from error


def read_state(run_dir: str | os.PathLike) -> dict | None:
    """The run's state (``epoch``, ``iterations``, ``checkpoint``, ``best``, ``history``,
    ``settings``), or None if new.

    Raises:
        ValueError: ``state.json`` is there but is not a run's state, naming it.

    Examples:
        >>> import tempfile
        >>> read_state(tempfile.mkdtemp()) is None  # a new run (see RunCheckpoint for one)
        True
    """
    path = Path(run_dir) / STATE_FILE
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
        if not isinstance(state, dict) or not {"epoch", "checkpoint", "history"} <= set(state):
            raise ValueError("not a JSON object with epoch, checkpoint and history")
    except ValueError as error:
        raise ValueError(
            f"{path} is not a run's state ({error}): restore it from a backup, or start a new "
            "run in another run_dir"
        ) from error
    return state


def resume_state(run_dir: str | os.PathLike, resume: bool) -> dict | None:
    """The state a run in ``run_dir`` continues from: None for a new run.

    ``resume=False`` on a directory holding a run raises FileExistsError (nothing is
    overwritten). ``resume=True`` on a directory without a run (missing, empty, or killed before
    its first checkpoint was complete) starts a new run, with a warning that says so: one
    command serves the first start and every restart of a preemptible job. A run whose state
    records no settings (written before fcn recorded them), or names a checkpoint that is not
    there, is refused naming the file; temporary files left by a write that was killed are
    removed.

    Examples:
        >>> import tempfile
        >>> resume_state(tempfile.mkdtemp(), resume=False) is None
        True
    """
    run_dir = Path(run_dir)
    state = read_state(run_dir)
    if state is not None and not resume:
        raise FileExistsError(f"{run_dir} already holds a run: pass resume=True or a new run_dir")
    if not resume:
        return None
    for leftover in run_dir.glob(".*.tmp*"):  # a write killed before its rename
        try:
            leftover.unlink()
        except OSError:  # a read-only run_dir: fcn.train refuses it next, naming it
            pass
    if state is None:
        warnings.warn(f"nothing to resume in {run_dir}: starting a new run", stacklevel=3)
        return None
    if "settings" not in state or "iterations" not in state:
        raise ValueError(
            f"{run_dir / STATE_FILE} records no training settings (an earlier fcn wrote it), so "
            f"a resume cannot tell what it would change: start a new run_dir with "
            f"init_from={run_dir / state['checkpoint']} to continue from its weights"
        )
    checkpoint = run_dir / state["checkpoint"]
    if not checkpoint.is_file():
        raise FileNotFoundError(
            f"{run_dir / STATE_FILE} names the checkpoint {checkpoint}, which is not there: "
            "put it back, or start a new run in another run_dir"
        )
    return state


def non_finite_weights(model: keras.Model) -> list[str]:
    """Paths of the variables of ``model`` and its optimizer holding a NaN or an infinity.

    Examples:
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
    weights), so that there is always a last good checkpoint. An epoch that
    [`guard`][fcn.training.checkpoint.RunCheckpoint] stopped is not saved. A checkpoint is deleted
    only once its checked successor is in place. List
    [`guard`][fcn.training.checkpoint.RunCheckpoint] before the callbacks that use the epoch's
    weights (the evaluation) and this one after the callback that adds ``monitor`` to the logs.

    Examples:
        >>> import tempfile
        >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
        >>> model.compile("sgd", "mse")
        >>> checkpoint = RunCheckpoint(tempfile.mkdtemp())
        >>> _ = model.fit(np.ones((4, 2)), np.ones(4), epochs=2, verbose=0,
        ...               callbacks=[checkpoint.guard, checkpoint])
        >>> read_state(checkpoint.run_dir)["epoch"], sorted(os.listdir(checkpoint.run_dir))
        (2, ['epoch-0002.keras', 'log.csv', 'state.json'])
    """

    def __init__(
        self,
        run_dir: str | os.PathLike,
        monitor: str = "val_mean_iou",
        settings: dict | None = None,
    ):
        super().__init__()
        self.run_dir = Path(run_dir)
        check_writable(self.run_dir)
        self.monitor = monitor
        self.state = read_state(self.run_dir) or {
            "epoch": 0, "iterations": 0, "checkpoint": None, "best": None, "best_epoch": None,
            "history": [],
        }  # fmt: skip
        self.settings = settings
        """The run's settings from now on ([`fcn.TrainConfig.to_json`][]), recorded with each
        checkpoint."""
        self.guard = FiniteGuard(self)

    @property
    def failure(self) -> str | None:
        """Why [`guard`][fcn.training.checkpoint.RunCheckpoint] stopped training (None: it did
        not)."""
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
        write_whole(checkpoint, self.model.save, durable=True)
        if best is not None:
            copy = lambda tmp: shutil.copyfile(checkpoint, tmp)  # noqa: E731
            write_whole(self.run_dir / BEST_FILE, copy, durable=True)
            self.state.update(best=best, best_epoch=epochs)
        previous = self.state["checkpoint"]
        optimizer = getattr(self.model, "optimizer", None)
        iterations = 0 if optimizer is None else int(np.asarray(optimizer.iterations.numpy()))
        self.state.update(epoch=epochs, iterations=iterations, checkpoint=checkpoint.name)
        if self.settings is not None:
            self.state["settings"] = self.settings
        if logs is not None:
            self.state["history"].append(logs)
        state = json.dumps(self.state, indent=1)
        write_whole(self.run_dir / STATE_FILE, Path.write_text, state, durable=True)
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

        write_whole(self.run_dir / LOG_FILE, write, durable=True)


class FiniteGuard(keras.callbacks.Callback):
    """At the end of each epoch, check the loss and every weight (model and optimizer): if one
    is not finite, stop training, set [`failure`][fcn.training.checkpoint.FiniteGuard] to why, and
    give the model the last good checkpoint's weights back, before anything uses or saves the
    epoch's weights (without a ``checkpoint``, as on a worker that writes no run directory, it only
    stops).

    Checked on the weights, not only the loss: under oneDNN a ReLU maps NaN to 0, so a NaN
    conv1_1 kernel leaves the loss finite while every prediction is garbage.

    Examples:
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


def read_log(run_dir: str | os.PathLike) -> dict[str, np.ndarray]:
    """The columns of ``run_dir/log.csv`` (or of that CSV file) as float arrays, NaN if empty.

    Examples:
        >>> import tempfile
        >>> run = Path(tempfile.mkdtemp())
        >>> _ = (run / "log.csv").write_text("epoch,loss,val_mean_iou\\n0,2.5,\\n1,1.5,0.25\\n")
        >>> {name: column.tolist() for name, column in read_log(run).items()}
        {'epoch': [0.0, 1.0], 'loss': [2.5, 1.5], 'val_mean_iou': [nan, 0.25]}
    """
    log = Path(run_dir)
    with open(log / LOG_FILE if log.is_dir() else log, newline="") as f:
        rows = list(csv.DictReader(f))
    columns = rows[0].keys() if rows else []
    return {k: np.array([float(row[k] or "nan") for row in rows]) for k in columns}
