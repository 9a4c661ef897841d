"""Time to accuracy from the ImageNet VGG16 conv weights: ``fcn.train`` beside PyTorch, one run.

Both frameworks train the full FCN-8s from the same initial weights (the real ImageNet VGG16
conv weights of ``../shared/vgg16_imagenet_notop``; fc6/fc7 drawn by fcn's seeded glorot and
copied into PyTorch; score layers zero; bilinear upsampling frozen) on the same crops, in the
same order (the PyTorch worker reads ``fcn.train``'s own input pipeline, same seed), and score
the same held-out images at full resolution with the same confusion matrix
(:class:`fcn.metrics.ConfusionMatrix`, ``score.py``'s mean IoU) every ``--every`` minutes of
training time, until ``--minutes``. Evaluation time is not counted; everything else is, from the
call that builds the model (for fcn: ``fcn.train`` itself, with its epoch checkpoints).

Data: the 148 real VOC 2012 training pairs of ``../shared/voc_train148`` (none in VOC's val
list). Every ``HOLDOUT_STRIDE``-th id in sorted order is held out (:func:`split`, 30 ids, printed
in the JSON); the other 118 train. Nothing is tuned on data reported here other than this
hold-out, which is the benchmark's own: the default recipe was chosen with it (see
``benchmarks/README.md``), so the figures are a development score, not a test score.

* ``fcn``: ``fcn.train`` with its defaults (``--set key=value`` overrides TrainConfig fields,
  for recipe screens), ``val_files=()``, ``--seed`` (0); the model evaluated as trained
  (``fcn.evaluate(..., precision=None)``).
* ``torch``: the FCN8s of ``benchmarks/vs_pytorch.py`` (element-wise dropout, as fcn's) with
  ``fcn.train``'s recipe in PyTorch: SGD with momentum, Caffe's coupled weight decay 5e-4 on
  kernels, biases at twice the rate without decay, the skip layers' gradient factors
  (:func:`fcn.training.rates.skip_kernel_lr_mults`),
  the same schedule over the same number of steps, the same two phases (the frozen blocks'
  gradients switched on at the epoch where ``fcn.train``'s rule switches without validation,
  :func:`fcn.training.phases.head_phase_over`; the body then at the recipe's ``body_rate``),
  the loss averaged over labelled pixels; ``channels_last`` and, where the training precision is
  bf16, ``torch.autocast("cpu", torch.bfloat16)`` (decided by fcn's
  :func:`fcn.device.auto_mixed_precision` unless ``--set mixed_precision=...`` says).

Writes ``--json`` (every point: minutes, images seen, steps, loss, mean IoU, per-class IoU) and
``--figure`` (this run's curves: hold-out mean IoU against training minutes and against images
seen).

    python benchmarks/time_to_accuracy.py --minutes 30                  # fcn, then PyTorch
    python benchmarks/time_to_accuracy.py --minutes 10 --every 5 --frameworks fcn \\
        --set batch_size=2 learning_rate=2.5e-4 --label "b2"              # a recipe screen
    python benchmarks/time_to_accuracy.py --minutes 10 --every 5 --frameworks fcn \\
        --fc-init pass-through --label "pass-through fc"                # an init screen
    python benchmarks/time_to_accuracy.py --step-costs 0 2 3 4 5 --crop 320 --batch 4
    python benchmarks/time_to_accuracy.py --levels 0.2 0.3 --label "b2" --json runs.json
    python benchmarks/time_to_accuracy.py --replot --label "b2" --json runs.json \\
        --figure b2.png                                                 # a figure from --json
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from convergence import WEIGHTS, LossRecorder
from vs_pytorch import torch_fcn8s

VOC148 = Path(__file__).resolve().parents[2] / "shared/voc_train148"
HOLDOUT_STRIDE = 5
"""Every 5th id (sorted) is held out: 30 of the 148."""
FIGURE = "benchmarks/figures/time_to_accuracy.png"
"""A run's figure unless ``--figure`` says: the AMX Xeon's pair in ``benchmarks/README.md``."""


def split(root: str | os.PathLike) -> tuple[list[str], list[str]]:
    """(training ids, held-out ids) of ``root``'s train list: every :data:`HOLDOUT_STRIDE`-th
    sorted id held out, starting from the first."""
    from fcn.data import voc_ids

    ids = sorted(voc_ids(root, "train"))
    holdout = ids[::HOLDOUT_STRIDE]
    return [i for i in ids if i not in set(holdout)], holdout


class Clock:
    """Training time (seconds, evaluation excluded) and the evaluation points: ``due()`` says
    when the next point is reached, ``record(evaluate)`` runs an evaluation off the clock."""

    def __init__(self, minutes: float, every: float):
        self.budget, self.every = minutes * 60, every * 60
        self.start, self.paused, self.next = time.perf_counter(), 0.0, self.every
        self.points: list[dict] = []

    def seconds(self) -> float:
        return time.perf_counter() - self.start - self.paused

    def due(self) -> bool:
        return self.seconds() >= min(self.next, self.budget)

    def done(self) -> bool:
        return self.seconds() >= self.budget

    def record(self, evaluate, losses: list[float], batch: int) -> None:
        """Score the model off the clock (``evaluate()``) after ``len(losses)`` steps of
        ``batch`` crops, with the last 20 steps' mean loss and the largest so far."""
        last = losses[-20:]
        fields = {"steps": len(losses), "images": len(losses) * batch,
                  "loss": sum(last) / len(last), "max_loss": max(losses)}  # fmt: skip
        minutes = self.seconds() / 60
        began = time.perf_counter()
        scores = evaluate()
        self.paused += time.perf_counter() - began
        self.next += self.every
        point = {"minutes": minutes, **fields, **scores,
                 "eval_s": time.perf_counter() - began}  # fmt: skip
        self.points.append(point)
        print(json.dumps(point), file=sys.stderr, flush=True)


def scores_of(matrix, class_names) -> dict:
    """Mean IoU, per-class IoU (NaN as None) and object classes above 0.2 of a confusion matrix."""
    scores = matrix.scores()
    iou = {name: (None if v != v else round(v, 4)) for name, v in zip(class_names, scores.iou)}
    above = sum(1 for name, v in list(iou.items())[1:] if v is not None and v > 0.2)
    return {"mean_iou": scores.mean_iou, "objects_above_0.2": above, "class_iou": iou}


def _overrides(pairs: list[str]) -> dict:
    """``--set`` ``key=value`` pairs: Python literals (``2``, ``1e-3``, ``None``) or strings."""
    out = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def pass_through_fc(weights: str, path: Path) -> Path:
    """A screen's initial model at ``path`` (.keras): FCN-8s from ``weights`` with fc6/fc7's
    first 512 channels passing pool5's centre through (fc6: the centre tap times
    :data:`PASS_THROUGH_SCALE`, fc7: identity) and glorot draws for the other 3,584."""
    import keras
    import numpy as np

    import fcn

    keras.utils.set_random_seed(0)
    model = fcn.build_model("fcn8s", weights=weights)
    fc6, fc7 = model.get_layer("fc6"), model.get_layer("fc7")
    kernel = fc6.kernel.numpy()
    channels = np.arange(kernel.shape[2])
    kernel[..., : channels.size] = 0
    kernel[3, 3, channels, channels] = PASS_THROUGH_SCALE
    fc6.kernel.assign(kernel)
    del kernel
    kernel = fc7.kernel.numpy()
    kernel[..., : channels.size] = 0
    kernel[0, 0, channels, channels] = 1.0
    fc7.kernel.assign(kernel)
    for layer in (fc6, fc7):
        bias = layer.bias.numpy()
        bias[: channels.size] = 0
        layer.bias.assign(bias)
    model.save(path)
    return path


PASS_THROUGH_SCALE = 0.02
"""pool5's channels have a mean square of ~1.6e3 (0..255 Caffe input, pool4's measured
energy per channel): x 0.02 brings them to ~0.6, that of the glorot fc7 channels (~0.7)."""


def fcn_worker(args) -> dict:
    import keras

    import fcn
    from fcn.classes import VOC_CLASSES
    from fcn.data import eval_dataset, voc_pairs
    from fcn.training.phases import FROZEN_COLUMN
    from fcn.training.rates import HEAD_SCORE

    train_ids, holdout_ids = split(args.voc)
    files, holdout = voc_pairs(args.voc, train_ids), voc_pairs(args.voc, holdout_ids)
    init = {}
    if args.fc_init == "pass-through":  # made before the clock starts: a screen, not a product
        path = Path(tempfile.mkdtemp(prefix="fcn-tta-init-")) / "pass_through.keras"
        init["init_from"] = pass_through_fc(args.weights, path)
    clock = Clock(args.minutes, args.every)

    class Points(LossRecorder):
        def on_train_batch_end(self, batch, logs=None):
            super().on_train_batch_end(batch, logs)
            if clock.due():
                clock.record(self.evaluate, self.values, self.batch)
            if clock.done():
                self.model.stop_training = True

        def on_train_end(self, logs=None):  # the schedule ended before the budget: score it
            if self.values and (not clock.points or clock.points[-1]["steps"] < len(self.values)):
                clock.record(self.evaluate, self.values, self.batch)

        def evaluate(self):
            result = fcn.evaluate(self.model, eval_dataset(holdout), precision=None)
            return scores_of(result.matrix, VOC_CLASSES)

    points = Points()
    overrides = _overrides(args.set)
    practical = fcn.training.recipes.RECIPES["practical"]
    points.batch = overrides.get("batch_size") or practical.batch_size
    keras.utils.set_random_seed(args.seed)
    result = fcn.train(
        train_files=files, val_files=(), weights=args.weights, seed=args.seed, verbose=0,
        run_dir=tempfile.mkdtemp(prefix="fcn-tta-"), callbacks=[points], **init, **overrides,
    )  # fmt: skip
    state = json.loads((result.run_dir / "state.json").read_text())
    factor = float(result.model.optimizer.rate_factors[HEAD_SCORE])
    epoch_steps = state["iterations"] // max(1, state["epoch"])
    unfrozen = [i for i, row in enumerate(state["history"]) if row.get(FROZEN_COLUMN) == 0]
    return {"framework": "fcn", "settings": state["settings"], "points": clock.points,
            "failure": result.failure, "score_fr_rate_factor": factor,
            "unfrozen_at_step": unfrozen[0] * epoch_steps if unfrozen else None}  # fmt: skip


TRITON_BESIDE_TENSORFLOW = (
    "triton is installed (PyPI's CUDA torch wheel brings it): torch.optim imports it, and its "
    "native module segfaults in a process that has loaded TensorFlow (seen Dec 6 with torch "
    "2.14.1+cu130 and TensorFlow 2.21). Install the CPU wheel (pip install torch --index-url "
    "https://download.pytorch.org/whl/cpu) or run `pip uninstall triton`, then run again."
)


def torch_worker(args) -> dict:
    if importlib.util.find_spec("triton") is not None:
        raise SystemExit(TRITON_BESIDE_TENSORFLOW)
    import keras
    import numpy as np
    import tensorflow as tf
    import torch

    import fcn
    from fcn.classes import IGNORE_LABEL, VOC_CLASSES
    from fcn.data import eval_dataset, voc_pairs
    from fcn.device import auto_mixed_precision
    from fcn.layout import CROP_OFFSETS, INPUT_PAD, VGG_BLOCKS
    from fcn.metrics import ConfusionMatrix
    from fcn.preprocessing import MEAN_BGR
    from fcn.training.config import TrainConfig
    from fcn.training.phases import head_phase_over
    from fcn.training.rates import (
        HEAD_ENERGY_IMAGES,
        HEAD_RATE_MARGIN,
        HEAD_SCORE,
        head_input_energy,
        skip_kernel_lr_mults,
        stable_rate_factor,
    )
    from fcn.training.recipes import schedule_epochs
    from fcn.training.train import input_fn

    torch.set_num_threads(os.cpu_count())
    clock = Clock(args.minutes, args.every)
    overrides = _overrides(args.set)
    config = TrainConfig(**overrides)
    precision = config.mixed_precision
    precision = auto_mixed_precision() if precision == "auto" else precision
    bf16 = precision == "mixed_bfloat16"
    recipe = config.effective_recipe()
    train_ids, holdout_ids = split(args.voc)
    files, holdout = voc_pairs(args.voc, train_ids), voc_pairs(args.voc, holdout_ids)

    keras.utils.set_random_seed(args.seed)  # fcn.train's initial weights, copied
    source = fcn.build_model("fcn8s", weights=args.weights, dropout=config.dropout)
    geometry = {"pad": INPUT_PAD, "blocks": VGG_BLOCKS, "offsets": CROP_OFFSETS["fcn8s"]}
    model = torch_fcn8s(geometry, channel_dropout=False, dropout=config.dropout)
    modules = model.named_layers()
    with torch.no_grad():
        for name, module in modules.items():
            layer = source.get_layer(name)
            kernel = np.asarray(layer.kernel).transpose(3, 2, 0, 1)  # HWIO/HWOI -> OIHW/IOHW
            module.weight.copy_(torch.from_numpy(np.ascontiguousarray(kernel)))
            module.weight.requires_grad_(layer.trainable)
            if module.bias is not None:
                module.bias.copy_(torch.from_numpy(np.asarray(layer.bias)))
    check = np.random.default_rng(0).uniform(0, 255, (1, 96, 96, 3)).astype("float32")
    fc7 = keras.Model(source.input, source.get_layer("fc7").output)  # the score layers are 0
    expected = np.asarray(fc7(check)).transpose(0, 3, 1, 2)
    mults = skip_kernel_lr_mults(source)  # and the frozen blocks: fcn.train's for this body
    first = input_fn(files, recipe, args.seed)(tf.distribute.InputContext())  # fcn.train's
    first = [images for images, _ in first.take(-(-HEAD_ENERGY_IMAGES // recipe.batch_size))]
    energy = np.mean([head_input_energy(source, images) for images in first])  # equal batches
    classes = source.get_layer(HEAD_SCORE).filters
    mults[HEAD_SCORE] = stable_rate_factor(
        energy, recipe.learning_rate, recipe.momentum, classes, margin=HEAD_RATE_MARGIN
    )
    frozen = set(recipe.frozen_layers())
    for name, module in modules.items():
        if name in frozen:
            module.weight.requires_grad_(False)
            module.bias.requires_grad_(False)
    del source
    mean = torch.tensor(MEAN_BGR).view(1, 3, 1, 1)

    def to_input(images: np.ndarray) -> torch.Tensor:  # RGB 0..255 NHWC -> Caffe BGR NCHW
        x = torch.from_numpy(np.ascontiguousarray(images[..., ::-1])).float().permute(0, 3, 1, 2)
        return (x - mean).contiguous(memory_format=torch.channels_last)

    model = model.to(memory_format=torch.channels_last).eval()
    with torch.no_grad():  # the same net: fc7 agrees to float32 rounding
        got = model.features(to_input(check))[0].numpy()
    agreement = float(np.abs(got - expected).max() / np.abs(expected).max())
    groups = []
    for name, module in modules.items():
        if not module.weight.requires_grad and name not in frozen:  # fixed upsampling
            continue
        mult = mults.get(name, 1.0)
        if mult != 1.0:  # Caffe's factor on the loss gradient, not on the decay
            module.weight.register_hook(lambda g, m=mult: g * m)
        body = recipe.body_rate if name in frozen else 1.0  # CaffeSGD's layer_lr_mults
        groups.append({"params": [module.weight], "weight_decay": 5e-4, "lr_mult": body})
        if module.bias is not None:
            groups.append({"params": [module.bias], "weight_decay": 0.0, "lr_mult": 2.0 * body})
    per_epoch = config.steps_per_epoch or len(files) // recipe.batch_size
    total = (config.epochs or schedule_epochs(recipe, per_epoch)) * per_epoch  # fcn.train's
    for group in groups:
        group["lr"] = recipe.learning_rate * group["lr_mult"]
    optimizer = torch.optim.SGD(groups, lr=recipe.learning_rate, momentum=recipe.momentum)
    power = recipe.poly_power or 0.0
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: max(0.0, 1 - step / total) ** power
    )
    loss_fn = torch.nn.CrossEntropyLoss(ignore_index=IGNORE_LABEL)
    autocast = torch.autocast("cpu", torch.bfloat16, enabled=bf16)
    holdout_data = eval_dataset(holdout)

    def evaluate():
        model.eval()
        matrix = ConfusionMatrix(len(VOC_CLASSES))
        with torch.inference_mode(), autocast:
            for image, label in holdout_data.as_numpy_iterator():
                logits = model(to_input(image[None]))
                matrix.update(label, logits.argmax(1)[0].numpy())
        model.train()
        return scores_of(matrix, VOC_CLASSES)

    data = input_fn(files, recipe, args.seed)(tf.distribute.InputContext()).as_numpy_iterator()
    model.train()
    steps, losses, switched = 0, [], None
    while not clock.done() and steps < total:  # as fcn.train: the schedule's steps at most
        if config.unfreeze == "auto" and frozen and switched is None and not steps % per_epoch:
            if head_phase_over([], steps, total, recipe.batch_size):  # at fcn's epoch start
                for name in frozen:  # their groups are in the optimizer: now they get gradients
                    modules[name].weight.requires_grad_(True)
                    modules[name].bias.requires_grad_(True)
                switched = steps
        images, labels = next(data)
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            logits = model(to_input(images))
        loss = loss_fn(logits.float(), torch.from_numpy(labels.astype(np.int64)))
        loss.backward()
        optimizer.step()
        schedule.step()
        steps += 1
        losses.append(loss.item())
        if clock.due() or steps == total:
            clock.record(evaluate, losses, recipe.batch_size)
    return {"framework": "torch", "precision": precision, "agreement": agreement,
            "score_fr_energy": energy, "score_fr_rate_factor": mults[HEAD_SCORE],
            "points": clock.points, "settings": {"batch_size": recipe.batch_size,
            "learning_rate": recipe.learning_rate, "crop_size": recipe.crop_size, "seed": args.seed,
            "total_steps": total, "frozen": sorted(frozen), "unfrozen_at_step": switched,
            "trainable_params": sum(p.numel() for p in model.parameters() if p.requires_grad),
            }}  # fmt: skip


def step_cost(frozen: int, crop: int, batch: int, policy: str | None) -> dict:
    """Seconds per training crop of the full FCN-8s with ``frozen`` VGG blocks frozen: the step
    ``fcn.train`` runs (:func:`fcn.training.train.compile_for_training`,
    :func:`fcn.training.loop.train_step`),
    fastest of 3 after one traced step, on one constant batch (no input pipeline)."""
    import keras
    import numpy as np
    import tensorflow as tf

    import fcn
    from fcn.training.loop import train_step
    from fcn.training.recipes import RECIPES
    from fcn.training.train import compile_for_training

    if policy:
        keras.mixed_precision.set_global_policy(policy)
    model = fcn.build_model("fcn8s", weights=None)
    recipe = dataclasses.replace(RECIPES["practical"], frozen_blocks=frozen)
    compile_for_training(model, recipe, total_batches=1000, pretrained=True)  # freezes
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (batch, crop, crop, 3), dtype=np.uint8)
    labels = rng.integers(0, 21, (batch, crop, crop), dtype=np.uint8)
    batches = iter(tf.data.Dataset.from_tensors((images, labels)).repeat())
    step = train_step(model, tf.distribute.get_strategy())
    float(step(batches))
    times = []
    for _ in range(3):
        start = time.perf_counter()
        float(step(batches))
        times.append(time.perf_counter() - start)
    return {"frozen_blocks": frozen, "crop": crop, "batch": batch, "policy": policy,
            "s_per_crop": min(times) / batch}  # fmt: skip


def minutes_to(points: list[dict], level: float) -> str:
    """Training minutes at which hold-out mean IoU first reaches ``level``: linear between the
    two evaluation points around it; ``<=t`` where the first point already had it (nothing was
    measured before), ``-`` where no point did."""
    previous = None
    for point in points:
        if point["mean_iou"] >= level:
            if previous is None:
                return f"<={point['minutes']:.1f}"
            t0, v0 = previous["minutes"], previous["mean_iou"]
            t1, v1 = point["minutes"], point["mean_iou"]
            return f"{t0 + (level - v0) / (v1 - v0) * (t1 - t0):.1f}"
        previous = point
    return "-"


def levels_table(runs: list[dict], levels: list[float]) -> str:
    """A markdown table: one row per run, the minutes it took to reach each of ``levels``."""
    rows = [
        "| run | " + " | ".join(f"{level:g}" for level in levels) + " |",
        "|---|" + "---:|" * len(levels),
    ]
    for run in runs:
        cells = (minutes_to(run["points"], level) for level in levels)
        rows.append(f"| {run['label']} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def plot(runs: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for run in runs:
        points = run["points"]
        for ax, x in zip(axes, ("minutes", "images")):
            ax.plot([p[x] for p in points], [p["mean_iou"] for p in points], marker="o",
                    label=run["label"])  # fmt: skip; measured points only: no IoU at minute 0
    axes[0].set_xlabel("training wall-clock minutes (evaluation excluded)")
    axes[1].set_xlabel("training images seen (crops)")
    axes[0].set_ylabel("hold-out mean IoU (30 real VOC images)")
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.set_xlim(left=0)
    axes[0].legend(fontsize=8)
    fig.suptitle(runs[0]["machine"], fontsize=9)
    fig.savefig(path, dpi=100, bbox_inches="tight")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--voc", default=str(VOC148), help="a VOC root with a train split")
    parser.add_argument("--weights", default=str(WEIGHTS), help="the Keras VGG16 notop file")
    parser.add_argument("--minutes", type=float, default=30, help="training time per framework")
    parser.add_argument("--every", type=float, default=5, help="minutes between evaluations")
    parser.add_argument("--frameworks", nargs="+", default=["fcn", "torch"])
    parser.add_argument("--set", nargs="*", default=[], help="TrainConfig overrides key=value")
    parser.add_argument("--label", default="", help="a name for this recipe in the plot")
    parser.add_argument("--fc-init", choices=("glorot", "pass-through"), default="glorot",
                        help="fcn only, a screen: fc6/fc7 as fcn.train draws them, or "
                        "pass_through_fc's")  # fmt: skip
    parser.add_argument("--json", default="time_to_accuracy.json", help="appended to")
    parser.add_argument("--figure", help="this run's curves, every framework on one plot "
                        f"(default, for a run: {FIGURE})")  # fmt: skip
    parser.add_argument("--step-costs", nargs="+", type=int, metavar="FROZEN",
                        help="instead: seconds per crop of a training step with these "
                        "frozen_blocks, at --crop and --batch, each in a fresh process")
    parser.add_argument("--crop", type=int, default=320, help="--step-costs' crop")
    parser.add_argument("--batch", type=int, default=4, help="--step-costs' batch")
    parser.add_argument("--policy", default="mixed_bfloat16", help="--step-costs' precision")
    parser.add_argument("--levels", nargs="+", type=float, metavar="IOU",
                        help="instead: minutes each run of --json labelled --label (every "
                        "framework) took to reach these hold-out mean IoUs")  # fmt: skip
    parser.add_argument("--replot", action="store_true",
                        help="instead: redraw --figure from the runs of --json labelled --label")
    parser.add_argument("--seed", type=int, default=0, help="fc6/fc7's draw and the crops' "
                        "order and augmentation, the same on every framework")  # fmt: skip
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker == "step":
        print(json.dumps(step_cost(args.step_costs[0], args.crop, args.batch, args.policy)))
        return
    if args.worker:
        run = fcn_worker(args) if args.worker == "fcn" else torch_worker(args)
        print(json.dumps(run))
        return
    if args.levels or args.replot:
        runs = json.loads(Path(args.json).read_text())
        mine = [run for run in runs if run["label"] == f"{run['framework']} {args.label}".strip()]
        if not mine:
            sys.exit(f"{args.json} has no run labelled {args.label!r} (its --label)")
        if args.levels:
            print(levels_table(mine, args.levels))
        if args.replot:
            if not args.figure:  # the default is a committed run's figure: never overwritten so
                sys.exit("--replot needs --figure PATH: where to draw the runs labelled --label")
            plot(mine, Path(args.figure))
        return
    if args.step_costs:
        for frozen in args.step_costs:
            command = [sys.executable, __file__, "--step-costs", str(frozen), "--crop",
                       str(args.crop), "--batch", str(args.batch), "--policy", args.policy,
                       "--worker", "step"]  # fmt: skip
            run = subprocess.run(command, stdout=subprocess.PIPE, text=True,
                                 env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})  # fmt: skip
            print(run.stdout.strip().splitlines()[-1], flush=True)
        return
    if not Path(args.voc).exists() or not Path(args.weights).exists():
        sys.exit(f"needs {args.voc} and {args.weights} (the shared real data and weights)")
    if "seed" in _overrides(args.set):
        sys.exit("--set seed=N would seed fcn alone: pass --seed N (every framework)")
    if args.fc_init != "glorot" and "torch" in args.frameworks:
        sys.exit("--fc-init is a screen of fcn's initialisation: pass --frameworks fcn")
    from fcn.device import cpu_summary

    machine = cpu_summary()
    print(f"# {machine}", flush=True)
    path = Path(args.json)
    runs = json.loads(path.read_text()) if path.exists() else []
    made = []
    for framework in args.frameworks:
        command = [sys.executable, __file__, *sys.argv[1:], "--worker", framework]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
        run = subprocess.run(command, stdout=subprocess.PIPE, text=True, env=env)
        if run.returncode:
            sys.exit(f"{framework} worker failed ({run.returncode})")
        row = json.loads(run.stdout.strip().splitlines()[-1])
        label = f"{framework} {args.label}".strip()
        row.update(label=label, machine=machine, date=time.strftime("%Y-%m-%d %H:%M UTC",
                   time.gmtime()), overrides=args.set, holdout=split(args.voc)[1])  # fmt: skip
        runs.append(row)
        made.append(row)
        path.write_text(json.dumps(runs, indent=1))
        last = row["points"][-1] if row["points"] else {}
        print(json.dumps({"label": label, "minutes": last.get("minutes"),
                          "mean_iou": last.get("mean_iou"),
                          "objects_above_0.2": last.get("objects_above_0.2")}), flush=True)
    plot(made, Path(args.figure or FIGURE))  # one CPU, one recipe: earlier runs are in --json


if __name__ == "__main__":
    main()
