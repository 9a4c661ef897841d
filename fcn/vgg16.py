"""VGG16 ImageNet initialisation: Keras' weights file transplanted into the FCN layers.

conv1_1..conv5_3 are copied as they are; ``fc1`` (25088 x 4096) is reshaped into ``fc6``
(7 x 7 x 512 x 4096) and ``fc2`` into ``fc7`` (1 x 1 x 4096 x 4096), exactly the "net surgery"
of the FCN paper; ``predictions`` (fc8) is dropped.
"""

from __future__ import annotations

import os
import warnings

import h5py
import keras

from fcn.initialize import dataset_reader, h5_layer_weights, kernel_fits, write_slices
from fcn.layout import FC_LAYERS, VGG_BLOCKS, conv_name

WEIGHTS_FILE = "vgg16_weights_tf_dim_ordering_tf_kernels.h5"
WEIGHTS_URL = "https://storage.googleapis.com/tensorflow/keras-applications/vgg16/" + WEIGHTS_FILE
WEIGHTS_MD5 = "64373286793e3c8b2b4e3219cbf3544b"
"""Keras' own hash of the file with the top (``keras.applications.vgg16``); 553 MB."""

class WeightsUnavailableError(RuntimeError):
    """The VGG16 ImageNet file is not in Keras' cache and could not be downloaded.

    Raised by [`imagenet_weights_path`][] (and so by ``fcn.build_model(weights="imagenet")``)
    with a message that names the file, the cache and the way out.

    Examples:
        >>> issubclass(WeightsUnavailableError, RuntimeError)
        True
    """


def imagenet_weights_path() -> str:
    """Path of Keras' VGG16 ImageNet file (with top), downloaded once into Keras' cache.

    The cache is ``$KERAS_HOME/models`` (default ``~/.keras/models``), read at call time; a
    cached file whose md5 differs from [`WEIGHTS_MD5`][] is fetched again, never used.

    Raises:
        WeightsUnavailableError: the file is not cached and cannot be fetched or stored.

    Examples:
        >>> import tempfile, unittest.mock
        >>> home = tempfile.mkdtemp()  # its "models" a file: no cache, fails before downloading
        >>> open(os.path.join(home, "models"), "w").close()
        >>> with unittest.mock.patch.dict(os.environ, KERAS_HOME=home):
        ...     imagenet_weights_path()
        Traceback (most recent call last):
        fcn.vgg16.WeightsUnavailableError: VGG16 ImageNet weights are not available: ...
    """
    keras_home = os.environ.get("KERAS_HOME", os.path.expanduser("~/.keras"))
    cache = os.path.join(keras_home, "models")
    try:
        return keras.utils.get_file(
            WEIGHTS_FILE, WEIGHTS_URL, cache_dir=keras_home, cache_subdir="models",
            file_hash=WEIGHTS_MD5,
        )  # fmt: skip
    except Exception as err:  # urllib, ssl, hash or permission errors all mean the same here
        raise WeightsUnavailableError(
            f"VGG16 ImageNet weights are not available: {WEIGHTS_FILE} is not in {cache} and "
            f"downloading it from {WEIGHTS_URL} failed ({type(err).__name__}: {err}). "
            f"Fetch that file (md5 {WEIGHTS_MD5}) and pass weights='/path/to/{WEIGHTS_FILE}' "
            "(a 'notop' file works too), or copy it into that cache folder."
        ) from err


def vgg16_to_fcn_names() -> dict[str, str]:
    """Keras VGG16 layer name -> FCN (Caffe) layer name.

    Examples:
        >>> names = vgg16_to_fcn_names()
        >>> names["block4_conv2"], names["fc1"], len(names)
        ('conv4_2', 'fc6', 15)
    """
    names = {
        f"block{b}_conv{i}": conv_name(b, i)
        for b, (convs, _) in enumerate(VGG_BLOCKS, 1)
        for i in range(1, convs + 1)
    }
    return {**names, "fc1": FC_LAYERS[0], "fc2": FC_LAYERS[1]}


def load_vgg16_weights(model: keras.Model, path: str) -> set[str]:
    """Copy the VGG16 weights in ``path`` into the FCN ``model`` (in place), slice by slice
    from the file ([`fcn.initialize.write_slices`][]: the file is never read whole).

    Returns:
        The names of the FCN layers written (conv1_1..conv5_3, and fc6/fc7 for a full file).

    Raises:
        FileNotFoundError: no file at ``path``.
        ValueError: not a Keras VGG16 weights file; the message names the first missing layer
            or wrong shape.

    Examples:
        >>> import fcn, tempfile
        >>> model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
        >>> path = tempfile.mkdtemp() + "/vgg16.h5"
        >>> with h5py.File(path, "w") as f:  # Keras' VGG16 layout, this small model's shapes
        ...     for vgg, ours in vgg16_to_fcn_names().items():
        ...         f[vgg + "/kernel"], f[vgg + "/bias"] = model.get_layer(ours).get_weights()
        ...         f[vgg].attrs["weight_names"] = ["kernel", "bias"]
        ...     f.attrs["layer_names"] = list(vgg16_to_fcn_names())
        >>> written = load_vgg16_weights(model, path)
        >>> len(written), sorted(written)[:2], "fc6" in written
        (15, ['conv1_1', 'conv1_2'], True)
    """
    if not os.path.exists(path):
        raise FileNotFoundError(f"VGG16 weights file not found: {path}")
    try:
        f = h5py.File(path, "r")
    except OSError as err:
        raise ValueError(f"{path} is not a Keras VGG16 weights file (not HDF5: {err})") from err
    with f:
        datasets = h5_layer_weights(f)
        has_top = "fc1" in datasets and "fc2" in datasets
        pairs = [(v, n) for v, n in vgg16_to_fcn_names().items() if has_top or n not in FC_LAYERS]
        for vgg_name, fcn_name in pairs:  # check everything before writing anything
            target = model.get_layer(fcn_name)
            if vgg_name not in datasets:
                raise ValueError(f"{path} is not a Keras VGG16 weights file: no layer {vgg_name}")
            kernel, bias = datasets[vgg_name][:2]
            if not kernel_fits(kernel.shape, tuple(target.kernel.shape)) or bias.shape != tuple(
                target.bias.shape
            ):
                raise ValueError(
                    f"{path} is not a Keras VGG16 weights file for this model: {vgg_name} holds "
                    f"{kernel.shape} + {bias.shape}, {fcn_name} needs "
                    f"{tuple(target.kernel.shape)} + {tuple(target.bias.shape)}"
                )
        for vgg_name, fcn_name in pairs:
            target = model.get_layer(fcn_name)
            kernel, bias = datasets[vgg_name][:2]
            write_slices(target.kernel, dataset_reader(kernel, tuple(target.kernel.shape)))
            target.bias.assign(bias[()])
    if not has_top:
        warnings.warn(
            f"{path} has no fully connected layers ('notop' file): fc6 and fc7 keep a fresh "
            "random initialisation, which trains far worse than the full VGG16 file.",
            stacklevel=3,
        )
    return {fcn_name for _, fcn_name in pairs}
