"""Shared test helpers: small models with non-trivial weights."""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

TINY = 1 / 16
"""Width multiplier of the topology-preserving test model (VGG body 4..32 channels, fc 256)."""


def randomize(model: keras.Model, seed: int = 0) -> keras.Model:
    """Give every weight of ``model`` random He-scaled values (score layers start at zero)."""
    rng = np.random.default_rng(seed)
    for weight in model.weights:
        shape = tuple(weight.shape)
        fan_in = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        weight.assign(rng.normal(0, np.sqrt(2 / fan_in), shape).astype(weight.dtype))
    return model


@pytest.fixture(scope="session")
def tiny_fcn8s() -> keras.Model:
    """A width-reduced FCN-8s with random non-zero weights (same graph and offsets as the paper)."""
    from fcn import build_model

    return randomize(build_model("fcn8s", weights=None, width=TINY), seed=1)
