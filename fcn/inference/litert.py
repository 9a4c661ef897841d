"""A LiteRT file run back by ``fcn``: [`fcn.predict`][] and [`fcn.evaluate`][] take a ``.tflite``
FCN (float32 or int8, written by [`fcn.export_model`][]) as they take a Keras model, so the
accuracy of what is deployed is measured with the package's own evaluator.

A LiteRT FCN takes one (1, H, W, 3) uint8 image of its export size: [`LiteRTModel`][] runs an
image of any size in the windows of [`fcn.inference.tiling.plan_windows`][] (the margin rule
of [`fcn.inference.tiling.predict_tiled`][]), each filled to the size by
[`fcn.inference.tiling.pad_window`][]. The interpreter is LiteRT's own (``ai-edge-litert``, an
optional dependency: ``pip install 'fcn-keras[litert]'``), with XNNPACK on a CPU, as a phone
or an edge box runs the file.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from fcn.inference.tiling import DEFAULT_MARGIN, pad_window, plan_windows
from fcn.layers import label_dtype
from fcn.options import OUTPUTS, Output

SUFFIX = ".tflite"
"""What the name of a LiteRT file ends in."""


def is_litert_file(model: object) -> bool:
    """Whether ``model`` names a LiteRT file (a path ending in [`SUFFIX`][]).

    Examples:
        >>> is_litert_file("fcn8s_int8.tflite"), is_litert_file("best.keras")
        (True, False)
    """
    return isinstance(model, (str, os.PathLike)) and Path(model).suffix == SUFFIX


class LiteRTModel:
    """A ``.tflite`` FCN of [`fcn.export_model`][]: uint8 (1, H, W, 3) -> its one output,
    labels (1, H, W) or logits (1, H, W, C), named ``labels`` or ``logits``.

    Args:
        path: the ``.tflite`` file.
        threads: the interpreter's threads; default: the machine's CPUs (``os.cpu_count()``).

    Attributes:
        path: the file.
        size: its input's (H, W), pixels.
        output: ``"labels"`` or ``"logits"``, what the file returns.
        num_classes: C, the classes it scores.

    Examples:
        >>> import fcn, tempfile
        >>> path = fcn.export_model(fcn.build_model("fcn8s", weights=None, width=1 / 16),
        ...                         tempfile.mkdtemp() + "/tiny.tflite", "litert", size=(64, 64))
        >>> model = LiteRTModel(path)
        >>> model.size, model.output, model.num_classes
        ((64, 64), 'labels', 21)
        >>> [(region, labels.shape) for region, labels in model.predict_tiled(
        ...     np.zeros((50, 70, 3), np.uint8), margin=0)][0][1]
        (50, 64)
    """

    def __init__(self, path: str | os.PathLike, threads: int | None = None):
        try:
            from ai_edge_litert.interpreter import Interpreter
        except ImportError as err:  # an optional dependency: the message says how to get it
            raise RuntimeError(
                f"{path}: running a LiteRT file needs LiteRT's interpreter: "
                "pip install 'fcn-keras[litert]'"
            ) from err
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"{self.path}: LiteRT file not found")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be at least 1, got {threads}")
        threads = threads or os.cpu_count() or 1  # as TensorFlow's own thread pools
        self._interpreter = Interpreter(model_path=str(self.path), num_threads=threads)
        inputs = self._interpreter.get_input_details()
        outputs = self._interpreter.get_output_details()
        self._runner = self._interpreter.get_signature_runner()
        names = list(self._runner.get_output_details())
        shapes = [tuple(i["shape"]) for i in inputs]
        if (len(inputs) != 1 or len(shapes[0]) != 4 or shapes[0][0] != 1 or shapes[0][3] != 3
                or inputs[0]["dtype"] != np.uint8 or len(names) != 1):  # fmt: skip
            raise ValueError(
                f"{self.path} is not an FCN of fcn.export_model (one uint8 (1, H, W, 3) input, "
                f"one output): it takes {shapes} and returns {names}"
            )
        (image,) = inputs
        if names[0] not in OUTPUTS:
            raise ValueError(f"{self.path}: its output {names[0]!r} is none of {OUTPUTS}")
        self.size = (int(image["shape"][1]), int(image["shape"][2]))
        self.output: Output = names[0]
        self.num_classes = (
            int(outputs[0]["shape"][-1]) if self.output == "logits" else self._argmax_classes()
        )

    def _argmax_classes(self) -> int:
        """C of a labels file: the last axis of what its ARG_MAX reads."""
        for op in self._interpreter._get_ops_details():  # LiteRT's only op listing
            if op["op_name"] == "ARG_MAX":
                return int(self._interpreter._get_tensor_details(op["inputs"][0], 0)["shape"][-1])
        raise ValueError(f"{self.path}: a labels output without an ARG_MAX: not an fcn export")

    def __call__(self, image: np.ndarray) -> np.ndarray:
        """The file's output for one (1, H, W, 3) uint8 image of its size."""
        return self._runner(image=image)[self.output]

    def predict_tiled(
        self, image: np.ndarray, margin: int = DEFAULT_MARGIN, output: Output = "labels"
    ) -> Iterator[tuple[tuple[slice, slice], np.ndarray]]:
        """Run the file on one (H, W, 3) uint8 image of any size, window by window, and yield
        ``(region, output)`` per window as [`fcn.inference.tiling.predict_tiled`][] does:
        ``"labels"`` (h, w) (argmax of the logits of a logits file) or ``"logits"`` (h, w, C)
        float32 (a logits file only)."""
        if output == "logits" and self.output != "logits":
            raise ValueError(
                f"{self.path} returns labels, not the logits asked for: export it with "
                "output='logits' (--output logits) to get scores or probabilities"
            )
        for tile in plan_windows(image.shape[0], image.shape[1], self.size, margin):
            window = image[tile.source[0], tile.source[1]]
            result = self(pad_window(window, self.size))[0]
            kept = result[tile.keep[0], tile.keep[1]]
            if output == "labels" and self.output == "logits":
                kept = kept.argmax(-1).astype(label_dtype(self.num_classes).as_numpy_dtype)
            yield tile.region, kept
