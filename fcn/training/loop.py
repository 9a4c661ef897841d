"""The training loop of [`fcn.train`][]: one device, several GPUs or several machines.

Keras 3's ``fit`` fails under ``MultiWorkerMirroredStrategy`` (keras-team/keras#20585: its
first-batch build and its per-step log reduction). This loop is TensorFlow's documented
custom-loop pattern instead: one ``tf.function`` step runs the model, the loss and the
optimizer on every replica with ``strategy.run`` and reduces the loss with ``strategy.reduce``.
Epochs, logs and stopping drive the same Keras callbacks ``fit`` would
([`RunCheckpoint`][fcn.training.checkpoint.RunCheckpoint], its NaN guard, the evaluation,
TensorBoard, the progress bar). On one process it is as fast as ``fit`` (the figure:
`docs/design.md#training-fcntraining`), so [`fcn.train`][] uses it everywhere: one code path,
which the whole suite exercises. Under several workers:

- **Roles.** The chief (task ``chief``, else ``worker`` 0) writes the run directory
  (checkpoints, ``state.json``, ``log.csv``, TensorBoard), evaluates and shows the progress
  bar; the other workers train their shard and write nothing.
- **Validation on the chief alone**, with the streaming evaluator: it needs no collective, so a
  worker can never wait on an evaluation that another worker skipped, and its figures are
  those of a one-machine run. The other workers wait in the next step's all-reduce meanwhile
  (an FCN's validation takes minutes; the collectives have no timeout).
- **Loss over labelled pixels of the global batch.** Each replica sums its per-pixel loss and
  divides by the labelled pixels of all replicas (one scalar all-reduce), and the optimizer sums
  the replicas' gradients: the step equals one device's on the same global batch (tested).
- **Same start everywhere.** Every worker takes the chief's settings (a resumed run's
  included; a setting given to a worker that differs from the chief's is refused by all, and
  so is a start the chief refuses) and checks that it was given the chief's training files.
  Only the chief builds from the weights file or reads the checkpoint of a resumed run; the
  others build the same architecture at random, and
  [`sync_from_chief`][fcn.training.distribute.sync_from_chief] then gives every worker the chief's
  weights, optimizer state and epoch. So only the chief needs the run directory and the weights
  file.
- **Stopping.** Every worker sees the same reduced loss and the same weights, so the NaN guard
  stops all of them at the same step; the chief restores its last good checkpoint.
- **Resume after any worker dies.** The collectives have no timeout, so the survivors hang:
  stop them and start every worker again with ``resume=True`` (``fcn train ... --resume``).
  The chief continues from its last completed epoch.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import keras
import numpy as np
import tensorflow as tf

from fcn.classes import IGNORE_LABEL
from fcn.training.distribute import SUM, is_chief
from fcn.training.loss import segmentation_loss


@contextlib.contextmanager
def trained_tape(variables: Sequence[keras.Variable]) -> Iterator[tf.GradientTape]:
    """A gradient tape that records only what depends on ``variables`` (the trained ones).

    TensorFlow's default tape watches every trainable TensorFlow variable the forward pass
    reads, and a frozen Keras layer's (``layer.trainable = False``) stays trainable to
    TensorFlow: the backward pass would then run through every frozen VGG block, its results
    unused (under Eigen not pruned: a 224x224 step of batch 8 took 26 s instead of 8.5).

    Examples:
        >>> layer = keras.layers.Dense(1)
        >>> _ = layer(np.ones((1, 2), "float32"))
        >>> with trained_tape(layer.trainable_variables[:1]) as tape:
        ...     y = layer(np.ones((1, 2), "float32"))
        >>> [g is None for g in tape.gradient(y, layer.trainable_variables)]
        [False, True]
    """
    with tf.GradientTape(watch_accessed_variables=False) as tape:
        tape.watch([variable.value for variable in variables])
        yield tape


def train_step(model: keras.Model, strategy: tf.distribute.Strategy):
    """The compiled step: ``step(iterator) -> float32`` global mean loss over the labelled
    pixels of the global batch, after one optimizer update (or accumulation) on every replica.

    Examples:
        >>> from fcn import build_model
        >>> from fcn.training.recipes import RECIPES
        >>> from fcn.training.train import compile_for_training
        >>> model = build_model("fcn8s", 3, weights=None, width=1 / 16)
        >>> _ = compile_for_training(model, RECIPES["practical"], total_batches=10)
        >>> batch = (np.zeros((1, 32, 32, 3), np.uint8), np.ones((1, 32, 32), np.uint8))
        >>> data = tf.data.Dataset.from_tensors(batch).repeat()
        >>> step = train_step(model, tf.distribute.get_strategy())
        >>> loss = float(step(iter(data)))  # log(3) from the zero score layers
        >>> round(loss, 4), int(model.optimizer.iterations)
        (1.0986, 1)
    """
    summed = segmentation_loss(reduction="sum")
    optimizer = model.optimizer

    def replica_step(images, labels):
        context = tf.distribute.get_replica_context()
        labelled = tf.reduce_sum(tf.cast(tf.not_equal(labels, IGNORE_LABEL), tf.float32))
        total = tf.maximum(context.all_reduce(SUM, labelled), 1.0)
        variables = model.trainable_variables
        with trained_tape(variables) as tape:
            logits = model(images, training=True)
            loss = summed(labels, logits) / total
            scaled = optimizer.scale_loss(loss)
        optimizer.apply(tape.gradient(scaled, variables), variables)
        return loss

    @tf.function
    def step(iterator):
        images, labels = next(iterator)
        return strategy.reduce(SUM, strategy.run(replica_step, args=(images, labels)), axis=None)

    return step


def fit(
    model: keras.Model,
    strategy: tf.distribute.Strategy,
    dataset,
    *,
    epochs: int,
    initial_epoch: int,
    steps_per_epoch: int,
    callbacks: Sequence[keras.callbacks.Callback],
    verbose: int | str = "auto",
) -> list[dict]:
    """Train ``model`` (compiled, in ``strategy``'s scope) like ``model.fit`` on a distributed
    ``dataset`` of (images, labels), driving ``callbacks`` as ``fit`` does: epochs from
    ``initial_epoch`` to ``epochs`` of ``steps_per_epoch`` steps, ``loss`` (the epoch's mean so
    far) in the logs, stopping when a callback sets ``model.stop_training``; a callback that
    changes which variables train at an epoch's start gets a step traced for them
    ([`fcn.training.phases.HeadPhase`][]). The chief also
    gets a progress bar (``verbose``: 0 none, 1 bar, 2 a line per epoch, "auto" = 1).

    Returns:
        The logs of each completed epoch.

    Examples:
        >>> model = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(3, 1)])
        >>> model.compile(keras.optimizers.SGD(0.1), segmentation_loss())  # any Keras model
        >>> pixels, labels = np.ones((2, 8, 8, 3), "float32"), np.zeros((2, 8, 8), "uint8")
        >>> data = tf.data.Dataset.from_tensors((pixels, labels)).repeat()
        >>> logs = fit(model, tf.distribute.get_strategy(), data, epochs=2, initial_epoch=0,
        ...            steps_per_epoch=3, callbacks=[], verbose=0)
        >>> len(logs), sorted(logs[0]), int(model.optimizer.iterations)
        (2, ['loss'], 6)
    """
    verbose = 1 if verbose == "auto" else verbose
    step, traced = None, None
    iterator = iter(dataset)
    callback_list = keras.callbacks.CallbackList(
        list(callbacks), add_progbar=bool(verbose) and is_chief(strategy), model=model,
        verbose=verbose, epochs=epochs, steps=steps_per_epoch,
    )  # fmt: skip
    model.stop_training = False
    history: list[dict] = []
    logs: dict = {}
    callback_list.on_train_begin()
    for epoch in range(initial_epoch, epochs):
        callback_list.on_epoch_begin(epoch)
        trained = [variable.path for variable in model.trainable_variables]
        if trained != traced:  # the first epoch, or a callback changed what trains
            step, traced = train_step(model, strategy), trained
        losses = []
        for batch in range(steps_per_epoch):
            callback_list.on_train_batch_begin(batch)
            losses.append(float(step(iterator)))
            logs = {"loss": float(np.mean(losses))}
            callback_list.on_train_batch_end(batch, logs)
            if model.stop_training:
                break
        callback_list.on_epoch_end(epoch, logs)
        if model.stop_training:
            break
        history.append(dict(logs))
    callback_list.on_train_end(logs)
    return history
