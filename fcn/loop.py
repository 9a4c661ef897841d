"""The training loop of :func:`fcn.train`: one device, several GPUs or several machines.

Keras 3's ``fit`` fails under ``MultiWorkerMirroredStrategy`` (keras-team/keras#20585: its
first-batch build and its per-step log reduction). This loop is TensorFlow's documented
custom-loop pattern instead: one ``tf.function`` step runs the model, the loss and the
optimizer on every replica with ``strategy.run`` and reduces the loss with ``strategy.reduce``.
Epochs, logs and stopping drive the same Keras callbacks ``fit`` would
(:class:`~fcn.checkpoint.RunCheckpoint`, its NaN guard, the evaluation, TensorBoard, the
progress bar). On one process it is as fast as ``fit`` (``benchmarks/multi_worker.py``: 3.12
against 3.19 images/s, the rounds 2% apart), so :func:`fcn.train` uses it everywhere: one
code path, which the whole suite exercises. Under several workers:

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
- **Same start everywhere.** Only the chief builds from the weights file or reads the
  checkpoint of a resumed run; the others build the same architecture at random, and
  :func:`sync_from_chief` then gives every worker the chief's weights, optimizer state and
  epoch. So only the chief needs the run directory and the weights file.
- **Stopping.** Every worker sees the same reduced loss and the same weights, so the NaN guard
  stops all of them at the same step; the chief restores its last good checkpoint.
- **Resume after any worker dies.** The collectives have no timeout, so the survivors hang:
  stop them and start every worker again with ``resume=True`` (``fcn train ... --resume``).
  The chief continues from its last completed epoch.
"""

from __future__ import annotations

import json
import os
import random
import socket
from collections.abc import Sequence
from pathlib import Path

import keras
import numpy as np
import tensorflow as tf

from fcn.classes import IGNORE_LABEL
from fcn.recipes import segmentation_loss

SUM = tf.distribute.ReduceOp.SUM


def cluster_size(tf_config: str | None = None) -> int:
    """Workers (chief included) named by ``TF_CONFIG`` (default: the environment's); 1 without.

    Example:
        >>> cluster_size('{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker"}}')
        2
        >>> cluster_size("")
        1
    """
    text = os.environ.get("TF_CONFIG", "") if tf_config is None else tf_config
    cluster = json.loads(text or "{}").get("cluster", {})
    return max(1, len(cluster.get("worker", [])) + len(cluster.get("chief", [])))


EPHEMERAL_PORTS = Path("/proc/sys/net/ipv4/ip_local_port_range")
"""Where Linux says which ports it hands out by itself (to ``bind(port 0)`` and to the source
side of outgoing connections)."""


def _free_ports(count: int) -> list[int]:
    """``count`` different ports of 127.0.0.1, free now and below the range the system hands out
    by itself (Linux: from :data:`EPHEMERAL_PORTS`, else the usual 32768): between this call and
    the workers' start, no connection and no ``bind(port 0)`` of another process can be given
    one; only a process naming the port could take it. Drawn at random (not from Python's
    seeded ``random``), so simultaneous callers rarely try the same."""
    try:
        first_ephemeral = int(EPHEMERAL_PORTS.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        first_ephemeral = 32768
    low = max(1024, first_ephemeral - 12288)
    draw = random.SystemRandom()
    sockets = []
    try:
        while len(sockets) < count:
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", draw.randrange(low, first_ephemeral)))
            except OSError:  # in use: draw another
                s.close()
                continue
            sockets.append(s)  # held until all are drawn, so they differ
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def local_cluster(workers: int) -> list[str]:
    """``TF_CONFIG`` values for ``workers`` processes on this machine, one per worker (worker 0
    the chief), on ports of 127.0.0.1 that are free now and that the system does not hand out
    by itself (:func:`_free_ports`): start each process with its own
    (``TF_CONFIG='...' fcn train ...``).

    Example:
        >>> configs = [json.loads(c) for c in local_cluster(2)]
        >>> [c["task"] for c in configs], len(configs[0]["cluster"]["worker"])
        ([{'type': 'worker', 'index': 0}, {'type': 'worker', 'index': 1}], 2)
    """
    addresses = [f"127.0.0.1:{port}" for port in _free_ports(workers)]
    return [
        json.dumps({"cluster": {"worker": addresses}, "task": {"type": "worker", "index": i}})
        for i in range(workers)
    ]


def is_chief(strategy: tf.distribute.Strategy) -> bool:
    """Whether this process is the chief: task ``chief``, or ``worker`` 0 of a cluster without
    one; always True outside a multi-worker cluster.

    Example:
        >>> is_chief(tf.distribute.get_strategy())
        True
    """
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.task_type:
        return True
    if resolver.task_type == "chief":
        return True
    has_chief = "chief" in resolver.cluster_spec().as_dict()
    return resolver.task_type == "worker" and resolver.task_id == 0 and not has_chief


def sync_from_chief(strategy: tf.distribute.Strategy, variables: Sequence) -> None:
    """Give every replica the chief's value of each variable (replica 0 of the group is the
    chief's first device): a collective sum of the chief's value and zeros, one variable after
    the other, so the temporaries are the size of one variable.

    Example:
        >>> v = keras.Variable([1.0, 2.0])
        >>> sync_from_chief(tf.distribute.get_strategy(), [v])
        >>> v.numpy().tolist()
        [1.0, 2.0]
    """

    def chief_value(variable):
        context = tf.distribute.get_replica_context()
        value = tf.convert_to_tensor(variable.value)
        first = tf.equal(context.replica_id_in_sync_group, 0)
        return context.all_reduce(SUM, tf.where(first, value, tf.zeros_like(value)))

    @tf.function
    def sync():
        done = []
        for variable in variables:
            with tf.control_dependencies(done):
                synced = strategy.run(chief_value, args=(variable,))
                done = [variable.assign(strategy.experimental_local_results(synced)[0])]

    sync()


def sync_count(strategy: tf.distribute.Strategy, count: int) -> int:
    """The chief's ``count`` (the epochs or batches a resumed run has done) on every worker
    (the others pass anything).

    Example:
        >>> sync_count(tf.distribute.get_strategy(), 3)
        3
    """

    def chief_count():
        context = tf.distribute.get_replica_context()
        first = tf.equal(context.replica_id_in_sync_group, 0)
        return context.all_reduce(SUM, tf.where(first, tf.constant(count, tf.int64), 0))

    return int(strategy.experimental_local_results(strategy.run(chief_count))[0])


def train_step(model: keras.Model, strategy: tf.distribute.Strategy):
    """The compiled step: ``step(iterator) -> float32`` global mean loss over the labelled
    pixels of the global batch, after one optimizer update (or accumulation) on every replica.

    Example:
        >>> from fcn import build_model
        >>> from fcn.recipes import RECIPES
        >>> from fcn.train import compile_for_training
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
        with tf.GradientTape() as tape:
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
    far) in the logs, stopping when a callback sets ``model.stop_training``. The chief also
    gets a progress bar (``verbose``: 0 none, 1 bar, 2 a line per epoch, "auto" = 1).

    Returns:
        The logs of each completed epoch.

    Example:
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
    step = train_step(model, strategy)
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
