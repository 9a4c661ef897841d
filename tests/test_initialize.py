"""In-place, sliced kernel writes: every value written once, glorot's distribution, repeatable
builds, real initializers in the saved config, `.keras` files loaded in place (and refused with
the layer named), and `import fcn` without PyTorch."""

from __future__ import annotations

import math
import os
import subprocess
import sys
import zipfile

import h5py
import keras
import numpy as np
import pytest
from conftest import LAMBDA, TINY, randomize

import fcn.initialize
from fcn import build_model
from fcn.initialize import (
    Unwritten,
    glorot_limit,
    load_keras_in_place,
    row_blocks,
    write_glorot,
    write_slices,
)


@pytest.mark.parametrize("shape", [(3, 3, 5, 4), (1, 1, 9, 2), (2, 1, 1, 7)])
def test_blocks_write_every_value_exactly_once(shape, monkeypatch):
    monkeypatch.setattr(fcn.initialize, "SLICE_ELEMENTS", 7)  # blocks split rows and leads
    source = np.arange(math.prod(shape), dtype=np.float32).reshape(shape)
    variable = keras.Variable(np.full(shape, np.nan, np.float32))
    reads = []

    def read(block):
        index, first, end = block
        reads.append((end - first) * shape[-1])
        return source[index][first:end]

    write_slices(variable, read)
    np.testing.assert_array_equal(variable.numpy(), source)
    assert max(reads) <= max(7, shape[-1]) and sum(reads) == source.size
    assert len(list(row_blocks(shape))) == len(reads)


def test_a_block_of_the_wrong_shape_is_refused():
    variable = keras.Variable(np.zeros((1, 1, 4, 3), np.float32))
    with pytest.raises(ValueError, match=r"got values of shape \(4, 2\)"):
        write_slices(variable, lambda block: np.zeros((4, 2)))


def test_glorot_values_have_glorot_bounds_mean_and_variance():
    shape = (3, 3, 64, 96)
    variable = keras.Variable(np.full(shape, np.nan, np.float32))
    write_glorot(variable)
    values = variable.numpy().ravel()
    limit = math.sqrt(6 / (9 * 64 + 9 * 96))  # Keras' GlorotUniform for this shape
    assert glorot_limit(shape) == pytest.approx(limit, rel=1e-12)
    assert np.isfinite(values).all() and np.abs(values).max() <= limit
    # uniform(-l, l): mean 0 (sd l / sqrt(3n)), variance l^2 / 3 (sd of the sample variance
    # l^2 * sqrt(4 / 45n)); LAMBDA standard deviations either side
    n = values.size
    assert abs(values.mean()) < LAMBDA * limit / math.sqrt(3 * n)
    assert abs(values.var() - limit**2 / 3) < LAMBDA * limit**2 * math.sqrt(4 / (45 * n))


def test_builds_are_repeatable_and_name_the_real_initializer():
    keras.utils.set_random_seed(3)
    first = build_model("fcn8s", weights=None, width=TINY)
    keras.utils.set_random_seed(3)
    again = build_model("fcn8s", weights=None, width=TINY)
    keras.utils.set_random_seed(4)
    other = build_model("fcn8s", weights=None, width=TINY)
    for name in ("conv1_1", "conv5_3", "fc6", "fc7"):
        kernel = first.get_layer(name).kernel.numpy()
        np.testing.assert_array_equal(kernel, again.get_layer(name).kernel.numpy(), name)
        assert not np.array_equal(kernel, other.get_layer(name).kernel.numpy()), name
        assert np.abs(kernel).max() <= glorot_limit(kernel.shape), name
        config = first.get_layer(name).get_config()["kernel_initializer"]
        assert config["class_name"] == "GlorotUniform", name
    assert not any(
        isinstance(getattr(layer, "kernel_initializer", None), Unwritten) for layer in first.layers
    )


def test_import_fcn_does_not_import_torch(tmp_path):
    """albumentations imports its PyTorch helpers whenever torch is installed; a stand-in
    ``torch`` on the path records whether anything imports it."""
    marker = tmp_path / "torch-was-imported"
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nraise ImportError('stand-in torch')\n"
    )
    script = (
        "import fcn, os, sys\n"
        f"assert not os.path.exists({str(marker)!r}), 'import fcn imported torch'\n"
        "try:\n    import albumentations.pytorch\nexcept ImportError:\n    pass\n"
        f"assert os.path.exists({str(marker)!r}), 'albumentations.pytorch stayed blocked'\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "TF_CPP_MIN_LOG_LEVEL": "3"}
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=120)  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]


def test_keras_file_loads_in_place_exactly(tmp_path):
    model = randomize(build_model("fcn8s", weights=None, width=TINY), seed=5)
    path = tmp_path / "m.keras"
    model.save(path)
    loaded = load_keras_in_place(path)
    assert [w.path for w in loaded.weights] == [w.path for w in model.weights]
    for ours, theirs in zip(loaded.weights, model.weights):
        np.testing.assert_array_equal(ours.numpy(), theirs.numpy(), ours.path)
    assert loaded.get_layer("fc6").get_config()["kernel_initializer"]["class_name"] == (
        "GlorotUniform"
    )


def test_keras_file_without_a_layers_weights_is_refused(tmp_path):
    path = tmp_path / "m.keras"
    build_model("fcn8s", weights=None, width=TINY).save(path)
    broken = tmp_path / "broken.keras"
    with zipfile.ZipFile(path) as source, zipfile.ZipFile(broken, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "model.weights.h5":
                weights = tmp_path / "w.h5"
                weights.write_bytes(data)
                with h5py.File(weights, "a") as f:
                    fc6 = next(g for g in f["layers"].values() if g["vars"].attrs["name"] == "fc6")
                    del f[fc6.name]
                data = weights.read_bytes()
            target.writestr(item, data)
    with pytest.raises(ValueError, match="broken.keras: the weights of layer fc6 are missing"):
        load_keras_in_place(broken)
    text = tmp_path / "text.keras"
    text.write_text("not a model")
    with pytest.raises(ValueError, match="text.keras is not a .keras model file"):
        load_keras_in_place(text)
