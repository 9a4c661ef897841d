"""``TrainConfig``: every data-independent setting of :func:`fcn.train`, in one place.

Each field carries its default and its help text (``metadata["help"]``, with units) once:
:func:`fcn.train` takes the fields as keyword overrides and ``fcn train`` builds its options
from them (``metadata["choices"]``: the allowed values; ``metadata["cli"] = False``: no
command-line option).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields

from fcn.checkpoint import BEST_FILE, LOG_FILE, STATE_FILE
from fcn.classes import NUM_CLASSES
from fcn.model import VARIANTS
from fcn.recipes import RECIPES

MIXED_PRECISION_POLICIES: tuple[str, ...] = ("mixed_float16", "mixed_bfloat16")
"""The Keras mixed-precision policies :func:`fcn.train` accepts (logits stay float32)."""


@dataclass(frozen=True)
class TrainConfig:
    """How to train: the model, the recipe and its overrides, and the run.

    Every field's default and help text (with units) are below, ``metadata["help"]``;
    ``fcn train --help`` prints them. ``verbose`` has no command-line option (``fcn train``
    keeps Keras' ``"auto"``). The values of fields with ``metadata["choices"]`` are checked.

    Example:
        >>> TrainConfig(epochs=2).epochs
        2
        >>> TrainConfig(variant="fcn64s")
        Traceback (most recent call last):
        ...
        ValueError: unknown variant 'fcn64s'; choose one of fcn32s, fcn16s, fcn8s, fcn8s_atonce
    """

    run_dir: str | os.PathLike | None = field(
        default=None,
        metadata={"help": f"the run's folder: epoch checkpoints, {BEST_FILE}, {STATE_FILE}, "
                  f"{LOG_FILE} and TensorBoard logs (default: runs/VARIANT)"},
    )  # fmt: skip
    variant: str = field(
        default="fcn8s",
        metadata={"help": "the network (fcn32s/16s/8s: predictions refined down to 32, 16 or "
                  "8 pixels)", "choices": VARIANTS},
    )  # fmt: skip
    weights: str | None = field(
        default="imagenet",
        metadata={"help": "the VGG16 body's initialisation: imagenet (Keras' file, downloaded "
                  "once), a VGG16 weights file, or none (random); a pretrained body also gets "
                  "the skip layers' learning-rate multipliers"},
    )  # fmt: skip
    width: float = field(
        default=1.0,
        metadata={"help": "channel multiplier of the VGG body and fc6/fc7 (1.0: the paper's "
                  "net; smaller only with weights none: fast tests and demos)"},
    )  # fmt: skip
    dropout: float = field(
        default=0.5,
        metadata={"help": "dropout rate after fc6 and fc7 (0.5: the paper's; 0 makes a step "
                  "deterministic, e.g. to compare runs)"},
    )  # fmt: skip
    num_classes: int | None = field(
        default=None,
        metadata={"help": "output classes, background included (default: as many as the "
                  f"class names, else {NUM_CLASSES}: VOC); labels must lie in 0..num_classes-1 "
                  "or be 255 (void)"},
    )  # fmt: skip
    class_names: Sequence[str] | str | os.PathLike | None = field(
        default=None,
        metadata={"help": "the classes' names, class 0 first: a list, or a text file of one "
                  "name per line; stored in every checkpoint"},
    )  # fmt: skip
    recipe: str = field(
        default="practical",
        metadata={"help": "the training recipe, a name in fcn.recipes.RECIPES: crops or whole "
                  "images, batch, optimiser and learning-rate schedule", "choices": tuple(RECIPES)},
    )  # fmt: skip
    epochs: int = field(
        default=50, metadata={"help": "total epochs, counting those done before a resume"}
    )
    steps_per_epoch: int | None = field(
        default=None,
        metadata={"help": "batches per epoch (default: one pass over the training files)"},
    )
    crop_size: int | None = field(
        default=None,
        metadata={"help": "side of the square training crops, in pixels (default: the "
                  "recipe's)"},
    )  # fmt: skip
    batch_size: int | None = field(
        default=None,
        metadata={"help": "global batch in crops (whole images for the paper recipe) per "
                  "optimiser update before accumulation, split across replicas (default: the "
                  "recipe's)"},
    )  # fmt: skip
    learning_rate: float | None = field(
        default=None,
        metadata={"help": "base learning rate for the loss averaged over labelled pixels "
                  "(default: the recipe's)"},
    )  # fmt: skip
    augment: bool | None = field(
        default=None,
        metadata={"help": "random rescaling by 0.5-2x before cropping (default: the recipe's)"},
    )
    accumulate: int = field(
        default=1,
        metadata={"help": "batches whose gradients are averaged per optimiser update: an "
                  "effective batch of accumulate x batch_size in the memory of one"},
    )  # fmt: skip
    mixed_precision: str | None = field(
        default=None,
        metadata={"help": "Keras mixed-precision policy (logits stay float32; default: "
                  "float32 throughout)", "choices": MIXED_PRECISION_POLICIES},
    )  # fmt: skip
    resume: bool = field(
        default=False,
        metadata={"help": "continue the run in run_dir from its last completed epoch: its "
                  "checkpoint's model, classes and optimizer (state and schedule position "
                  "included) win over variant, weights, width, num_classes, class_names, "
                  "recipe, learning_rate, accumulate, mixed_precision and init_from"},
    )  # fmt: skip
    seed: int | None = field(
        default=0,
        metadata={"help": "seed of the data order and augmentation (none: fresh randomness)"},
    )
    val_every: int = field(
        default=1, metadata={"help": "epochs between two evaluations on the validation files"}
    )
    val_max_pixels: int | None = field(
        default=None,
        metadata={"help": "pixels per evaluation forward pass (default: fcn.evaluate's)"},
    )
    init_from: str | os.PathLike | None = field(
        default=None,
        metadata={"help": "a trained coarser FCN (.keras) whose layers of the same name and "
                  "shape initialise the new model, the rest keeping their own initialisation: "
                  "the paper's staged training (fcn16s from fcn32s, fcn8s from fcn16s); not "
                  "used when resuming a run"},
    )  # fmt: skip
    verbose: int | str = field(
        default="auto",
        metadata={"help": "Keras' progress output: auto, 0 (silent), 1 (bar) or 2 (a line "
                  "per epoch)", "cli": False},
    )  # fmt: skip

    def __post_init__(self) -> None:
        for f in fields(self):
            choices = f.metadata.get("choices")
            value = getattr(self, f.name)
            if choices is not None and value is not None and value not in choices:
                raise ValueError(f"unknown {f.name} {value!r}; choose one of {', '.join(choices)}")
