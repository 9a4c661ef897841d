"""Training across replicas and processes (fcn.training.distribute, fcn.training.loop): two
logical CPUs give one device's loss; two workers on 127.0.0.1 equal one process on the same
global batches, only the chief writes, and a killed cluster resumes losing no epoch."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import assert_within, sum_tolerance, vgg16_notop, write_legacy_h5
from hypothesis import given
from hypothesis import strategies as st

from fcn.training import distribute
from fcn.training.checkpoint import read_log, read_state
from fcn.training.distribute import fingerprint, local_cluster
from fcn.training.phases import FROZEN_COLUMN
from fcn.training.recipes import RECIPES
from fcn.training.run_lock import hold
from fcn.training.train import compile_for_training

SCRIPT = Path(__file__).with_name("distributed_script.py")
TRAIN_SCRIPT = Path(__file__).with_name("train_script.py")
"""Trains in one process under a strategy named on its command line (two logical CPUs)."""
TIMEOUT = 300
"""Seconds a run may take before the test fails (and kills what is left)."""


def start(
    *args: str | os.PathLike, tf_config: str | None = None, script: Path = SCRIPT
) -> subprocess.Popen:
    """``python distributed_script.py ARGS`` (or another ``script``), a worker of the cluster
    ``tf_config`` names, or on its own without one."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": str(SCRIPT.parent)}
    env.pop("TF_CONFIG", None)
    if tf_config:
        env["TF_CONFIG"] = tf_config
    return subprocess.Popen(
        [sys.executable, str(script), *map(str, args)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def finish(processes: list[subprocess.Popen]) -> list[tuple[str, str]]:
    """Each process's (stdout, stderr), once every one has ended; all are killed when one
    runs past TIMEOUT."""
    try:
        return [process.communicate(timeout=TIMEOUT) for process in processes]
    except subprocess.TimeoutExpired:
        for process in processes:
            process.kill()
        raise


def results(processes: list[subprocess.Popen]) -> list[dict]:
    """Each process's JSON line, once every one has ended. A failure shows the end of every
    process's stderr: a worker's own error often surfaces as its peer's lost collective."""
    ended = finish(processes)
    codes = [process.returncode for process in processes]
    assert not any(codes), "\n".join(
        f"--- process {i} (exit {code}):\n{err[-3000:]}"
        for i, (code, (_, err)) in enumerate(zip(codes, ended, strict=True))
    )
    return [json.loads(out.strip().splitlines()[-1]) for out, _ in ended]


def cluster(data, run_dirs, epochs: int, steps: int, *flags: str) -> list[subprocess.Popen]:
    return [
        start("worker", data, run_dir, epochs, steps, *flags, tf_config=config)
        for run_dir, config in zip(run_dirs, local_cluster(len(run_dirs)), strict=True)
    ]


def test_cluster_ports_are_free_and_never_handed_out_by_the_system():
    """The workers' ports lie below the range Linux gives to port-0 binds and outgoing
    connections, so another test's server or client cannot take one before the workers bind."""
    first_ephemeral = int(distribute.EPHEMERAL_PORTS.read_text().split()[0])
    ports = [int(a.split(":")[1]) for a in json.loads(local_cluster(3)[0])["cluster"]["worker"]]
    assert len(set(ports)) == 3 and all(1024 <= p < first_ephemeral for p in ports), ports
    with socket.socket() as other:  # what a port-0 bind gets: never one of those
        other.bind(("127.0.0.1", 0))
        assert other.getsockname()[1] >= first_ephemeral
    for port in ports:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))  # each one free


def test_two_workers_equal_one_process_and_only_the_chief_writes(tmp_path):
    """Two worker processes, one replica each, 2 epochs of 3 steps of a width-1/16 FCN-8s
    without dropout (the other worker's run_dir locked by this process: the chief alone
    locks); then one process runs the same global batches with the default strategy
    and with MirroredStrategy on two logical CPUs. The two-replica runs sum the same float32
    gradient halves; one device sums the global batch in another order, so its losses agree to
    float rounding (seen: 1.3e-6 relative at most) and its weights after 6 steps too (seen:
    1.7e-8 of their largest magnitude; bound 1e-6). A worker that kept its own initial
    weights is off by far more; a loss averaged per replica instead of over the labelled
    pixels of the global batch (the crops hold different numbers of void pixels) moved the
    losses by up to 6e-4 relative, 60x the bound (tried). Each worker reads the same class
    names from a file of its own (paths differ between machines: compared as names)."""
    epochs, steps = 2, 3
    chief_dir, other_dir = tmp_path / "chief", tmp_path / "other"
    with hold(other_dir):  # this process holds the other worker's run_dir: it never locks it
        chief, other = results(
            cluster(tmp_path / "data", [chief_dir, other_dir], epochs, steps, "names")
        )
    assert chief["losses"] == other["losses"]  # both log the all-reduced global loss
    assert len(chief["losses"]) == epochs * steps and chief["iterations"] == epochs * steps
    assert not other_dir.exists()  # the other worker wrote nothing
    state = read_state(chief_dir)
    assert state["epoch"] == epochs and [row["epoch"] for row in state["history"]] == [0, 1]
    assert sorted(p.name for p in chief_dir.iterdir()) == [
        f"epoch-{epochs:04d}.keras", "log.csv", "state.json", "tensorboard",
    ]  # fmt: skip

    (reference,) = results([start("reference", tmp_path / "data", epochs, steps,
                                  chief_dir / f"epoch-{epochs:04d}.keras")])  # fmt: skip
    np.testing.assert_allclose(chief["losses"], reference["one"], rtol=1e-5)
    np.testing.assert_allclose(reference["two"], reference["one"], rtol=1e-5)
    assert reference["one_vs_chief"] < 1e-6 and reference["two_vs_chief"] < 1e-6, reference
    assert len(set(np.round(reference["one"], 4))) > 1  # the steps changed the weights


def test_a_killed_worker_and_a_restart_with_resume_lose_no_epoch(tmp_path):
    """SIGKILL the second worker once the chief has completed an epoch (and evaluated it); the
    chief then waits in an all-reduce forever, so it is killed too (as a cluster manager would).
    Both started again with resume, the second given no settings and no view of the run
    directory (as on another machine): it takes the chief's, and the run completes every epoch
    once, from the chief's checkpoint, with a validation score for each."""
    epochs, steps = 3, 4
    dirs = [tmp_path / "run", tmp_path / "other"]
    processes = cluster(tmp_path / "data", dirs, epochs, steps, "slow", "val")
    deadline = time.time() + TIMEOUT
    while time.time() < deadline and not (read_state(dirs[0]) or {}).get("epoch"):
        assert all(p.poll() is None for p in processes), processes[0].communicate()[1][-3000:]
        time.sleep(0.05)
    processes[1].send_signal(signal.SIGKILL)
    time.sleep(1.0)
    processes[0].send_signal(signal.SIGKILL)
    for process in processes:
        process.communicate(timeout=TIMEOUT)
    done = read_state(dirs[0])["epoch"]
    if done >= epochs:
        pytest.fail(f"the run finished ({done} epochs) before the kill: make it slower")
    chief, other = results(
        cluster(tmp_path / "data", dirs, epochs, steps, "resume", "val", "bare")
    )
    state = read_state(dirs[0])
    assert [row["epoch"] for row in state["history"]] == list(range(epochs))
    # The chief evaluated every epoch (under the multi-worker strategy) and kept the best.
    assert all(0 <= row["val_mean_iou"] <= 1 for row in state["history"])
    assert (dirs[0] / "best.keras").exists() and state["best_epoch"] in range(1, epochs + 1)
    assert chief["epochs"] == list(range(epochs))
    assert chief["iterations"] == other["iterations"] == epochs * steps
    assert len(chief["losses"]) == (epochs - done) * steps
    assert other["losses"] == chief["losses"]  # both log the all-reduced global loss
    assert not dirs[1].exists()
    # Started again without resume: the chief refuses to overwrite the run, and so does the
    # other worker, quoting it (it cannot see the run directory itself).
    again = cluster(tmp_path / "data", dirs, epochs, steps, "bare")
    errors = [err for _, err in finish(again)]
    assert all(p.returncode != 0 for p in again), errors[1][-3000:]
    assert f"FileExistsError: {dirs[0]} already holds a run: pass resume=True" in errors[0]
    assert "ValueError: 1 of 2 workers stopped (the chief: FileExistsError: " in errors[1]
    assert read_state(dirs[0])["epoch"] == epochs  # nothing overwritten


def test_two_workers_switch_to_every_layer_at_the_same_epoch(tmp_path):
    """From a pretrained body (the head phase's image floor lifted), 4 epochs of one step with
    the chief validating: the chief decides the switch at half the schedule and both workers
    train every layer from epoch 3 (neither waits in a collective the other skipped): the
    chief's log.csv holds 5, 5, 0, 0 and both end with the same conv1_1, trainable."""
    dirs = [tmp_path / "run", tmp_path / "other"]
    (tmp_path / "data").mkdir()
    write_legacy_h5(vgg16_notop(1 / 16), tmp_path / "data" / "vgg16_notop.h5")  # the width's
    chief, other = results(cluster(tmp_path / "data", dirs, 4, 1, "phases", "val"))
    frozen = RECIPES["practical"].frozen_blocks
    assert read_log(dirs[0])[FROZEN_COLUMN].tolist() == [frozen, frozen, 0, 0]
    assert chief["conv1_1_trains"] and other["conv1_1_trains"]
    assert chief["conv1_1"] == other["conv1_1"]
    assert not dirs[1].exists()


NAMES = st.lists(st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0/")))
"""Lists of file names: any characters but NUL and "/" (no file name holds them)."""


@given(NAMES, NAMES)
def test_the_fingerprints_of_two_name_lists_are_equal_when_the_lists_are(first, second):
    """Equal lists, equal fingerprints; any other list (another name, order, split of the same
    characters into names, or length), another fingerprint (a collision: 1 in 2**63)."""
    assert (fingerprint(first) == fingerprint(second)) == (first == second)
    if first:
        joined = ["".join(first)] + [""] * (len(first) - 1)  # the same characters, cut elsewhere
        assert (fingerprint(joined) == fingerprint(first)) == (joined == first)


DIFFERENT_LISTS = "ValueError: train_files differ between the workers: 1 of 2 hold other pairs or "
OTHER_SETTINGS = "ValueError: 1 of 2 workers were given other settings than the chief's "


@pytest.mark.parametrize("flag, errors", [
    ("fewer", [DIFFERENT_LISTS + "another order than the chief's 8 (this one: 8 pairs, the same "
               "names and order)",
               DIFFERENT_LISTS + "another order than the chief's 8 (this one: 7 pairs, other "
               "names and order)"]),
    ("faster", [OTHER_SETTINGS + "(not the chief)",
                OTHER_SETTINGS + "(this one: learning_rate 0.02 differs from the chief's 0.01)"]),
    ("unwritable", ["PermissionError: run_dir ",
                    "ValueError: 1 of 2 workers stopped (the chief: PermissionError: run_dir "]),
])  # fmt: skip
def test_workers_given_other_data_or_settings_all_refuse(tmp_path, flag, errors):
    """The second worker is given the chief's training pairs less the last one (as a machine
    with an older split file would be: it would read every other pair of its own list and
    count 3 steps to the chief's 4), or twice its learning rate (its weights would drift from
    the chief's); or the chief is given a run_dir it cannot make. Both refuse before building
    anything, each saying what differs or quoting the chief, and nothing is written."""
    dirs = [tmp_path / "run", tmp_path / "other"]
    processes = cluster(tmp_path / "data", dirs, 1, 2, flag)
    ended = finish(processes)
    for process, (_, err), error in zip(processes, ended, errors, strict=True):
        assert process.returncode != 0 and error in err, err[-3000:]
    assert not dirs[0].exists() and not dirs[1].exists()


def test_a_busy_run_directory_stops_every_worker(tmp_path):
    """This process holds the chief's run_dir: the chief refuses naming this process and the
    other worker stops quoting it, before anything is read or written. (That the chief alone
    locks: the two-worker test, the other's run_dir held by this process.)"""
    dirs = [tmp_path / "busy", tmp_path / "other"]
    with hold(dirs[0]):
        processes = cluster(tmp_path / "data", dirs, 1, 2)
        errors = [err for _, err in finish(processes)]
    assert all(p.returncode != 0 for p in processes), errors[1][-3000:]
    busy = f"RunDirectoryBusyError: {dirs[0]} is in use by another training run (pid {os.getpid()} "
    assert busy in errors[0], errors[0][-3000:]
    assert "ValueError: 1 of 2 workers stopped (the chief: RunDirectoryBusyError: " in errors[1]
    assert not dirs[0].exists() and not dirs[1].exists()  # made by this hold alone, removed


@pytest.mark.parametrize("policy, accumulate", [("float32", 2), ("mixed_float16", 1)])
def test_the_loop_equals_keras_fit_on_one_device(policy, accumulate):
    """fcn.train's loop against Keras' own fit, same model, recipe and batches: gradient
    accumulation (the optimizer averages 2 batches per update) and mixed precision (a loss-scale
    optimizer) behave the same.

    Both run the same kernels on the same batches (fit not XLA-compiled: ``jit_compile`` off,
    as Keras has it on a CPU); they differ in the loss's reduction alone: Keras' mean over the
    labelled pixels against the loop's sum divided by their count, two float32 sums of N
    nonnegative terms in other orders (the logits are float32 under both policies). So each
    step's loss, and the scale of its gradient, agree to ``rtol = sum_tolerance(N, 1)``
    (4.6e-5 for N = 4,128; seen: 6.5e-7), and each array's change ``w - w0`` after the 4 steps
    to 4 such shares of its largest change plus one float32 rounding of the weight per step
    (seen: 7e-7 of the change in float32, none in mixed precision: float16 gradients round
    alike). The errors this must catch are far larger: a loop that forgets the loss scale in
    mixed precision moves every weight 1/32768 as far (its losses only 1e-3 apart, inside the
    2e-3 once allowed: the weights catch it), one that counts void pixels as labelled gives
    losses 10% low and updates 3-17% small."""

    from fcn import build_model
    from fcn.training import loop

    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (4, 2, 48, 48, 3), dtype=np.uint8)
    labels = rng.integers(0, 3, (4, 2, 48, 48), dtype=np.uint8)
    labels[:, :, :5] = 255  # void rows: the loss is over labelled pixels only
    data = tf.data.Dataset.from_tensor_slices((images, labels))
    recipe = dataclasses.replace(RECIPES["practical"], learning_rate=0.01)
    runs = {}
    for name in ("fit", "loop"):
        previous = keras.mixed_precision.global_policy()
        keras.mixed_precision.set_global_policy(policy)
        try:
            keras.utils.set_random_seed(0)
            model = build_model("fcn8s", 3, None, width=1 / 16, dropout=0.0)
            compile_for_training(model, recipe, 4, accumulate, pretrained=False)
            model.jit_compile = False  # fit runs the loop's kernels (XLA would sum otherwise)
            initial = [np.asarray(w, np.float64) for w in model.get_weights()]
        finally:
            keras.mixed_precision.set_global_policy(previous)
        losses = []
        record = keras.callbacks.LambdaCallback(
            on_train_batch_end=lambda batch, logs, losses=losses: losses.append(logs["loss"])
        )
        schedule = {"epochs": 1, "steps_per_epoch": 4, "callbacks": [record], "verbose": 0}
        if name == "fit":
            model.fit(data.repeat(), shuffle=False, **schedule)
        else:
            loop.fit(model, tf.distribute.get_strategy(), data.repeat(), initial_epoch=0,
                     **schedule)  # fmt: skip
        runs[name] = (losses, [np.asarray(w, np.float64) for w in model.get_weights()])
    rtol = float(sum_tolerance(int((labels[0] != 255).sum()), 1.0))  # pixels of each batch
    np.testing.assert_allclose(runs["loop"][0], runs["fit"][0], rtol=rtol)
    steps, names = len(images), [w.path for w in model.weights]
    for name, w0, ours, theirs in zip(names, initial, *(runs[r][1] for r in ("loop", "fit")),
                                      strict=True):  # fmt: skip
        rounding = np.spacing(np.abs(theirs).astype(np.float32)).astype(np.float64)
        tolerance = steps * (rtol * np.abs(theirs - w0).max() + rounding)
        assert_within(ours - w0, theirs - w0, tolerance, name)
    moved = [not np.array_equal(w, w0) for w, w0 in zip(runs["loop"][1], initial, strict=True)]
    assert sum(moved) > len(moved) // 2  # it trained (the frozen upsamplers stay)


def test_two_logical_cpus_give_the_loss_of_one_device(tmp_path):
    (losses,) = results([start(tmp_path / "run", "mirrored", script=TRAIN_SCRIPT)])
    assert losses["one_replicas"] == 1 and losses["two_replicas"] == 2
    # Equal up to dropout: each replica draws its own masks, so steps after the first differ by
    # ~1e-4 relative (seen: 1.096014 vs 1.095908 for the first epoch's mean).
    np.testing.assert_allclose(losses["two"], losses["one"], rtol=2e-3)
