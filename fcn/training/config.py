"""``TrainConfig``: every data-independent setting of [`fcn.train`][], in one place.

Each field carries its default, its help text (``metadata["help"]``, with units) and, if it is
a number, its range (``metadata["range"]``, a [`Range`][]) once: [`fcn.train`][] takes the
fields as keyword overrides and ``fcn train`` builds its options from them
(``metadata["choices"]``: the allowed values; ``metadata["cli"] = False``: no command-line
option). A recipe ([`fcn.training.recipes`][]) is a named set of defaults for the fields
marked ``metadata["recipe"]``, where None stands for the recipe's value
([`TrainConfig.effective_recipe`][]).
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from fcn.classes import IGNORE_LABEL, NUM_CLASSES
from fcn.layout import VARIANTS, VGG_BLOCKS
from fcn.training.recipes import PAPER_SCHEDULE_IMAGES, RECIPES, SCHEDULE_PASSES, Recipe

STATE_FILE = "state.json"
"""The run's state in ``run_dir`` ([`fcn.training.checkpoint`][]: epochs, history, these
settings)."""
BEST_FILE = "best.keras"
"""The model with the best validation mean IoU so far, in ``run_dir``."""
LOG_FILE = "log.csv"
"""One row per completed epoch, in ``run_dir``."""

MIXED_PRECISION_POLICIES: tuple[str, ...] = ("auto", "mixed_float16", "mixed_bfloat16")
"""The Keras mixed-precision policies [`fcn.train`][] accepts (logits stay float32)."""

UNFREEZE_CHOICES: tuple[str, ...] = ("auto", "never")
"""When a run's frozen VGG blocks start training: ``auto``, once the head has learned
([`fcn.training.phases.head_phase_over`][]), or ``never``."""


class Range(NamedTuple):
    """The values of a numeric [`TrainConfig`][] field (its ``metadata["range"]``): finite
    numbers from ``low`` to ``high``, each included unless ``open_low`` / ``open_high``, whole
    numbers alone where ``whole`` (``2.0`` is one); ``what`` says so in words.

    Examples:
        >>> Range(1, 2**20, "a whole number >= 1", whole=True).check("accumulate", 0)
        Traceback (most recent call last):
        ...
        ValueError: accumulate=0: must be a whole number >= 1
        >>> Range(0, 1, "in [0, 1)", open_high=True).check("dropout", 1.0)
        Traceback (most recent call last):
        ...
        ValueError: dropout=1.0: must be in [0, 1)
    """

    low: float
    high: float
    what: str
    whole: bool = False
    open_low: bool = False
    open_high: bool = False

    def check(self, name: str, value: Any) -> None:
        """Raise TypeError unless ``value`` (of the field ``name``) is a number or None, and
        ValueError unless it is in this range."""
        if value is None:
            return
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, got {value!r}")
        above = self.low < value if self.open_low else self.low <= value
        below = value < self.high if self.open_high else value <= self.high
        whole = not self.whole or (math.isfinite(value) and value == int(value))
        if not (math.isfinite(value) and above and below and whole):
            raise ValueError(f"{name}={value!r}: must be {self.what}")


@dataclass(frozen=True)
class TrainConfig:
    """How to train: the model, the recipe and its overrides, and the run.

    Every field's default, help text (with units) and range are below, in its ``metadata``;
    ``fcn train --help`` prints the help. ``verbose`` has no command-line option (``fcn train``
    keeps Keras' ``"auto"``). The values of fields with ``metadata["choices"]`` or
    ``metadata["range"]`` are checked.

    Examples:
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
        metadata={"resume": "fixed",
                  "help": "the network (fcn32s/16s/8s: predictions refined down to 32, 16 or "
                  "8 pixels)", "choices": VARIANTS},
    )  # fmt: skip
    weights: str | None = field(
        default="imagenet",
        metadata={"resume": "fixed",
                  "help": "the VGG16 body's initialisation: imagenet (Keras' file, downloaded "
                  "once), a VGG16 weights file, or none (random); a pretrained body also gets "
                  "the skip layers' learning-rate multipliers"},
    )  # fmt: skip
    width: float = field(
        default=1.0,
        metadata={"resume": "fixed",
                  "help": "channel multiplier of the VGG body and fc6/fc7 (1.0: the paper's "
                  "net; smaller only with weights none: fast tests and demos)",
                  "range": Range(0, float("inf"), "a positive channel multiplier of the "
                                 "paper's net", open_low=True)},
    )  # fmt: skip
    dropout: float = field(
        default=0.5,
        metadata={"resume": "fixed",
                  "help": "dropout rate after fc6 and fc7 (0.5: the paper's; 0 makes a step "
                  "deterministic, e.g. to compare runs)",
                  "range": Range(0.0, 1.0, "in [0, 1): a dropout rate", open_high=True)},
    )  # fmt: skip
    num_classes: int | None = field(
        default=None,
        metadata={"resume": "fixed",
                  "help": "output classes, background included (default: as many as the "
                  f"class names, else {NUM_CLASSES}: VOC); labels must lie in 0..num_classes-1 "
                  "or be 255 (void)",
                  "range": Range(1, IGNORE_LABEL, f"a whole number in 1..{IGNORE_LABEL}: labels "
                                 f"are uint8 and {IGNORE_LABEL} is void", whole=True)},
    )  # fmt: skip
    class_names: Sequence[str] | str | os.PathLike | None = field(
        default=None,
        metadata={"resume": "fixed",
                  "help": "the classes' names, class 0 first: a list, or a text file of one "
                  "name per line; stored in every checkpoint"},
    )  # fmt: skip
    recipe: str = field(
        default="practical",
        metadata={"resume": "fixed",
                  "help": "the training recipe, a name in fcn.training.recipes.RECIPES: crops"
                  " or whole "
                  "images, batch, optimiser and learning-rate schedule", "choices": tuple(RECIPES)},
    )  # fmt: skip
    epochs: int | None = field(
        default=None,
        metadata={"help": "total epochs, counting those done before a resume (default: "
                  f"{SCHEDULE_PASSES} passes over the training files, fewer where that is more "
                  f"pixels than the paper's {PAPER_SCHEDULE_IMAGES:,} images: "
                  "fcn.training.recipes.schedule_epochs; decided when the run starts and "
                  "recorded)",
                  "range": Range(0, 2**31, "a whole number >= 0 (0 builds, checkpoints and "
                                 "trains nothing)", whole=True)},
    )  # fmt: skip
    steps_per_epoch: int | None = field(
        default=None,
        metadata={"help": "batches per epoch (default: one pass over the training files)",
                  "range": Range(1, 2**31, "a whole number >= 1, or None for one pass over the "
                                 "files", whole=True)},
    )  # fmt: skip
    crop_size: int | None = field(
        default=None,
        metadata={"recipe": True,
                  "help": "side of the square training crops, in pixels (default: the "
                  "recipe's)",
                  "range": Range(1, 2**16, "a whole number of pixels >= 1", whole=True)},
    )  # fmt: skip
    batch_size: int | None = field(
        default=None,
        metadata={"recipe": True,
                  "help": "global batch in crops (whole images for the paper recipe) per "
                  "optimiser update before accumulation, split across replicas (default: the "
                  "recipe's per replica: 2 crops per replica for practical)",
                  "range": Range(1, 2**20, "a whole number >= 1", whole=True)},
    )  # fmt: skip
    learning_rate: float | None = field(
        default=None,
        metadata={"recipe": True,
                  "help": "base learning rate for the loss averaged over labelled pixels "
                  "(default: the recipe's)",
                  "range": Range(0, float("inf"), "a positive number", open_low=True)},
    )  # fmt: skip
    augment: bool | None = field(
        default=None,
        metadata={"recipe": True,
                  "help": "random rescaling by 0.5-2x before cropping; a crop's position and "
                  "horizontal flip are random either way (default: the recipe's)"},
    )  # fmt: skip
    frozen_blocks: int | None = field(
        default=None,
        metadata={"resume": "fixed", "recipe": True,
                  "help": "the first VGG blocks (0-5) whose convolutions stay as initialised "
                  "in the head phase (see unfreeze): not trained, and no backward pass through "
                  "them (default: the recipe's; only with pretrained weights)",
                  "range": Range(0, len(VGG_BLOCKS), "a whole number of VGG blocks in "
                                 f"0..{len(VGG_BLOCKS)}", whole=True)},
    )  # fmt: skip
    unfreeze: str = field(
        default="auto",
        metadata={"resume": "fixed",
                  "help": "when the frozen VGG blocks start training: auto (the default: once "
                  "the head has learned, i.e. validation mean IoU flat for a few evaluations "
                  "or half the schedule done, and never before 6,000 crops; "
                  "fcn.training.phases), then every layer trains, the blocks at body_rate; "
                  "never: frozen for the whole run (the fastest on a CPU; on 118 images the "
                  "second phase gained nothing measured, benchmarks/README.md)",
                  "choices": UNFREEZE_CHOICES},
    )  # fmt: skip
    body_rate: float | None = field(
        default=None,
        metadata={"recipe": True,
                  "help": "the share of the schedule's rate at which the frozen VGG blocks "
                  "train once unfreeze=auto lets them (default: the recipe's, 0.1 for "
                  "practical: at 1 the switch lost 0.11 hold-out mean IoU on 118 images, "
                  "benchmarks/README.md)",
                  "range": Range(0, 1, "a share in (0, 1]", open_low=True)},
    )  # fmt: skip
    accumulate: int = field(
        default=1,
        metadata={"resume": "fixed",
                  "help": "batches whose gradients are averaged per optimiser update: an "
                  "effective batch of accumulate x batch_size in the memory of one",
                  "range": Range(1, 2**20, "a whole number >= 1", whole=True)},
    )  # fmt: skip
    mixed_precision: str | None = field(
        default="auto",
        metadata={"resume": "fixed",
                  "help": "Keras mixed-precision policy (logits stay float32), or none: "
                  "float32 throughout; auto (the default): mixed_bfloat16 where the hardware "
                  "runs bf16 natively (AMX or AVX512-BF16 under oneDNN, a bf16 GPU), else "
                  "float32, decided when training starts and recorded as decided",
                  "choices": MIXED_PRECISION_POLICIES},
    )  # fmt: skip
    resume: bool = field(
        default=False,
        metadata={"help": "continue the run in run_dir from its last completed epoch, or start "
                  "it if run_dir holds none: the run's recorded settings, with those this call "
                  "gives instead; a changed variant, weights, width, dropout, num_classes, "
                  "class_names, recipe, accumulate, mixed_precision or init_from is refused, "
                  "any other change (epochs, learning_rate, batch_size, crop_size, data, ...) "
                  "holds from the next epoch, the schedule spanning the new total"},
    )  # fmt: skip
    seed: int | None = field(
        default=0,
        metadata={"help": "seed of the data order and augmentation (none: fresh randomness)",
                  "range": Range(0, 2**31 - 1, "a whole number in 0..2**31-1", whole=True)},
    )  # fmt: skip
    val_every: int = field(
        default=1,
        metadata={"help": "epochs between two evaluations on the validation files",
                  "range": Range(1, 2**31, "a whole number >= 1", whole=True)},
    )  # fmt: skip
    val_max_pixels: int | None = field(
        default=None,
        metadata={"help": "pixels per evaluation forward pass (default: fcn.evaluate's)",
                  "range": Range(1, 2**40, "a whole number >= 1", whole=True)},
    )  # fmt: skip
    init_from: str | os.PathLike | None = field(
        default=None,
        metadata={"resume": "fixed",
                  "help": "a trained coarser FCN (.keras) whose layers of the same name and "
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
        for f in fields(self):
            if "range" in f.metadata:
                f.metadata["range"].check(f.name, getattr(self, f.name))

    def effective_recipe(self, replicas: int = 1) -> Recipe:
        """The recipe this config trains with: [`RECIPES`][fcn.training.recipes]'s
        ``recipe`` with this config's value of each field marked ``metadata["recipe"]`` where it
        is not None; without a ``batch_size``, the recipe's batch on each of ``replicas`` (2
        crops per replica for ``practical``, one whole image per replica for ``paper``).

        Examples:
            >>> TrainConfig().effective_recipe(replicas=4).batch_size
            8
            >>> recipe = TrainConfig(learning_rate=0.01, batch_size=3).effective_recipe(replicas=4)
            >>> recipe.crop_size, recipe.batch_size, recipe.learning_rate, recipe.momentum
            (320, 3, 0.01, 0.9)
        """
        recipe = RECIPES[self.recipe]
        own = {f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("recipe")}
        own["batch_size"] = own["batch_size"] or recipe.batch_size * replicas
        return dataclasses.replace(recipe, **{k: v for k, v in own.items() if v is not None})

    def to_json(self) -> dict:
        """The settings that make a run (every field but ``run_dir``, ``resume`` and
        ``verbose``), as JSON values: what ``state.json`` records.

        Examples:
            >>> TrainConfig(epochs=3, class_names=["sky", "road"]).to_json()["class_names"]
            ['sky', 'road']
        """
        return {f.name: _jsonable(getattr(self, f.name)) for f in fields(self)
                if f.name not in CALL_ONLY}  # fmt: skip

    def resumed(self, recorded: dict, given: dict) -> TrainConfig:
        """This call's config for a run whose ``recorded`` settings ([`to_json`][]) are in its
        run directory: the recorded settings (with [`RECORDED_BEFORE`][]'s value of a field
        they lack) with the fields in ``given`` (the call's own) replacing them, this config's
        ``run_dir``, ``resume`` and ``verbose``.

        Raises:
            ValueError: a field that cannot change within a run (``metadata["resume"] ==
                "fixed"``: the model, its initialisation, the recipe) differs, naming each
                such field, both values and what to do.

        Examples:
            >>> run = TrainConfig(epochs=1, width=0.25).to_json()
            >>> TrainConfig(resume=True).resumed(run, {"epochs": 3}).epochs  # width stays 0.25
            3
            >>> TrainConfig(resume=True).resumed(run, {"width": 0.5})
            Traceback (most recent call last):
            ...
            ValueError: resume: width 0.5 differs from the run's 0.25, which cannot change
            within a run: pass width=0.25, or start a new run in another run_dir
        """
        recorded = {**RECORDED_BEFORE, **recorded}
        known = {f.name for f in fields(self)}
        settings = {k: v for k, v in recorded.items() if k in known}
        fixed = [f.name for f in fields(self) if f.metadata.get("resume") == "fixed"]
        changed = differences(recorded, given, fixed)
        if changed:
            fix = ", ".join(f"{n}={_show(r)}" for n, _, r in changed)
            raise ValueError(
                f"resume: {describe(changed, 'the run')}, which cannot change within a run: "
                f"pass {fix}, or start a new run in another run_dir"
            )
        call = {name: getattr(self, name) for name in CALL_ONLY}
        return TrainConfig(**{**settings, **given, **call})


def differences(
    recorded: dict, given: dict, names: Sequence[str] | None = None
) -> list[tuple[str, Any, Any]]:
    """(field, given value, recorded value) for each field of ``given`` (of ``names`` alone,
    if given) whose JSON value differs from the ``recorded`` settings'
    ([`TrainConfig.to_json`][]).

    Examples:
        >>> differences(TrainConfig(epochs=2).to_json(), {"epochs": 3, "width": 1.0})
        [('epochs', 3, 2)]
    """
    return [
        (name, value, recorded.get(name))
        for name, value in given.items()
        if (names is None or name in names) and _jsonable(value) != recorded.get(name)
    ]


def describe(changed: list[tuple[str, Any, Any]], whose: str) -> str:
    """[`differences`][] in words: ``"epochs 3 differs from <whose>'s 2; ..."``.

    Examples:
        >>> describe([("epochs", 3, 2), ("recipe", "paper", "practical")], "the chief")
        "epochs 3 differs from the chief's 2; recipe 'paper' differs from the chief's 'practical'"
    """
    return "; ".join(f"{n} {_show(g)} differs from {whose}'s {_show(r)}" for n, g, r in changed)


RECORDED_BEFORE: dict[str, Any] = {"unfreeze": "never", "body_rate": 1.0}
"""For a field added after runs were first recorded, the value that does what a run whose
``state.json`` lacks it did: such a run resumes as it was (frozen blocks stayed frozen; a body
that trained did so at the schedule's rate)."""

CALL_ONLY: tuple[str, ...] = ("run_dir", "resume", "verbose")
"""TrainConfig fields that belong to one call, not to the run: never recorded or compared."""


def _jsonable(value):
    """``value`` as JSON: paths as strings, sequences as lists."""
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _show(value) -> str:
    return repr(value) if isinstance(value, str) else str(value)
