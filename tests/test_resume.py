"""Resume as a state machine: what a resumed ``fcn.train`` / ``fcn train --resume`` does with each
setting and each state of the run directory (README, "Resuming a run")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from conftest import write_shapes

import fcn
from fcn.training.checkpoint import read_state
from fcn.training.config import STATE_FILE, TrainConfig
from fcn.training.train import RESUME_SEED_STRIDE, input_fn

SCRIPT = Path(__file__).with_name("train_script.py")
pytestmark = pytest.mark.xdist_group("resume")  # one worker: the one_epoch run is made once
STEPS = 2
RUN = dict(
    weights=None, width=1 / 16, num_classes=3, steps_per_epoch=STEPS, crop_size=48,
    batch_size=2, augment=False, learning_rate=0.01, mixed_precision=None, verbose=0,
)  # fmt: skip
"""float32 (a bf16 CPU would train in bf16 by default), so that FIXED's policy differs."""
FIXED = {  # a value other than RUN's for every setting that cannot change within a run
    "variant": "fcn32s", "weights": "imagenet", "width": 1 / 8, "dropout": 0.0,
    "num_classes": 4, "class_names": ["a", "b", "c"], "recipe": "paper", "accumulate": 2,
    "mixed_precision": "mixed_bfloat16", "init_from": "elsewhere.keras",
}  # fmt: skip


class Rates(keras.callbacks.Callback):
    """The learning rate each batch trains at (the schedule at the optimizer's iteration)."""

    def __init__(self):
        super().__init__()
        self.rates: list[float] = []

    def on_train_batch_begin(self, batch, logs=None):
        self.rates.append(float(keras.ops.convert_to_numpy(self.model.optimizer.learning_rate)))


def poly(base: float, total: int, steps: range) -> list[float]:
    """The practical recipe's poly schedule (power 0.9), written out: the rate at each step."""
    return [base * (1 - s / total) ** 0.9 for s in steps]


@pytest.fixture(scope="module")
def shapes(tmp_path_factory):
    return write_shapes(tmp_path_factory.mktemp("shapes"), 4, size=48)


@pytest.fixture(scope="module")
def one_epoch(shapes, tmp_path_factory):
    """A finished one-epoch run, copied by each test that changes it."""
    run_dir = tmp_path_factory.mktemp("run") / "run"
    fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, epochs=1, **RUN)
    return run_dir


def copy_run(run_dir: Path, tmp_path: Path) -> Path:
    shutil.copytree(run_dir, tmp_path / "run")
    return tmp_path / "run"


def test_more_epochs_train_at_the_rates_of_a_fresh_run_of_the_new_length(shapes, one_epoch,
                                                                        tmp_path):
    """The bug this replaces: the resumed optimizer kept the first run's schedule, which ended
    at its last step, so every added step trained at learning rate 0."""
    fresh = Rates()
    fcn.train(train_files=shapes, val_files=(), run_dir=tmp_path / "fresh", epochs=3,
              callbacks=[fresh], **RUN)  # fmt: skip
    run_dir, resumed = copy_run(one_epoch, tmp_path), Rates()
    result = fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, epochs=3,
                       resume=True, callbacks=[resumed])  # fmt: skip
    total = 3 * STEPS
    np.testing.assert_allclose(fresh.rates, poly(0.01, total, range(total)), rtol=1e-6)
    np.testing.assert_allclose(resumed.rates, fresh.rates[STEPS:], rtol=1e-6)
    assert min(resumed.rates) > 0.01 * (1 / total) ** 0.9 * 0.99
    assert int(result.model.optimizer.iterations) == total
    assert [row["epoch"] for row in result.history] == [0, 1, 2]
    assert read_state(run_dir)["settings"]["epochs"] == 3


def test_changed_learning_rate_and_batch_hold_from_the_next_epoch(shapes, one_epoch, tmp_path):
    """learning_rate and batch_size are honoured: the schedule restarts from the new rate at
    the step reached and spans the batches done plus the new epochs' (4 files / batch 4 = one
    step each); the record says what the run now trains with."""
    run_dir, rates = copy_run(one_epoch, tmp_path), Rates()
    result = fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, epochs=3,
                       resume=True, learning_rate=0.05, batch_size=4, steps_per_epoch=None,
                       callbacks=[rates])  # fmt: skip
    total = STEPS + 2 * 1
    np.testing.assert_allclose(rates.rates, poly(0.05, total, range(STEPS, total)), rtol=1e-6)
    assert int(result.model.optimizer.iterations) == total
    settings = read_state(run_dir)["settings"]
    assert (settings["learning_rate"], settings["batch_size"], settings["width"]) == (
        0.05, 4, 1 / 16
    )


def test_changed_data_settings_reach_the_input_pipeline_of_the_next_epoch(
    shapes, one_epoch, tmp_path, monkeypatch
):
    """crop_size, augment and the data take effect in the resumed epochs' input pipeline, which
    draws with a seed apart from the first run's (new orders and crops, not a replay)."""
    seen = []

    def recording(files, recipe, seed, num_classes):
        seen.append((len(files), recipe.crop_size, recipe.augment, seed))
        return input_fn(files, recipe, seed, num_classes)

    monkeypatch.setattr(fcn.training.train, "input_fn", recording)
    run_dir = copy_run(one_epoch, tmp_path)
    fcn.train(train_files=shapes.shard(2, 0), val_files=(), run_dir=run_dir, epochs=2,
              resume=True, crop_size=32, augment=True, seed=5)  # fmt: skip
    assert seen == [(2, 32, True, 5 + RESUME_SEED_STRIDE * 1)]
    settings = read_state(run_dir)["settings"]
    assert (settings["crop_size"], settings["augment"], settings["seed"]) == (32, True, 5)


@pytest.mark.parametrize("name", sorted(FIXED))
def test_a_setting_that_cannot_change_within_a_run_is_refused_by_name(shapes, one_epoch, name):
    before = (one_epoch / STATE_FILE).read_text()
    with pytest.raises(ValueError, match=rf"resume: {name} .* differs from the run's") as info:
        fcn.train(train_files=shapes, val_files=(), run_dir=one_epoch, epochs=2, resume=True,
                  **{name: FIXED[name]})  # fmt: skip
    assert f"pass {name}=" in str(info.value) and "another run_dir" in str(info.value)
    assert (one_epoch / STATE_FILE).read_text() == before  # nothing was trained or written


def test_an_explicit_config_is_compared_whole(shapes, one_epoch):
    """A TrainConfig passed on resume is the call's every setting: its default width (1.0)
    differs from the run's, so it is refused rather than silently replaced."""
    with pytest.raises(ValueError, match="width 1.0 differs from the run's 0.0625"):
        fcn.train(None, TrainConfig(run_dir=one_epoch, resume=True, epochs=2),
                  train_files=shapes, val_files=())  # fmt: skip


def test_fewer_epochs_are_refused_and_a_finished_run_trains_nothing(shapes, one_epoch, tmp_path):
    with pytest.raises(ValueError, match=r"has 1 epochs done; epochs=0 would undo"):
        fcn.train(train_files=shapes, val_files=(), run_dir=one_epoch, epochs=0, resume=True)
    run_dir = copy_run(one_epoch, tmp_path)
    with pytest.warns(UserWarning, match="its 1 epochs done: nothing to train"):
        result = fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, epochs=1,
                           resume=True)  # fmt: skip
    saved = keras.models.load_model(run_dir / "epoch-0001.keras")
    for ours, theirs in zip(result.model.weights, saved.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), err_msg=ours.path)
    assert int(result.model.optimizer.iterations) == STEPS
    assert len(result.history) == 1


def test_resume_in_an_empty_folder_starts_a_new_run_and_says_so(shapes, tmp_path):
    """(A missing folder takes the same way: neither holds a state.json.)"""
    run_dir = tmp_path / "empty"
    run_dir.mkdir()
    (run_dir / ".epoch-0000.tmp.keras").write_bytes(b"torn")  # killed in its first write
    with pytest.warns(UserWarning, match=f"nothing to resume in {run_dir}: starting a new"):
        result = fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, epochs=1,
                           resume=True, **RUN)  # fmt: skip
    assert read_state(run_dir)["epoch"] == 1 and len(result.history) == 1
    assert not list(run_dir.glob(".*tmp*"))


def test_half_written_run_directories_are_refused_naming_the_file(shapes, one_epoch, tmp_path):
    run_dir = copy_run(one_epoch, tmp_path)
    (run_dir / "epoch-0001.keras").rename(run_dir / "moved.keras")
    with pytest.raises(FileNotFoundError, match=r"names the checkpoint .*epoch-0001.keras"):
        fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, epochs=2, resume=True)
    (run_dir / STATE_FILE).write_text('{"epoch": 1, "checkpo')  # a torn write, by hand
    with pytest.raises(ValueError, match=rf"{STATE_FILE} is not a run's state"):
        fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, epochs=2, resume=True)
    state = read_state(one_epoch)
    legacy = {k: v for k, v in state.items() if k != "settings"}  # before settings were kept
    (run_dir / STATE_FILE).write_text(json.dumps(legacy))
    with pytest.raises(ValueError, match=r"records no training settings.*init_from=.*0001.keras"):
        fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, epochs=2, resume=True)


def test_a_sigkill_during_a_checkpoint_write_loses_only_that_epoch(tmp_path):
    """The training process kills itself (SIGKILL) halfway through writing epoch 2's
    checkpoint (the worst moment: a kill between writes leaves less to clean up). Resumed here
    with nothing but the data and the run directory (the rest is the run's record), it
    continues from epoch 1, removes the torn file and ends at the position of an uninterrupted
    run."""
    run_dir = tmp_path / "run"
    killed = subprocess.run([sys.executable, str(SCRIPT), str(run_dir), "kill-in-write"],
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert killed.returncode == -9, killed.stderr[-2000:]
    assert read_state(run_dir)["epoch"] == 1
    assert list(run_dir.glob(".epoch-0002.tmp*")), "the kill must leave a torn file behind"
    shapes = fcn.data.SegmentationFiles.from_folders(tmp_path / "shapes" / "images",
                                                     tmp_path / "shapes" / "labels")  # fmt: skip
    result = fcn.train(train_files=shapes, val_files=(), run_dir=run_dir, resume=True)
    assert [row["epoch"] for row in result.history] == [0, 1, 2]  # each epoch once
    assert int(result.model.optimizer.iterations) == 3 * 2  # the optimizer's position kept
    assert (run_dir / "log.csv").read_text().count("\n") == 4
    assert sorted(p.name for p in run_dir.glob("epoch-*.keras")) == ["epoch-0003.keras"]
    assert not list(run_dir.glob(".*tmp*"))


@pytest.fixture
def read_only(tmp_path):
    """A folder nobody can write to, root included: a read-only bind mount (root), or one
    without write permission (anyone else)."""
    source, folder = tmp_path / "source", tmp_path / "read-only"
    source.mkdir()
    folder.mkdir()
    if os.geteuid() != 0:
        yield source, source, lambda: source.chmod(0o555)
        source.chmod(0o755)
        return
    # root passes every permission check: only a read-only mount stops it. Containers often
    # deny mounting (no CAP_SYS_ADMIN) or have no mount command: found by trying, then skipped
    mount_or_skip(["mount", "--bind", source, folder])
    try:
        yield source, folder, lambda: mount_or_skip(["mount", "-o", "remount,bind,ro", folder])
    finally:
        subprocess.run(["umount", folder], check=True)


def mount_or_skip(command: list) -> None:
    """Run ``command`` (a mount); skip the test, saying why, where this host refuses it."""
    try:
        done = subprocess.run(command, capture_output=True, text=True)
    except FileNotFoundError:
        pytest.skip("running as root, and no mount command here for a read-only bind mount")
    if done.returncode:
        what = " ".join(part for part in command if isinstance(part, str))
        pytest.skip(f"running as root, and this host refuses {what}: {done.stderr.strip()}")


def test_a_read_only_run_directory_is_refused_before_training(shapes, one_epoch, read_only):
    source, folder, lock = read_only
    shutil.copytree(one_epoch, source, dirs_exist_ok=True)
    lock()
    with pytest.raises(OSError):
        (folder / "probe").write_text("")  # the folder really is read-only
    with pytest.raises(PermissionError, match=rf"run_dir {folder} is not writable.*nothing"):
        fcn.train(train_files=shapes, val_files=(), run_dir=folder, epochs=2, resume=True)
