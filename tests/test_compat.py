"""fcn._compat: each hook's private internal is still there and still does what fcn relies on.

One test per hook: after a TensorFlow, Keras or albumentations upgrade, a failure here names
the hook to fix (see ``fcn._compat.CHECKED_ON`` for the versions they were checked on).
"""

from __future__ import annotations

import os
import subprocess
import sys

import keras
import numpy as np
import pytest
import tensorflow as tf

from fcn import _compat


def _python(script: str, **env: str) -> subprocess.CompletedProcess:
    run = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **env},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    return run


def test_onednn_enabled_follows_tensorflows_kernel_switch():
    """The answer flips with ``TF_ENABLE_ONEDNN_OPTS`` (read by TensorFlow at start)."""
    here = _compat.onednn_enabled()
    assert isinstance(here, bool)
    if "TF_ENABLE_ONEDNN_OPTS" in os.environ:
        assert here == (os.environ["TF_ENABLE_ONEDNN_OPTS"] == "1")
    if sys.platform != "linux" or os.uname().machine != "x86_64":
        pytest.skip("TensorFlow builds oneDNN's CPU kernels in by default on Linux x86 only")
    other = _python(
        "from fcn._compat import onednn_enabled; print(onednn_enabled())",
        TF_ENABLE_ONEDNN_OPTS="0" if here else "1",
    )
    assert other.stdout.strip() == str(not here)


def test_host_view_is_the_variables_own_buffer():
    """Two reads of a host variable are views of one writable buffer, and a write through it is
    the variable's new value: what fcn.initialize.write_slices writes kernels through."""
    variable = tf.Variable(np.arange(6, dtype=np.float32).reshape(2, 3))

    def read() -> np.ndarray:
        return _compat.host_view(
            tf.raw_ops.ReadVariableOp(resource=variable.handle, dtype=variable.dtype)
        )

    first, second = read(), read()
    assert first.ctypes.data == second.ctypes.data and first.flags.writeable
    first[1, :] = -1.0
    np.testing.assert_array_equal(variable.numpy(), [[0, 1, 2], [-1, -1, -1]])
    assert variable.numpy().ctypes.data != first.ctypes.data  # numpy() copies: why the hook


def test_close_iterator_drops_the_resource_that_runs_the_iterator():
    iterator = iter(tf.data.Dataset.range(3))
    assert next(iterator) == 0
    assert "_iterator_resource" in vars(iterator)  # the private attribute is still there
    _compat.close_iterator(iterator)
    assert "_iterator_resource" not in vars(iterator)
    with pytest.raises(AttributeError, match="_iterator_resource"):  # unusable: nothing runs
        next(iterator)


def test_import_albumentations_keeps_torch_out_and_albumentations_pytorch_importable(tmp_path):
    """A stand-in ``torch`` on the path records whether anything imports it: albumentations'
    own import does (the behaviour the hook works around), the hook's does not, and a later
    ``import albumentations.pytorch`` still reaches it."""
    marker = tmp_path / "torch-was-imported"
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise ImportError('stand-in torch')\n"
    )
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": path, "NO_ALBUMENTATIONS_UPDATE": "1"}
    _python("import albumentations", **env)
    assert marker.exists(), "albumentations no longer imports its PyTorch helpers: drop the hook"
    marker.unlink()
    _python(
        "import os, sys\n"
        "from fcn._compat import TORCH_HELPERS, import_albumentations\n"
        "import_albumentations()\n"
        f"assert not os.path.exists({str(marker)!r}), 'torch was imported'\n"
        "assert TORCH_HELPERS not in sys.modules\n"
        "try:\n    import albumentations.pytorch\nexcept ImportError:\n    pass\n"
        f"assert os.path.exists({str(marker)!r}), 'albumentations.pytorch stayed blocked'\n",
        **env,
    )


def test_update_all_hook_takes_over_keras_step_over_every_variable():
    """Keras' ``apply`` calls the hook once per step with every gradient, and Keras' own step
    (``keras_update_all``) updates as plain SGD does."""

    class Recording(_compat.UpdateAllHook, keras.optimizers.SGD):
        def __init__(self, **kw):
            super().__init__(**kw)
            self.calls = []

        def update_all(self, grads, variables, learning_rate):
            self.calls.append([v.path for v in variables])
            self.keras_update_all(grads, variables, learning_rate)

    ours, plain = Recording(learning_rate=0.1, momentum=0.9), keras.optimizers.SGD(0.1, 0.9)
    pairs = [
        [keras.Variable(np.ones((2, 2), "float32"), name="k"), keras.Variable([1.0, 2.0], name="b")]
        for _ in range(2)
    ]
    grads = [tf.constant([[1.0, 2.0], [3.0, 4.0]]), tf.constant([0.5, -0.5])]
    for _ in range(2):
        ours.apply(grads, pairs[0])
        plain.apply(grads, pairs[1])
    assert ours.calls == [[v.path for v in pairs[0]]] * 2
    for got, expected in zip(*pairs):
        np.testing.assert_array_equal(got.numpy(), expected.numpy())
