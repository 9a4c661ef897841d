"""Two phases from a pretrained body: the head on frozen VGG blocks first, then every layer.

Phase 1 trains fc6, fc7 and the score layers while the convolutions of VGG blocks
1..``frozen_blocks`` keep their ImageNet values: no backward pass runs through them, so a step
costs a fraction of a full one, and on a CPU the head learns fastest this way. Phase 2 trains
every layer, as Caffe FCN, pytorch-fcn and torchvision's references do from the first step,
at the at-once FCN-8s's per-layer rates ([`fcn.training.optimizer.CaffeSGD`][]: each kernel at
the schedule's rate, each bias at twice it, the skip layers' multipliers), the VGG blocks at
the recipe's ``body_rate`` share of them (a tenth for ``practical``: at the whole rate the
trained head's result fell apart): the FCN paper reports that the classifier alone reaches
about 70% of full fine-tuning (Table 2: FCN-32s-fixed 45.4 against 59.4 mean IU).

The switch ([`head_phase_over`][]) comes once the head has trained on [`HEAD_MIN_IMAGES`][]
crops and either the validation mean IoU has stopped improving ([`PLATEAU_EVALUATIONS`][],
[`PLATEAU_GAIN`][]) or, whatever validation says, [`HEAD_SHARE`][] of the schedule is done.
The phase is recorded in every row of ``log.csv`` ([`FROZEN_COLUMN`][]), so a resumed run
continues in its phase. The reasons for the numbers: `docs/design.md#training-fcntraining`
("Two phases").
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import keras
import tensorflow as tf

from fcn.training.distribute import cluster_size, is_chief, sync_count
from fcn.training.optimizer import update_order
from fcn.training.rates import caffe_sgd

HEAD_MIN_IMAGES = 6000
"""Crops (or whole images) the head trains on before any switch: more than the default schedule
of the small job measured (118 VOC images, 50 passes of 2 crops of 320 a step: 5,900 crops),
which therefore trains the head alone. There, in bf16 on EPYCs with AVX512-BF16, the head alone
improved up to 4,800-5,900 crops (two seeds), and a second phase from 3,068 crops gained nothing
in the rest of the schedule at 2.3 times the cost per crop (one seed; `benchmarks/README.md`).
One epoch of train_aug is 10,582 crops; a demo or a smoke test never switches."""

PLATEAU_EVALUATIONS = 3
"""Evaluations in a row that must fail to better the best validation mean IoU before them by
[`PLATEAU_GAIN`][] for the head to count as converged."""

PLATEAU_GAIN = 0.005
"""Half a mean-IoU point: a gain below it counts as no gain."""

HEAD_SHARE = 0.5
"""The share of the schedule's batches after which every layer trains, whatever validation
says (and the switch of a run without validation): the second half trains every layer."""

FROZEN_COLUMN = "frozen_blocks"
"""The ``log.csv`` column (and ``state.json`` history key) of the VGG blocks an epoch kept
frozen: the recipe's ``frozen_blocks`` in the head phase, 0 after the switch."""


def head_phase_over(
    scores: Sequence[float], batches_done: int, total_batches: int, batch_size: int
) -> str | None:
    """Why the head phase is over, or None while it is not: after ``batches_done`` of the
    schedule's ``total_batches`` batches of ``batch_size`` images, ``scores`` being the
    validation mean IoU of each evaluation so far (oldest first; non-finite ones are skipped).

    Over once the head has seen [`HEAD_MIN_IMAGES`][] images and either the last
    [`PLATEAU_EVALUATIONS`][] scores have not bettered the best before them by
    [`PLATEAU_GAIN`][] or ``HEAD_SHARE`` of the batches are done.

    Examples:
        >>> head_phase_over([0.20, 0.25, 0.26], 4000, 10000, 2) is None  # improving
        True
        >>> head_phase_over([0.25, 0.30, 0.29, 0.30, 0.302], 4000, 10000, 2)
        'validation mean IoU at most 0.302 in 3 evaluations, not 0.005 above the best 0.300'
        >>> head_phase_over([], 5000, 10000, 2)
        '5,000 of 10,000 batches done (50% of the schedule)'
        >>> head_phase_over([0.3, 0.2, 0.2, 0.2], 2950, 2950, 2) is None  # 5,900: under the minimum
        True
    """
    if batches_done * batch_size < HEAD_MIN_IMAGES:
        return None
    finite = [score for score in scores if math.isfinite(score)]
    if len(finite) > PLATEAU_EVALUATIONS:
        before = max(finite[:-PLATEAU_EVALUATIONS])
        recent = max(finite[-PLATEAU_EVALUATIONS:])
        if recent < before + PLATEAU_GAIN:
            return (
                f"validation mean IoU at most {recent:.3f} in {PLATEAU_EVALUATIONS} evaluations, "
                f"not {PLATEAU_GAIN:g} above the best {before:.3f}"
            )
    if batches_done >= HEAD_SHARE * total_batches:
        share = f"{HEAD_SHARE:.0%} of the schedule"
        return f"{batches_done:,} of {total_batches:,} batches done ({share})"
    return None


def set_trainable(model: keras.Model, layers: Sequence[str], trainable: bool) -> None:
    """Make ``layers`` of ``model`` (compiled by [`fcn.training.train.compile_for_training`][])
    trainable or frozen, and its optimizer's update order follow
    ([`fcn.training.optimizer.update_order`][]). Made trainable, a layer must be one the
    optimizer was built over (``compile_for_training(..., unfreeze=True)`` builds it over every
    variable); [`fcn.training.loop.fit`][] traces a new step for the new set.

    Examples:
        >>> from fcn import build_model
        >>> from fcn.training.recipes import RECIPES
        >>> from fcn.training.train import compile_for_training
        >>> model = build_model("fcn8s", 3, weights=None, width=1 / 16)
        >>> model = compile_for_training(model, RECIPES["practical"], total_batches=10)
        >>> set_trainable(model, RECIPES["practical"].frozen_layers(), True)
        >>> model.get_layer("conv1_1").trainable, model.optimizer.update_after["fc6/kernel"][0]
        (True, 'conv5_3/kernel')
    """
    for name in layers:
        model.get_layer(name).trainable = trainable
    caffe_sgd(model).update_after = update_order(model)


class HeadPhase(keras.callbacks.Callback):
    """The switch from the head phase to every layer, at the start of the first epoch after
    [`head_phase_over`][] says so (said once, on the chief), and each epoch's frozen blocks in
    its logs ([`FROZEN_COLUMN`][]). Under several workers the chief's validation decides and
    every worker switches at the same epoch. List it after the evaluation and before the
    checkpoint.

    Args:
        strategy: the run's strategy.
        frozen_layers: the layers frozen in the head phase (``Recipe.frozen_layers``).
        frozen_blocks: how many VGG blocks they make up.
        total_batches: the schedule's batches, those of earlier runs of a resumed run included.
        batch_size: images per batch (the global batch).
        history: a resumed run's logs (``state.json``'s history): its scores and its phase.
        verbose: say the switch (on the chief) unless 0.

    Examples:
        >>> import numpy as np
        >>> from fcn import build_model
        >>> from fcn.training import loop
        >>> from fcn.training.recipes import RECIPES
        >>> from fcn.training.train import compile_for_training
        >>> model = build_model("fcn8s", 3, weights=None, width=1 / 16)
        >>> model = compile_for_training(model, RECIPES["practical"], total_batches=4)
        >>> batch = (np.zeros((1, 32, 32, 3), np.uint8), np.ones((1, 32, 32), np.uint8))
        >>> data = tf.data.Dataset.from_tensors(batch).repeat()
        >>> strategy = tf.distribute.get_strategy()
        >>> phase = HeadPhase(strategy, RECIPES["practical"].frozen_layers(), 5, total_batches=4,
        ...                   batch_size=HEAD_MIN_IMAGES // 2, verbose=0)  # images a batch
        >>> frozen = []  # each epoch's logs, as the checkpoint after it records them
        >>> record = keras.callbacks.LambdaCallback(
        ...     on_epoch_end=lambda epoch, logs: frozen.append(logs[FROZEN_COLUMN]))
        >>> _ = loop.fit(model, strategy, data, epochs=4, initial_epoch=0, steps_per_epoch=1,
        ...              callbacks=[phase, record], verbose=0)
        >>> frozen  # after HEAD_MIN_IMAGES images and half the batches: every layer
        [5, 5, 0, 0]
    """

    def __init__(
        self,
        strategy: tf.distribute.Strategy,
        frozen_layers: Sequence[str],
        frozen_blocks: int,
        total_batches: int,
        batch_size: int,
        history: Sequence[dict] = (),
        verbose: int | str = 1,
        monitor: str = "val_mean_iou",
    ):
        super().__init__()
        self.strategy = strategy
        self.frozen_layers = tuple(frozen_layers)
        self.total_batches, self.batch_size = total_batches, batch_size
        self.monitor, self.verbose = monitor, verbose
        self.scores = [float(row[monitor]) for row in history if row.get(monitor) is not None]
        recorded = [row[FROZEN_COLUMN] for row in history if FROZEN_COLUMN in row]
        self.frozen = int(recorded[-1]) if recorded else frozen_blocks
        """The VGG blocks frozen now."""

    def on_train_begin(self, logs: dict | None = None) -> None:
        if cluster_size() > 1:  # the chief's phase (a resumed run's: the chief read its log)
            self.frozen = sync_count(self.strategy, self.frozen)
        if not self.frozen:  # a resumed run past its switch
            set_trainable(self.model, self.frozen_layers, True)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        if not self.frozen:
            return
        reason = None
        if is_chief(self.strategy):
            iterations = int(caffe_sgd(self.model).iterations.numpy())  # the batches done
            reason = head_phase_over(self.scores, iterations, self.total_batches, self.batch_size)
        switch = reason is not None
        if cluster_size() > 1:  # the chief's decision on every worker
            switch = bool(sync_count(self.strategy, int(switch)))
        if not switch:
            return
        set_trainable(self.model, self.frozen_layers, True)
        if reason and self.verbose != 0:
            print(
                f"epoch {epoch + 1} on: every layer trains (VGG blocks 1-{self.frozen} no longer "
                f"frozen): {reason}",
                flush=True,
            )
        self.frozen = 0

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if logs is None:
            return
        logs[FROZEN_COLUMN] = self.frozen
        score = logs.get(self.monitor)
        if score is not None:
            self.scores.append(float(score))
