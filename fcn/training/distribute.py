"""Training on several devices and machines: the strategy, the cluster, the chief, syncing.

[`choose_strategy`][] picks the strategy for what is visible; [`local_cluster`][] writes
``TF_CONFIG`` values for workers on one machine; [`is_chief`][], [`sync_from_chief`][],
[`sync_count`][], [`sync_text`][], [`count_workers`][], [`stop_together`][] and
[`check_same_files`][] are the collectives [`fcn.training.loop`][] and
[`fcn.training.train`][] build on (the roles and their reasons are in
[`fcn.training.loop`][]).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import socket
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import tensorflow as tf

from fcn.data.files import SegmentationFiles

SUM = tf.distribute.ReduceOp.SUM


def cluster_size(tf_config: str | None = None) -> int:
    """Workers (chief included) named by ``TF_CONFIG`` (default: the environment's); 1 without.

    Examples:
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
    by itself (Linux: from [`EPHEMERAL_PORTS`][], else the usual 32768): between this call and
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
    by itself (``_free_ports``): start each process with its own
    (``TF_CONFIG='...' fcn train ...``).

    Examples:
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

    Examples:
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

    Examples:
        >>> import keras
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


def _sum(strategy: tf.distribute.Strategy, values, chief_only: bool = False) -> np.ndarray:
    """The sum over all replicas of ``values`` (int64, any shape, the same on every worker), or
    the chief's alone (the others add zeros), on every worker."""

    def contribution():
        context = tf.distribute.get_replica_context()
        mine = tf.constant(values, tf.int64)
        if chief_only:
            first = tf.equal(context.replica_id_in_sync_group, 0)
            mine = tf.where(first, mine, tf.zeros_like(mine))
        return context.all_reduce(SUM, mine)

    return strategy.experimental_local_results(strategy.run(contribution))[0].numpy()


def sync_count(strategy: tf.distribute.Strategy, count: int) -> int:
    """The chief's ``count`` (the epochs or batches a resumed run has done) on every worker
    (the others pass anything).

    Examples:
        >>> sync_count(tf.distribute.get_strategy(), 3)
        3
    """
    return int(_sum(strategy, count, chief_only=True))


def sync_text(strategy: tf.distribute.Strategy, text: str) -> str:
    """The chief's ``text`` (a run's settings) on every worker (the others pass anything): its
    length, then its UTF-8 bytes, each summed with the other workers' zeros.

    Examples:
        >>> sync_text(tf.distribute.get_strategy(), '{"epochs": 3, "recipe": "päper"}')
        '{"epochs": 3, "recipe": "päper"}'
    """
    data = list(text.encode("utf-8", "backslashreplace"))  # a path's undecodable bytes too
    length = sync_count(strategy, len(data))
    if not length:  # the same on every worker: all skip the byte sum
        return ""
    mine = (data + [0] * length)[:length]
    return _sum(strategy, mine, chief_only=True).astype(np.uint8).tobytes().decode()


def count_workers(strategy: tf.distribute.Strategy, flag: bool) -> int:
    """How many workers pass a true ``flag`` (every worker calls it, each with its own), on
    every worker.

    Examples:
        >>> count_workers(tf.distribute.get_strategy(), True)
        1
    """
    replicas_per_worker = max(1, strategy.num_replicas_in_sync // cluster_size())
    return int(_sum(strategy, int(flag))) // replicas_per_worker


@contextlib.contextmanager
def stop_together(strategy: tf.distribute.Strategy) -> Iterator[None]:
    """Steps that may fail on one worker (the chief's reading, writing or loading of its
    files), with no collective inside: under several workers, every worker then learns whether
    one of them raised there, and all stop. The worker that raised raises its own error again;
    the others raise ValueError saying how many stopped and quoting the chief's error. On one
    worker an error goes up unchanged. Without it, the others would wait in their next
    collective until the coordination service reports the lost task.

    Examples:
        >>> with stop_together(tf.distribute.get_strategy()):
        ...     _ = open("/no/such/state.json")
        Traceback (most recent call last):
        ...
        FileNotFoundError: [Errno 2] No such file or directory: '/no/such/state.json'
    """
    if cluster_size() <= 1:
        yield
        return
    error = None
    try:
        yield
    except Exception as raised:  # noqa: BLE001 (every kind: the other workers must hear of it)
        error = raised
    failed = count_workers(strategy, error is not None)
    chiefs = sync_text(strategy, "" if error is None else f"{type(error).__name__}: {error}")
    if error is not None:
        raise error
    if failed:
        raise ValueError(
            f"{failed} of {cluster_size()} workers stopped"
            + (f" (the chief: {chiefs})" if chiefs else "")
            + ": see their errors; nothing was trained"
        )


def fingerprint(names: Iterable[str]) -> int:
    """A 63-bit fingerprint (BLAKE2b) of ``names`` in their order: the same on every machine
    for the same names.

    Examples:
        >>> fingerprint(["a.jpg", "b.jpg"]) == fingerprint(["a.jpg", "b.jpg"])
        True
        >>> fingerprint(["a.jpg", "b.jpg"]) == fingerprint(["b.jpg", "a.jpg"])
        False
    """
    digest = hashlib.blake2b(digest_size=8)
    for name in names:
        digest.update(os.fsencode(name) + b"\0")  # NUL, in no file name, ends each one
    return int.from_bytes(digest.digest(), "big") >> 1


def check_same_files(strategy: tf.distribute.Strategy, files: SegmentationFiles) -> None:
    """Raise ValueError on every worker unless each was given the chief's training pairs in
    the chief's order. Each worker reads every ``workers``-th pair of its own list
    ([`fcn.training.train.input_fn`][]) and counts its steps from the list's length: lists
    that differ would skip or repeat pairs without a word, or stop the workers at different
    steps. Pairs are compared by file name (the folder may differ between machines).

    Examples:
        >>> from fcn.data import sample_voc_root, voc_pairs
        >>> check_same_files(tf.distribute.get_strategy(), voc_pairs(sample_voc_root(), "val"))
    """
    mine = fingerprint(os.path.basename(p) for p in (*files.images, *files.labels))
    chief_pairs, chief_print = sync_count(strategy, len(files)), sync_count(strategy, mine)
    other = count_workers(strategy, len(files) != chief_pairs or mine != chief_print)
    if other:
        raise ValueError(
            f"train_files differ between the workers: {other} of "
            f"{cluster_size()} hold other pairs or another order than the chief's "
            f"{chief_pairs} (this one: {len(files)} pairs, "
            f"{'the same' if mine == chief_print else 'other'} names and order): give every "
            "worker the same list (the same split files and dataset); nothing was trained"
        )


def choose_strategy() -> tf.distribute.Strategy:
    """The strategy for what is visible: ``MultiWorkerMirroredStrategy`` when ``TF_CONFIG``
    names several workers (trained by [`fcn.training.loop`][]'s loop), else
    ``MirroredStrategy`` over all GPUs when there are several, else the default single-device
    strategy. A multi-worker strategy must be made before TensorFlow runs anything else in the
    process (``fcn.train`` and ``fcn train`` do).

    Examples:
        >>> choose_strategy().num_replicas_in_sync  # one CPU, no TF_CONFIG
        1
    """
    if cluster_size() > 1:
        return tf.distribute.MultiWorkerMirroredStrategy()
    if len(tf.config.list_logical_devices("GPU")) > 1:
        return tf.distribute.MirroredStrategy()
    return tf.distribute.get_strategy()
