"""The two phases of a run from pretrained weights (fcn.training.phases): the rule that ends the
head phase, the switch in a real run, its record in log.csv, and a resume on either side of it."""

from __future__ import annotations

import math

import keras
import numpy as np
import pytest
import tensorflow as tf
from conftest import width_reduced_build, write_shapes
from hypothesis import given
from hypothesis import strategies as st

import fcn
import fcn.training.train as train_module
from fcn.training import loop, phases
from fcn.training.checkpoint import read_log, read_state
from fcn.training.phases import (
    FROZEN_COLUMN,
    HEAD_MIN_IMAGES,
    HEAD_SHARE,
    PLATEAU_EVALUATIONS,
    PLATEAU_GAIN,
    HeadPhase,
    head_phase_over,
)
from fcn.training.recipes import RECIPES, schedule_epochs
from fcn.training.train import compile_for_training

SCORES = st.lists(st.one_of(st.floats(0, 1), st.just(math.nan)), max_size=12)


@given(SCORES, st.integers(0, 10**6), st.integers(1, 10**6), st.integers(1, 64))
def test_the_head_phase_ends_on_a_plateau_or_at_its_share_never_before_its_images(
    scores, done, total, batch
):
    """The rule, restated from its documented parts: nothing before HEAD_MIN_IMAGES images;
    then a plateau (no finite score among the last PLATEAU_EVALUATIONS at least PLATEAU_GAIN
    above every finite score before them) or HEAD_SHARE of the batches."""
    finite = [s for s in scores if not math.isnan(s)]
    earlier, recent = finite[:-PLATEAU_EVALUATIONS], finite[-PLATEAU_EVALUATIONS:]
    improved = any(all(r >= e + PLATEAU_GAIN for e in earlier) for r in recent)
    plateau = bool(earlier) and not improved
    share = done >= HEAD_SHARE * total
    expected = done * batch >= HEAD_MIN_IMAGES and (plateau or share)
    reason = head_phase_over(scores, done, total, batch)
    assert (reason is not None) == expected, reason
    if expected:  # the reason names its evidence
        assert ("validation mean IoU" in reason) == plateau, reason
        assert ("batches done" in reason) == (not plateau), reason


def test_the_measured_small_job_trains_the_head_alone_for_its_whole_schedule():
    """The job the second phase was measured on (118 VOC images, `benchmarks/README.md`: no gain
    there at 2.3 times the cost per crop) keeps the head phase to its default schedule's end, on a
    validation plateau too; the same schedule over twice the images switches."""
    recipe = RECIPES["practical"]
    for images, switches in ((118, False), (236, True)):
        per_epoch = images // recipe.batch_size
        total = schedule_epochs(recipe, per_epoch) * per_epoch
        reason = head_phase_over([0.3, 0.2, 0.2, 0.2], total, total, recipe.batch_size)
        assert (reason is not None) == switches, (images, total, reason)


@pytest.fixture
def pretrained_run(vgg16_notop_file, tmp_path, monkeypatch):
    """``run(run_dir, **settings)``: fcn.train of a width-1/16 FCN-8s from a VGG16 notop file of
    that width (:func:`conftest.width_reduced_build`), 4 epochs of one batch of 2 crops without
    validation, the head phase's image floor lifted (the rule's own test is above): the switch
    falls at half the 4 batches."""
    monkeypatch.setattr(phases, "HEAD_MIN_IMAGES", 0)
    monkeypatch.setattr(train_module, "build_model", width_reduced_build)
    weights = vgg16_notop_file(width=1 / 16)
    files = write_shapes(tmp_path / "shapes", 6)

    def run(run_dir, **settings):
        settings = {
            "train_files": files, "val_files": (), "weights": str(weights), "width": 1 / 16,
            "epochs": 4, "steps_per_epoch": 1, "crop_size": 64, "batch_size": 2,
            "mixed_precision": None, "verbose": 0, "run_dir": run_dir, "unfreeze": "auto",
            **settings,
        }  # fmt: skip
        return fcn.train(**settings)

    return run


class Stop(keras.callbacks.Callback):
    """Stops training after ``epochs`` epochs, as a kill between epochs would."""

    def __init__(self, epochs: int):
        super().__init__()
        self.epochs = epochs

    def on_epoch_end(self, epoch, logs=None):
        if epoch + 1 >= self.epochs:
            self.model.stop_training = True


class Kernels(keras.callbacks.Callback):
    """A layer's kernel (conv1_1's unless ``layer`` says) at the start and after every epoch."""

    def __init__(self, layer: str = "conv1_1"):
        super().__init__()
        self.layer = layer
        self.kernels: list[np.ndarray] = []

    def on_train_begin(self, logs=None):
        self.kernels.append(self.model.get_layer(self.layer).kernel.numpy())

    def on_epoch_end(self, epoch, logs=None):
        self.kernels.append(self.model.get_layer(self.layer).kernel.numpy())


def changed(kernels: list[np.ndarray]) -> list[bool]:
    """Whether each epoch changed the kernel."""
    return [not np.array_equal(a, b) for a, b in zip(kernels, kernels[1:])]


def test_a_pretrained_run_trains_under_mixed_float16(pretrained_run, tmp_path):
    """Keras wraps the optimizer in a LossScaleOptimizer there: score_fr's measured rate and the
    phase's batch count reach the CaffeSGD inside (score_fr's rate once raised AttributeError).
    (No switch asserted: the inner optimizer counts the batches the loss scale did not skip,
    and how many of 4 it skips is the loss scale's business.)"""
    result = pretrained_run(tmp_path / "run", mixed_precision="mixed_float16")
    assert result.failure is None and len(read_log(tmp_path / "run")["epoch"]) == 4


def test_the_body_trains_from_the_switch_on_and_log_csv_records_it(pretrained_run, tmp_path,
                                                                   capsys):  # fmt: skip
    """Epochs 1-2 keep VGG block 1 as initialised; at the start of epoch 3 (2 of 4 batches done)
    every layer trains, said once; log.csv's column holds 5, 5, 0, 0."""
    conv1 = Kernels()
    pretrained_run(tmp_path / "run", callbacks=[conv1], verbose=2)
    frozen = RECIPES["practical"].frozen_blocks
    assert read_log(tmp_path / "run")[FROZEN_COLUMN].tolist() == [frozen, frozen, 0, 0]
    assert changed(conv1.kernels) == [False, False, True, True]
    said = [line for line in capsys.readouterr().out.splitlines() if "every layer trains" in line]
    assert said == [
        f"epoch 3 on: every layer trains (VGG blocks 1-{frozen} no longer frozen): 2 of 4 "
        "batches done (50% of the schedule)"
    ]


def test_the_body_trains_at_its_body_rate(pretrained_run, tmp_path):
    """The same run at body_rate 1 and 1/4: equal up to the switch (the share leaves the head
    phase alone), then conv1_1's first step (from zero momentum) a quarter as long."""
    kernels = {}
    for rate in (1.0, 0.25):
        keras.utils.set_random_seed(0)  # fc6/fc7's draw and the dropout (not TrainConfig.seed's)
        conv1 = Kernels()
        pretrained_run(tmp_path / f"run{rate}", body_rate=rate, callbacks=[conv1])
        kernels[rate] = conv1.kernels
    before, full, quarter = kernels[1.0][2], kernels[1.0][3], kernels[0.25][3]
    np.testing.assert_array_equal(kernels[0.25][2], before)  # the head phase never moved it
    # one float32 addition w + m rounds by half an ulp of |w|: the step is exact to 2 ulps
    ulp = 2 * np.spacing(np.abs(before).max())
    assert np.abs(full - before).max() > 100 * ulp  # a step far above the rounding
    np.testing.assert_allclose(quarter - before, (full - before) / 4, rtol=1e-4, atol=2 * ulp)


@pytest.mark.parametrize("stop", [2, 3])
def test_a_resumed_run_continues_in_its_phase(pretrained_run, tmp_path, stop):
    """Stopped after 2 epochs (before the switch) or 3 (after it) and resumed: the same phases
    as a run never stopped, and the body trains exactly in the epochs after the switch."""
    pretrained_run(tmp_path / "run", callbacks=[Stop(stop)])
    assert read_state(tmp_path / "run")["epoch"] == stop
    conv1 = Kernels()
    pretrained_run(tmp_path / "run", resume=True, callbacks=[conv1])
    frozen = RECIPES["practical"].frozen_blocks
    assert read_log(tmp_path / "run")[FROZEN_COLUMN].tolist() == [frozen, frozen, 0, 0]
    assert changed(conv1.kernels) == [True] * (4 - stop)


def test_unfreeze_never_keeps_the_blocks_frozen_for_the_whole_run(pretrained_run, tmp_path):
    conv1 = Kernels()
    pretrained_run(tmp_path / "run", unfreeze="never", callbacks=[conv1])
    assert changed(conv1.kernels) == [False] * 4
    assert FROZEN_COLUMN not in read_log(tmp_path / "run")


def test_the_head_phase_of_auto_trains_what_never_trains(pretrained_run, tmp_path):
    """Up to the switch (2 of 4 epochs) unfreeze="auto" takes the steps "never" takes (its
    optimizer holds the body's slots from the start; nothing reads them in the head phase):
    fc6's kernel after epochs 1 and 2 of the same draw is the same array in both runs."""
    fc6 = {}
    for unfreeze in ("auto", "never"):
        keras.utils.set_random_seed(0)  # fc6/fc7's draw and the dropout (not TrainConfig.seed's)
        fc6[unfreeze] = Kernels("fc6")
        pretrained_run(tmp_path / unfreeze, unfreeze=unfreeze, callbacks=[fc6[unfreeze]])
    auto, never = fc6["auto"].kernels, fc6["never"].kernels
    assert changed(never) == [True] * 4
    for epoch in (1, 2):
        np.testing.assert_array_equal(auto[epoch], never[epoch])


@pytest.mark.parametrize("last, switched", [(0.30, True), (0.31 + 2 * PLATEAU_GAIN, False)])
def test_a_validation_plateau_switches_long_before_the_share(last, switched):
    """A run whose history holds the best score and then PLATEAU_EVALUATIONS without a gain of
    PLATEAU_GAIN switches at its next epoch, one batch into a schedule of 100 (the share alone
    would wait for 50); a gain in the last one keeps the head phase."""
    model = fcn.build_model("fcn8s", 3, weights=None, width=1 / 16)
    recipe = RECIPES["practical"]
    compile_for_training(model, recipe, total_batches=100)
    model.optimizer.iterations.assign(1)
    scores = [0.31, 0.30, 0.30, last][-(PLATEAU_EVALUATIONS + 1):]
    history = [{"val_mean_iou": s, FROZEN_COLUMN: recipe.frozen_blocks} for s in scores]
    strategy = tf.distribute.get_strategy()
    phase = HeadPhase(strategy, recipe.frozen_layers(), recipe.frozen_blocks, total_batches=100,
                      batch_size=HEAD_MIN_IMAGES, history=history, verbose=0)  # fmt: skip
    frozen = []
    record = keras.callbacks.LambdaCallback(
        on_epoch_end=lambda epoch, logs: frozen.append(logs[FROZEN_COLUMN])
    )
    batch = (np.zeros((1, 32, 32, 3), np.uint8), np.ones((1, 32, 32), np.uint8))
    data = tf.data.Dataset.from_tensors(batch).repeat()
    loop.fit(model, strategy, data, epochs=1, initial_epoch=0, steps_per_epoch=1,
             callbacks=[phase, record], verbose=0)  # fmt: skip
    assert frozen == [0 if switched else recipe.frozen_blocks]
    assert model.get_layer("conv1_1").trainable == switched
