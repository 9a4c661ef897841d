"""Every private TensorFlow, Keras or albumentations internal that ``fcn`` touches, one hook each.

A hook says what private thing it touches, why no public API serves, and the versions it was
checked on ([`CHECKED_ON`][]). ``tests/test_compat.py`` has one test per hook that fails when
its internal disappears or changes behaviour: after an upgrade, run it first. A module that needs
one of these imports it from here (any floor may: this module imports no other ``fcn`` module).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

import numpy as np
import tensorflow as tf

CHECKED_ON = {"tensorflow": "2.21.0", "keras": "3.15.1", "albumentations": "2.0.8"}
"""The versions every hook below was checked on (``tests/test_compat.py`` passed)."""


def onednn_enabled() -> bool:
    """Whether this TensorFlow process runs oneDNN's CPU kernels (else Eigen's): TensorFlow's
    private ``tensorflow.python.util._pywrap_util_port.IsMklEnabled()``; no public API tells.
    Imported when asked, so that a TensorFlow without it fails here, not on ``import fcn``.

    Examples:
        >>> import os  # TF_ENABLE_ONEDNN_OPTS decides where set (CI runs both); else the CPU
        >>> setting = {"1": True, "0": False}.get(os.environ.get("TF_ENABLE_ONEDNN_OPTS", ""))
        >>> onednn_enabled() == setting if setting is not None else True
        True
    """
    from tensorflow.python.util import _pywrap_util_port

    return bool(_pywrap_util_port.IsMklEnabled())


def host_view(tensor: tf.Tensor) -> np.ndarray:
    """A NumPy array over an eager host tensor's own buffer, no copy: TensorFlow's private
    ``EagerTensor._numpy()`` (the public ``numpy()`` copies it). A read of a variable in host
    memory (``tf.raw_ops.ReadVariableOp``) gives a view of the variable's buffer itself, which
    [`fcn.initialize.write_slices`][] writes in place.

    Examples:
        >>> variable = tf.Variable([1.0, 2.0])
        >>> view = host_view(tf.raw_ops.ReadVariableOp(resource=variable.handle, dtype=tf.float32))
        >>> view[0] = 5.0
        >>> variable.numpy().tolist()
        [5.0, 2.0]
    """
    return tensor._numpy()


def close_iterator(iterator: tf.data.Iterator) -> None:
    """Drop a tf.data iterator's resource now, which stops its threads (the iterator is unusable
    afterwards): TensorFlow's private ``OwnedIterator._iterator_resource``; ``OwnedIterator``
    has no public close. An iterator without the attribute is left as it is.

    [`fcn.data.pipeline`][] closes every live iterator at exit: its decoders are Python
    (``tf.numpy_function``), and an iterator freed during interpreter finalisation, when
    tf.data's threads can no longer take the GIL, hangs the process or aborts it.

    Examples:
        >>> iterator = iter(tf.data.Dataset.range(3))
        >>> close_iterator(iterator)
        >>> "_iterator_resource" in vars(iterator)
        False
    """
    vars(iterator).pop("_iterator_resource", None)


TORCH_HELPERS = "albumentations.pytorch"
"""The module albumentations' ``__init__`` imports whenever PyTorch is installed."""


def import_albumentations() -> ModuleType:
    """``albumentations``, imported without its PyTorch helpers: its ``__init__`` imports
    [`TORCH_HELPERS`][] (and so PyTorch: +177 MiB RSS and +3 s measured on ``import fcn``)
    whenever torch is installed, and ignores an ImportError of it. A ``None`` entry in
    ``sys.modules`` makes that one import fail; it is removed afterwards, so that a later
    ``import albumentations.pytorch`` works as usual.

    Examples:
        >>> import_albumentations().__name__, TORCH_HELPERS in sys.modules
        ('albumentations', False)
    """
    blocked = TORCH_HELPERS not in sys.modules
    if blocked:
        sys.modules[TORCH_HELPERS] = None
    try:
        return importlib.import_module("albumentations")
    finally:
        if blocked and sys.modules.get(TORCH_HELPERS, False) is None:
            del sys.modules[TORCH_HELPERS]


class UpdateAllHook:
    """A Keras optimizer's step over all its variables, for a subclass to take over: the first
    base of the optimizer class, which defines ``update_all(grads, variables, learning_rate)``
    and may call ``keras_update_all`` (Keras' own: its all-reduce across replicas, then
    ``update_step`` per variable). Keras' ``BaseOptimizer.apply`` calls the private
    ``_backend_update_step`` for that step; no public method is called once per step with
    every gradient.

    Examples:
        >>> import keras
        >>> class Counting(UpdateAllHook, keras.optimizers.SGD):
        ...     steps = 0
        ...     def update_all(self, grads, variables, learning_rate):
        ...         self.steps += 1
        ...         self.keras_update_all(grads, variables, learning_rate)
        >>> optimizer, weight = Counting(learning_rate=0.5), keras.Variable([1.0])
        >>> optimizer.apply([tf.constant([1.0])], [weight])
        >>> optimizer.steps, weight.numpy().tolist()
        (1, [0.5])
    """

    def _backend_update_step(
        self, grads: Sequence, trainable_variables: Sequence, learning_rate
    ) -> None:
        self.update_all(grads, trainable_variables, learning_rate)

    def update_all(self, grads: Sequence, trainable_variables: Sequence, learning_rate) -> None:
        """The subclass's step over every variable (see the class)."""
        raise NotImplementedError

    def keras_update_all(
        self, grads: Sequence, trainable_variables: Sequence, learning_rate
    ) -> None:
        """Keras' own step over every variable (see the class)."""
        super()._backend_update_step(grads, trainable_variables, learning_rate)
