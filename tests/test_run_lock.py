"""One training process per run directory (fcn.training.run_lock): a second start is refused
naming the holder, a killed holder's lock is taken over with a warning."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write_shapes

import fcn
from fcn.training.checkpoint import read_state
from fcn.training.run_lock import LOCK_FILE, RunDirectoryBusyError, hold

SCRIPT = Path(__file__).with_name("train_script.py")
RUN = dict(
    val_files=(), weights=None, width=1 / 16, num_classes=3, crop_size=64, augment=False,
    steps_per_epoch=1, batch_size=2, verbose=0,
)  # fmt: skip


def _wait_for_epoch(run_dir: Path, process: subprocess.Popen, timeout: float = 240) -> None:
    """Until ``process`` has saved an epoch in ``run_dir`` (so it holds the lock and writes)."""
    deadline = time.monotonic() + timeout
    while not (run_dir / "state.json").exists():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError(f"the first run never saved an epoch: {process.stderr.read()}")
        time.sleep(0.2)


def test_a_second_process_is_refused_and_a_killed_holders_lock_is_taken_over(tmp_path):
    run_dir = tmp_path / "run"
    first = subprocess.Popen(
        [sys.executable, str(SCRIPT), str(run_dir), "long"], stderr=subprocess.PIPE, text=True
    )
    try:
        _wait_for_epoch(run_dir, first)
        shapes = write_shapes(tmp_path / "mine", 8, size=64)
        for resume in (False, True):  # a plain second start, and --resume beside the live run
            before = read_state(run_dir)["epoch"]
            busy = rf"{run_dir} is in use by another training run \(pid {first.pid} "
            with pytest.raises(RunDirectoryBusyError, match=busy):
                fcn.train(train_files=shapes, run_dir=run_dir, epochs=2, resume=resume, **RUN)
            assert f"pid {first.pid} " in (run_dir / LOCK_FILE).read_text()
            deadline = time.monotonic() + 120
            while read_state(run_dir)["epoch"] <= before:  # the holder trains on
                assert first.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    assert first.returncode == -signal.SIGKILL
    assert f"pid {first.pid} " in (run_dir / LOCK_FILE).read_text()  # left by the killed run
    done = read_state(run_dir)["epoch"]
    with pytest.warns(UserWarning, match=f"taking over the lock left by pid {first.pid} "):
        result = fcn.train(train_files=shapes, run_dir=run_dir, epochs=done + 1, resume=True,
                           **RUN)  # fmt: skip
    assert [row["epoch"] for row in result.history][-1] == done  # it trained its epoch
    assert not (run_dir / LOCK_FILE).exists()  # released


def test_the_lock_is_released_when_the_run_raises_and_a_fresh_dir_is_left_as_it_was(tmp_path):
    run_dir = tmp_path / "fresh"
    with pytest.raises(ValueError, match="train_files is empty"):
        fcn.train(train_files=fcn.data.SegmentationFiles((), ()), run_dir=run_dir, **RUN)
    assert not run_dir.exists()  # made for the lock, nothing written: removed
    with hold(run_dir):  # free again
        assert os.listdir(run_dir) == [LOCK_FILE]
