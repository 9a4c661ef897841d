"""``fcn.train``: one call from a VOC folder to a trained FCN, a run directory and its best model.

The model file ([`fcn.model`][]) stays small; everything about *how* to train lives in this
wing: [`recipes`][] (loss, schedules, rates), [`optimizer`][]
(Caffe's SGD), [`checkpoint`][] (atomic, resumable run directory),
[`distribute`][] (strategies, cluster), [`agreement`][] (the workers' settings),
[`batch_size`][] (memory) and [`loop`][] (the step); this module puts them together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import keras
import tensorflow as tf

from fcn import data
from fcn.classes import NUM_CLASSES
from fcn.data.errors import data_errors_named
from fcn.device import (
    OutOfMemoryError,
    auto_mixed_precision,
    enable_memory_growth,
    kernels_advice,
)
from fcn.inference.evaluate import EvaluationCallback
from fcn.inference.model_files import load_model
from fcn.model import build_model
from fcn.training import agreement, distribute, loop, run_lock
from fcn.training.batch_size import find_batch_size, training_memory_estimate
from fcn.training.checkpoint import FiniteGuard, RunCheckpoint, resume_state
from fcn.training.config import BEST_FILE, CALL_ONLY, TrainConfig
from fcn.training.loss import segmentation_loss
from fcn.training.optimizer import recipe_optimizer
from fcn.training.phases import HeadPhase, set_trainable
from fcn.training.rates import (
    HEAD_ENERGY_IMAGES,
    HEAD_RATE_MARGIN,
    set_head_rate,
    skip_kernel_lr_mults,
)
from fcn.training.recipes import Recipe, schedule_epochs


@dataclass
class TrainResult:
    """What [`train`][] returns.

    Attributes:
        model: the trained model (the last good epoch's weights).
        history: one dict of logs per completed epoch, earlier runs of a resumed run included.
        best_checkpoint: ``run_dir/best.keras`` (best validation mean IoU), None without
            validation.
        run_dir: the run directory.
        failure: why training stopped early (a non-finite loss or weight: which, at which
            epoch, and the checkpoint whose weights ``model`` holds), None if it did not.

    Examples:
        >>> result = TrainResult(build_model("fcn32s", weights=None, width=1 / 16), [], None,
        ...                      Path("runs/fcn32s"), failure="epoch 3: non-finite loss; ...")
        >>> result.stopped_on_nan
        True
    """

    model: keras.Model
    history: list[dict]
    best_checkpoint: Path | None
    run_dir: Path
    failure: str | None = None

    @property
    def stopped_on_nan(self) -> bool:
        """Training stopped on a non-finite loss or weight (see
        [`failure`][fcn.training.train.TrainResult])."""
        return self.failure is not None


def _files(strategy: tf.distribute.Strategy, voc_root, sbd_root, train_files, val_files):
    """The files given, else the default splits (VOC train / val, or train_aug / seg11valid with
    an SBD root), each worker listing its own; under several workers every worker's training
    list is checked against the chief's before anything is counted from it."""
    with distribute.stop_together(strategy):  # each worker lists its own files
        train_files, val_files = _default_files(voc_root, sbd_root, train_files, val_files)
    if distribute.cluster_size() > 1:  # every worker refuses alike
        distribute.check_same_files(strategy, train_files)
    return train_files, val_files


def _default_files(voc_root, sbd_root, train_files, val_files):
    """The default splits: VOC train / val, or train_aug / seg11valid with an SBD root."""
    if train_files is None:
        if voc_root is None:
            raise ValueError("train() needs a VOC root (voc_root) or train_files")
        if sbd_root:
            train_files = data.train_aug_pairs(voc_root, sbd_root)
        else:
            train_files = data.voc_pairs(voc_root, "train")
        if val_files is None:
            val_files = (
                data.seg11valid_pairs(voc_root) if sbd_root else data.voc_pairs(voc_root, "val")
            )
    return train_files, val_files


def input_fn(files, recipe, seed, num_classes: int = NUM_CLASSES):
    """The ``tf.distribute`` input function: per-replica batches from this input pipeline's
    shard of the file list (every ``num_input_pipelines``-th file), labels checked against
    ``num_classes``.

    Examples:
        >>> from fcn import data
        >>> from fcn.training.recipes import RECIPES
        >>> files = data.voc_pairs(data.sample_voc_root(), "train")
        >>> dataset = input_fn(files, RECIPES["practical"], seed=0)(tf.distribute.InputContext())
        >>> [tuple(spec.shape) for spec in dataset.element_spec]
        [(2, 320, 320, 3), (2, 320, 320)]
    """
    def dataset_fn(context: tf.distribute.InputContext) -> tf.data.Dataset:
        shard = files
        if context.num_input_pipelines > 1:
            shard = files.shard(context.num_input_pipelines, context.input_pipeline_id)
        worker_seed = None if seed is None else seed + context.input_pipeline_id
        if recipe.crop_size is None:  # the paper: one whole image per step
            whole = data.eval_dataset(
                shard, num_classes=num_classes, shuffle=True, seed=worker_seed
            )
            return whole.batch(1).repeat()
        fixed_scale = {} if recipe.augment else {"scale_range": (1.0, 1.0)}
        return data.train_dataset(
            shard,
            crop_size=recipe.crop_size,
            batch_size=context.get_per_replica_batch_size(recipe.batch_size),
            seed=worker_seed,
            num_classes=num_classes,
            **fixed_scale,
        ).repeat()

    return dataset_fn


def compile_for_training(
    model: keras.Model,
    recipe: Recipe,
    total_batches: int,
    accumulate: int = 1,
    *,
    pretrained: bool = True,
    unfreeze: bool = True,
) -> keras.Model:
    """Compile ``model`` as [`train`][] does: ``recipe``'s optimiser
    ([`recipe_optimizer`][]) over ``total_batches`` batches, with the
    model's [`skip_kernel_lr_mults`][]
    and ``recipe.frozen_blocks`` (those blocks' convolutions made non-trainable, at
    ``recipe.body_rate`` once they train) if its VGG body
    is ``pretrained`` (ImageNet; see [`fcn.training.recipes`][] for why only then), and
    [`segmentation_loss`][]. The optimizer is built at once, so a checkpoint saved before the
    first step holds its state too: over every variable where the frozen blocks may
    ``unfreeze`` later ([`fcn.training.phases`][]: their momentum too), else over the trained
    ones.

    Examples:
        >>> from fcn.training.recipes import RECIPES
        >>> model = build_model("fcn8s", 3, weights=None, width=1 / 16)
        >>> compile_for_training(model, RECIPES["practical"], total_batches=100).optimizer.momentum
        0.9
    """
    mults = skip_kernel_lr_mults(model) if pretrained else {}
    frozen = recipe.frozen_layers() if pretrained else ()
    optimizer = recipe_optimizer(recipe, total_batches, accumulate, mults, body=frozen)
    model.compile(optimizer=optimizer, loss=segmentation_loss())
    if not unfreeze:  # the optimizer never holds the frozen layers
        set_trainable(model, frozen, False)
    model.optimizer.build(model.trainable_variables)
    set_trainable(model, frozen, False)
    return model


def train(
    voc_root: str | os.PathLike | None = None,
    config: TrainConfig | None = None,
    *,
    sbd_root: str | os.PathLike | None = None,
    train_files: data.SegmentationFiles | None = None,
    val_files: data.SegmentationFiles | Sequence | None = None,
    strategy: tf.distribute.Strategy | None = None,
    callbacks: Sequence[keras.callbacks.Callback] = (),
    **overrides: Any,
) -> TrainResult:
    """Train an FCN on Pascal VOC (or any image/label files) and keep the best model.

    Defaults, with nothing but ``voc_root``: FCN-8s from VGG16 ImageNet weights; VOC 2012 train
    for training and VOC 2012 val for validation (with ``sbd_root``: train_aug, 10,582 images, and
    seg11valid, 736 images); the ``practical`` recipe
    ([`fcn.training.recipes.RECIPES`][fcn.training.recipes]: 320x320 augmented crops, batch 2, SGD
    momentum 0.9, lr 1e-3 with a poly schedule, Caffe weight decay 5e-4), VGG blocks 1-5 frozen
    until the head has learned, then every layer, the blocks at a tenth of the rate
    (``unfreeze="auto"``, ``body_rate``: [`fcn.training.phases`][]); bf16 where the
    hardware runs it natively (``mixed_precision="auto"``), else float32; epochs of
    ``len(train_files) // batch_size`` steps, 50 of them or as many as train on the paper's
    pixels if fewer ([`fcn.training.recipes.schedule_epochs`][]); full-resolution streaming
    evaluation after every epoch; the best model by validation mean IoU in
    ``run_dir/best.keras``.

    Args:
        voc_root: a ``VOCdevkit/VOC2012`` (or ``VOC2012``) folder.
        config: how to train (default: ``TrainConfig()``).
        sbd_root: an SBD ``benchmark_RELEASE`` folder: train on train_aug, validate on seg11valid.
        train_files, val_files: [`fcn.data.SegmentationFiles`][] instead of VOC splits
            (``val_files=()`` trains without validation). The data are checked against the
            model's class count: a label outside ``0..num_classes-1`` (other than 255) raises
            DataError.
        strategy: a ``tf.distribute`` strategy; default
            [`fcn.training.distribute.choose_strategy`][]
            (several GPUs: mirrored; a ``TF_CONFIG`` of several workers: multi-worker, see
            [`fcn.training.loop`][]).
        callbacks: more Keras callbacks.
        **overrides: every field of [`TrainConfig`][] (``epochs=2``, ...),
            replacing ``config``'s. Resuming (``resume=True`` and a run in ``run_dir``), the
            run's recorded settings stand for what neither gives
            ([`TrainConfig.resumed`][]): ``train(root, run_dir=d, resume=True,
            epochs=3)`` changes the epochs alone, and the schedule spans the new total.

    Raises:
        TypeError: an override that is no field of TrainConfig.
        ValueError: an ``init_from`` model whose layers do not fit the new one; a setting out
            of its range; a training list that fills no batch, or (several workers) differs
            from the chief's; on resume, a change of a setting that cannot change within a
            run, or fewer epochs than done.
        FileExistsError: ``run_dir`` holds a run and ``resume`` is False.
        PermissionError: ``run_dir`` cannot be written (checked before training).
        RunDirectoryBusyError: another process trains in ``run_dir``
            ([`fcn.training.run_lock`][]: one process per run directory, the holder
            named).
        OutOfMemoryError: the first steps did not fit; the message gives the estimate and a
            batch size that fits on this device.

    Examples:
        >>> import tempfile
        >>> from fcn import data
        >>> result = train(data.sample_voc_root(), run_dir=tempfile.mkdtemp(), weights=None,
        ...                width=1 / 16, epochs=1, steps_per_epoch=1, crop_size=64, batch_size=1,
        ...                val_files=(), verbose=0)
        >>> len(result.history), result.best_checkpoint, result.stopped_on_nan
        (1, None, False)
    """
    enable_memory_growth()  # before the strategy or the model touch a GPU
    advice = kernels_advice("training")
    if advice:
        warnings.warn(advice, stacklevel=2)
    call = _requested(config, overrides)
    strategy = strategy or distribute.choose_strategy()
    with contextlib.ExitStack() as held:  # the run directory's lock (the chief's) until the end
        run = _open_run(held, strategy, call)
        train_files, val_files = _files(strategy, voc_root, sbd_root, train_files, val_files)
        replicas, workers = strategy.num_replicas_in_sync, distribute.cluster_size()
        _check_batches(train_files, run.recipe, replicas, workers)
        steps = run.config.steps_per_epoch or max(1, len(train_files) // run.recipe.batch_size)
        if run.config.epochs is None:  # decided from the data, and recorded as decided
            epochs = schedule_epochs(run.recipe, steps)
            run = dataclasses.replace(run, config=dataclasses.replace(run.config, epochs=epochs))
        done, iterations = _position(run)
        # the schedule spans the batches done and those still to do at the current steps
        total = iterations + (run.config.epochs - done) * steps
        model = _model(run, total, train_files)
        checkpoint, guard, own_callbacks = _callbacks(
            run, val_files, model.output_shape[-1], total
        )
        history = _fit(run, model, train_files, done, steps, [*own_callbacks, *callbacks])
        best = run.run_dir / BEST_FILE
        return TrainResult(
            model=model,
            history=checkpoint.state["history"] if checkpoint else history,
            best_checkpoint=best if run.chief and best.exists() else None,
            run_dir=run.run_dir,
            failure=guard.failure,
        )


class _Call(NamedTuple):
    """What a call of [`train`][] asks for, before any run directory is read."""

    config: TrainConfig
    """``config`` with the overrides, checked, ``mixed_precision="auto"`` decided."""
    given: dict[str, Any]
    """The settings the call gives (the overrides, and every field of a ``config`` given):
    what stands against a resumed run's recorded settings, or against the chief's."""
    decided_here: tuple[str, ...]
    """Settings this machine decided (``mixed_precision`` from ``"auto"``): under several
    workers the chief's decision stands for every worker, not compared with theirs."""


def _requested(config: TrainConfig | None, overrides: dict[str, Any]) -> _Call:
    """``config`` (default: ``TrainConfig()``) with ``overrides``, checked, and the precision
    decided where it is ``"auto"``: here alone, and recorded as decided."""
    requested = _configure(config or TrainConfig(), overrides)
    given = overrides if config is None else {**_settings(requested), **overrides}
    if requested.frozen_blocks and requested.weights is None:
        raise ValueError(
            f"frozen_blocks={requested.frozen_blocks} keeps VGG blocks as initialised, but "
            "weights=None initialises them at random: pass pretrained weights, or frozen_blocks=0"
        )
    if requested.mixed_precision != "auto":
        return _Call(requested, given, ())
    precision = auto_mixed_precision()
    if "mixed_precision" in given:  # "auto" given: compared as what it decided
        given = {**given, "mixed_precision": precision}
    return _Call(dataclasses.replace(requested, mixed_precision=precision), given,
                 ("mixed_precision",))  # fmt: skip


@dataclass(frozen=True)
class _Run:
    """The run every step of [`train`][] works on, once its settings are agreed."""

    strategy: tf.distribute.Strategy
    config: TrainConfig
    """The run's settings: the call's, with a resumed run's recorded ones and the chief's."""
    recipe: Recipe
    """``config``'s effective recipe over the strategy's replicas."""
    run_dir: Path
    state: dict | None
    """The run's recorded state (the chief's, resuming), else None."""
    chief: bool

    @property
    def multi_worker(self) -> bool:
        return distribute.cluster_size() > 1


def _run_dir(config: TrainConfig) -> Path:
    return Path(config.run_dir or Path("runs", config.variant))


def _open_run(held: contextlib.ExitStack, strategy: tf.distribute.Strategy, call: _Call) -> _Run:
    """The run this call trains. The chief alone reads the run directory: it takes the run
    directory's lock ([`fcn.training.run_lock`][], one process per run directory, held by
    ``held``) before it reads the run's state, refuses to overwrite a run and removes what a
    killed write left; a resumed run's recorded settings stand for what the call does not give.
    Under several workers every worker then takes the chief's settings
    ([`fcn.training.agreement.chief_settings`][]), and all stop where one fails."""
    chief = distribute.is_chief(strategy)
    state, config = None, call.config
    with distribute.stop_together(strategy):
        if chief:  # one process per run directory, before its state is read
            held.enter_context(run_lock.hold(_run_dir(config)))
            state = resume_state(_run_dir(config), config.resume)
        if state is not None:  # the run's settings, with what this call gives instead
            config = config.resumed(state["settings"], call.given)
    if distribute.cluster_size() > 1:  # the chief's hardware decides for every worker
        mine = {k: v for k, v in call.given.items() if k not in call.decided_here}
        config = agreement.chief_settings(strategy, chief, config, mine)
    recipe = config.effective_recipe(strategy.num_replicas_in_sync)
    return _Run(strategy, config, recipe, _run_dir(config), state, chief)  # the chief's variant


def _position(run: _Run) -> tuple[int, int]:
    """(epochs, batches) the run has done: the chief's, on every worker. Raises ValueError where
    the run's ``epochs`` would undo some; warns where it has nothing left to train."""
    done, iterations = (run.state["epoch"], run.state["iterations"]) if run.state else (0, 0)
    if run.multi_worker:  # the chief's position everywhere, before anything is built from it
        done = distribute.sync_count(run.strategy, done)
        iterations = distribute.sync_count(run.strategy, iterations)
    epochs = run.config.epochs
    if epochs < done:
        raise ValueError(
            f"{run.run_dir} has {done} epochs done; epochs={epochs} would undo some: pass "
            f"epochs >= {done} (the total, counting those done)"
        )
    if run.state is not None and epochs == done:
        warnings.warn(
            f"{run.run_dir} has its {done} epochs done: nothing to train (pass a larger epochs)",
            stacklevel=2,
        )
    return done, iterations


def _model(run: _Run, total_batches: int, train_files) -> keras.Model:
    """The run's model, compiled for ``total_batches``, with the same values on every worker:
    a resumed run's checkpoint, or a new run's initialisation (``init_from``, score_fr's
    measured rate), read and set by the chief and sent to the others."""
    source = None
    with distribute.stop_together(run.strategy):
        if run.chief and not run.state:  # (run_lock.hold checked run_dir writable)
            source = _initial_model(run.config.init_from)
    model = _compiled(run, total_batches, source)
    with distribute.stop_together(run.strategy):
        if source is not None:
            _check_initialised(model, source, run.config.init_from)
        if run.state and run.chief:  # values only, weights and optimizer: the others by sync
            model.load_weights(run.run_dir / run.state["checkpoint"])
        elif run.chief and run.config.weights is not None:  # a new run: score_fr's rate
            first = input_fn(train_files, run.recipe, run.config.seed, model.output_shape[-1])
            _set_head_rate(model, run.recipe, first)
    if run.multi_worker:
        distribute.sync_from_chief(run.strategy, [*model.weights, *model.optimizer.variables])
    return model  # (source, copied, is freed here: before training)


def _compiled(run: _Run, total_batches: int, source: keras.Model | None) -> keras.Model:
    """The run's model built in the strategy's scope under its precision policy (the global
    policy restored after) and compiled ([`compile_for_training`][])."""
    config = run.config
    previous_policy = keras.mixed_precision.global_policy()
    if config.mixed_precision:
        keras.mixed_precision.set_global_policy(config.mixed_precision)
    try:
        with run.strategy.scope():  # a resumed run builds alike, then takes its checkpoint's values
            weights = config.weights if run.chief and not run.state else None
            model = build_model(
                config.variant, config.num_classes, weights, width=config.width,
                dropout=config.dropout, class_names=config.class_names, init_from=source,
            )  # fmt: skip
            compile_for_training(
                model, run.recipe, total_batches, config.accumulate,
                pretrained=config.weights is not None, unfreeze=config.unfreeze != "never",
            )  # fmt: skip
    finally:
        keras.mixed_precision.set_global_policy(previous_policy)
    return model


def _callbacks(
    run: _Run, val_files, classes: int, total_batches: int
) -> tuple[RunCheckpoint | None, FiniteGuard, list[keras.callbacks.Callback]]:
    """The run's own callbacks, built once: on every worker the stops on a non-finite loss and
    weight (see [`fcn.training.loop`][]) and the switch to every layer
    ([`fcn.training.phases.HeadPhase`][], where blocks are frozen and ``unfreeze="auto"``); on
    the chief alone, its files: the evaluation of ``val_files``, the checkpoint and
    TensorBoard. Also the checkpoint (None on another worker) and the guard."""
    checkpoint, evaluation, files = None, [], []
    with distribute.stop_together(run.strategy):  # the chief's validation files and run directory
        if run.chief:
            evaluation = _evaluation(run.config, val_files, classes)
            checkpoint = RunCheckpoint(run.run_dir, settings=run.config.to_json())
            files = [checkpoint, keras.callbacks.TensorBoard(str(run.run_dir / "tensorboard"))]
    guard = checkpoint.guard if checkpoint else FiniteGuard()  # another worker: no files
    own = [
        keras.callbacks.TerminateOnNaN(),  # mid-epoch, on the loss
        guard,  # at the epoch's end, on every weight: before anything uses them
        *evaluation,  # before the phase's switch, which reads its score
        *_phases(run, total_batches),
        *files,  # after the phase, whose column they record
    ]
    return checkpoint, guard, own


def _phases(run: _Run, total_batches: int) -> list[HeadPhase]:
    """The switch from the head phase to every layer (none where nothing is frozen or
    ``unfreeze="never"``)."""
    frozen = run.recipe.frozen_layers() if run.config.weights is not None else ()
    if not frozen or run.config.unfreeze == "never":
        return []
    history = run.state["history"] if run.state else []
    return [HeadPhase(
        run.strategy, frozen, run.recipe.frozen_blocks, total_batches, run.recipe.batch_size,
        history=history, verbose=run.config.verbose,
    )]  # fmt: skip


def _evaluation(config: TrainConfig, val_files, classes: int) -> list[EvaluationCallback]:
    """The validation callback (none without ``val_files``)."""
    if not val_files:
        return []
    budget = {"max_pixels": config.val_max_pixels} if config.val_max_pixels else {}
    val_data = data.eval_dataset(val_files, num_classes=classes)
    return [EvaluationCallback(val_data, every=config.val_every, **budget)]


def _fit(run: _Run, model: keras.Model, train_files, done: int, steps: int, callbacks) -> list:
    """Train the epochs after the ``done`` ones, ``steps`` batches each; Keras' history of
    them (none where nothing is left)."""
    if done >= run.config.epochs:
        return []
    # a resumed run draws new orders and crops: not those of the epochs it has done
    seed = None if run.config.seed is None else run.config.seed + RESUME_SEED_STRIDE * done
    dataset = run.strategy.distribute_datasets_from_function(
        input_fn(train_files, run.recipe, seed, model.output_shape[-1])
    )
    schedule = {
        "epochs": run.config.epochs, "initial_epoch": done, "steps_per_epoch": steps,
        "callbacks": callbacks, "verbose": run.config.verbose,
    }  # fmt: skip
    try:
        with data_errors_named():
            return loop.fit(model, run.strategy, dataset, **schedule)
    except tf.errors.ResourceExhaustedError as err:
        raise _out_of_memory(model, run.recipe) from err


RESUME_SEED_STRIDE = 2**16
"""A run resumed after ``e`` epochs seeds its data with ``seed + e * RESUME_SEED_STRIDE``: new
file orders and augmentations, apart from every worker's ``seed + worker index``."""


def _settings(config: TrainConfig) -> dict[str, Any]:
    """The fields of ``config`` that a resumed call compares with its run's."""
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config)
            if f.name not in CALL_ONLY}  # fmt: skip


def _check_batches(files, recipe: Recipe, replicas: int, workers: int) -> None:
    """Raise ValueError unless the batch splits over the replicas and each worker's shard of
    ``files`` fills at least one of its batches (otherwise the input ends inside the first
    step, as TensorFlow's ``End of sequence``)."""
    if recipe.batch_size % replicas:
        raise ValueError(
            f"batch_size {recipe.batch_size} does not split over {replicas} replicas: pass a "
            f"multiple of {replicas}"
        )
    if not len(files):
        raise ValueError("train_files is empty: there is nothing to train on")
    per_replica = recipe.batch_size // replicas if recipe.crop_size is not None else 1
    smallest_shard = len(files) // workers
    if smallest_shard < per_replica:
        across = f" shared by {workers} workers ({smallest_shard} each)" if workers > 1 else ""
        smaller = (
            f"batch_size <= {smallest_shard * replicas} (with accumulate for a larger effective "
            "batch) or " if smallest_shard else ""
        )
        raise ValueError(
            f"train_files holds {len(files)} image/label pairs{across}, fewer than one batch "
            f"of {per_replica}{' per replica' if replicas > 1 else ''}: pass {smaller}more files"
        )


def _configure(config: TrainConfig, overrides: dict[str, Any]) -> TrainConfig:
    """``config`` with ``overrides`` (TrainConfig field names) replaced, checked."""
    names = [f.name for f in dataclasses.fields(TrainConfig)]
    unknown = sorted(set(overrides) - set(names))
    if unknown:
        raise TypeError(
            f"train() got unknown argument(s) {', '.join(unknown)}; the TrainConfig fields "
            f"are {', '.join(names)}"
        )
    return dataclasses.replace(config, **overrides)


def _initial_model(path: str | os.PathLike | None) -> keras.Model | None:
    """The trained model at ``path`` (safe mode, checksum checked) that initialises a staged
    run; None without a path."""
    return None if path is None else load_model(path)


def _check_initialised(model: keras.Model, source: keras.Model, path: str | os.PathLike) -> None:
    """Raise ValueError if a layer of ``model`` that ``source`` also has (by name) could not
    take its weights (another width or class count)."""
    names = {layer.name for layer in source.layers}
    mismatched = []
    for layer in model.layers:
        if layer.weights and layer.name in names:
            theirs = [tuple(w.shape) for w in source.get_layer(layer.name).weights]
            ours = [tuple(w.shape) for w in layer.weights]
            if theirs != ours:
                mismatched.append(f"{layer.name} {theirs[0]} there, {ours[0]} here")
    if mismatched:
        raise ValueError(
            f"init_from {os.fspath(path)} does not fit the new model: "
            f"{'; '.join(mismatched[:3])}{' and more' if len(mismatched) > 3 else ''}. "
            "Train with its width and class count."
        )


def _set_head_rate(model: keras.Model, recipe: Recipe, dataset_fn) -> None:
    """[`set_head_rate`][] on the run's first batches, until they hold
    [`HEAD_ENERGY_IMAGES`][] images (the crops its first steps train on), said
    aloud where it lowers score_fr's rate."""
    batches = []
    for images, _ in dataset_fn(tf.distribute.InputContext()):
        batches.append(images)
        if sum(len(batch) for batch in batches) >= HEAD_ENERGY_IMAGES:
            break
    energy, factor = set_head_rate(model, batches, recipe)
    if factor < HEAD_RATE_MARGIN:  # the energy is past the bound itself, not only its margin
        warnings.warn(
            f"score_fr's input (fc7 of these weights) has an energy of {energy:.3g} per pixel, "
            f"above what SGD at lr {recipe.learning_rate:g} keeps stable: its kernel's rate is "
            f"scaled by {factor:.3g} (fcn.training.rates.stable_rate_factor)",
            stacklevel=3,
        )


def _out_of_memory(model: keras.Model, settings) -> OutOfMemoryError:
    """Turn a raw ResourceExhaustedError into advice: the estimate and a batch that fits."""
    crop = settings.crop_size or 500
    estimate = training_memory_estimate(model, crop, settings.batch_size) / 2**30
    fitting = find_batch_size(model, crop, max_batch=max(1, settings.batch_size - 1))
    return OutOfMemoryError(
        f"batch_size={settings.batch_size} at crop {crop}x{crop} does not fit in device memory "
        f"(a step needs about {estimate:.1f} GiB). batch_size={fitting.batch_size} fits: use it, "
        f"with accumulate={max(1, -(-settings.batch_size // max(fitting.batch_size, 1)))} to keep "
        "the effective batch, or mixed_precision='mixed_float16'."
    )
