"""The FCN paper's table, one script: FCN-32s, FCN-16s from it, FCN-8s from that, and the
at-once FCN-8s, trained by ``fcn.train`` on SBD's train_aug and scored on seg11valid.

Each stage ([`STAGES`][]) is one ``fcn.train`` call with the ``paper`` recipe (one whole image
per step, SGD momentum 0.99, a fixed rate, every layer trained; float32, as the reference's
Caffe: TensorFlow's TF32 on Ampere and later GPUs), in its own run directory
``RUN_DIR/<stage>``: FCN-32s and the at-once net from the ImageNet VGG16 weights (``--weights``,
``fcn.train``'s default), FCN-16s and FCN-8s from the previous stage's ``best.keras``
(``init_from``) at the reference solvers' lower rates (1e-12 and 1e-14 per summed pixel against
FCN-32s' 1e-10: the recipe's rate times ``rate_factor``). The schedule is the reference's:
Caffe's ``solve.py`` steps a net 4,000 iterations at a time and pytorch-fcn trains each net
100,000 iterations of one image, so a stage is 25 epochs of 4,000 images, validated on
seg11valid after each (pytorch-fcn's ``interval_validate``). Then ``fcn.evaluate`` scores the
stage's ``best.keras`` on seg11valid at full resolution, printed beside the figure its authors
published (``fcn.presets``).

Resumable: run the same command again and every stage continues from its last completed epoch
(``fcn.train``'s ``resume``); a finished stage is only scored again. Several GPUs: the script
uses them all (``fcn.train``'s strategy; several machines: ``TF_CONFIG``), one image per GPU a
step and 4,000 / N steps an epoch, so each net still sees the reference's 100,000 images; the
gradient of a step then averages N images at the same rate (the reference's steps had one).
Before training it prints the expected hours per stage on named GPUs, from the FLOPs of a
500x375 VOC image at an assumed share of each GPU's dense peak ([`GPU_PEAKS`][],
[`ASSUMED_SHARE`][]): an estimate, not a measurement.

    python benchmarks/reproduce_paper.py VOCdevkit/VOC2012 benchmark_RELEASE --run-dir runs/paper
    python benchmarks/reproduce_paper.py VOC SBD --run-dir runs/paper --stages fcn32s  # one stage
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

import fcn
from fcn.presets import PRESETS
from fcn.training import distribute
from fcn.training.recipes import PAPER_SCHEDULE_IMAGES, RECIPES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_pytorch import forward_flops  # noqa: E402


@dataclass(frozen=True)
class Stage:
    """One net of the table: its variant, what initialises it, its published model."""

    name: str
    variant: str
    init_from: str | None  # a previous stage's name, else the VGG16 weights
    rate_factor: float  # times the paper recipe's learning rate
    preset: str  # its published figure: fcn.presets.PRESETS[preset].accuracy


STAGES = (
    Stage("fcn32s", "fcn32s", None, 1.0, "fcn32s-voc"),
    Stage("fcn16s", "fcn16s", "fcn32s", 1e-2, "fcn16s-voc"),
    Stage("fcn8s", "fcn8s", "fcn16s", 1e-4, "fcn8s-voc"),
    Stage("fcn8s_atonce", "fcn8s_atonce", None, 1.0, "fcn8s-atonce-voc"),
)
"""The paper's staged nets in order, then the at-once net."""

IMAGES_PER_EPOCH = 4000
EPOCHS = PAPER_SCHEDULE_IMAGES // IMAGES_PER_EPOCH
"""The paper's 100,000 iterations of one image per net (pytorch-fcn too) in Caffe's solve.py
rounds of 4,000 steps, validated after each round: 25."""

GPU_PEAKS = {"NVIDIA A100 (TF32)": 156e12, "NVIDIA H100 SXM (TF32)": 495e12,
             "NVIDIA V100 (fp32)": 15.7e12}  # fmt: skip
"""Dense peak FLOP/s of the precision TensorFlow uses for float32 convolutions on each GPU
(TF32 tensor cores on Ampere and later, by default), from NVIDIA's data sheets."""

ASSUMED_SHARE = 0.3
"""The share of that peak assumed for a batch-1 FCN training step (not measured: no GPU with
TensorFlow was available when this was written)."""


def expected_hours(size: tuple[int, int] = (375, 500)) -> dict[str, float]:
    """Hours of one stage's training steps on each of [`GPU_PEAKS`][]: ``EPOCHS *
    IMAGES_PER_EPOCH`` images of 3 forward passes' FLOPs (forward and backward) of a ``size``
    image, at [`ASSUMED_SHARE`][] of the peak; validation not counted."""
    model = fcn.build_model("fcn8s", weights=None)
    flops = forward_flops(model, *size)
    total = EPOCHS * IMAGES_PER_EPOCH * 3 * flops
    return {gpu: total / (peak * ASSUMED_SHARE) / 3600 for gpu, peak in GPU_PEAKS.items()}


def run_stage(stage: Stage, args: argparse.Namespace, strategy, val) -> dict:
    """Train ``stage`` (or continue it) under ``strategy`` and score its best checkpoint on
    ``val`` (seg11valid's files)."""
    run_dir = Path(args.run_dir) / stage.name
    steps = -(-args.images_per_epoch // strategy.num_replicas_in_sync)  # one image per replica
    if stage.init_from is None:
        init = {"weights": None if args.weights == "none" else args.weights}
    else:  # the previous stage's layers, nothing of VGG16's
        init = {"init_from": Path(args.run_dir) / stage.init_from / "best.keras", "weights": None}
    result = fcn.train(
        args.voc_root, sbd_root=args.sbd_root, run_dir=run_dir, variant=stage.variant,
        recipe="paper", learning_rate=RECIPES["paper"].learning_rate * stage.rate_factor,
        epochs=args.epochs, steps_per_epoch=steps, resume=True, width=args.width,
        mixed_precision=None, val_files=val, strategy=strategy, verbose=args.verbose, **init,
    )  # fmt: skip
    if result.failure:
        raise SystemExit(f"{stage.name} stopped: {result.failure}")
    best = fcn.load_model(result.best_checkpoint)
    dataset = fcn.data.eval_dataset(val, num_classes=best.output_shape[-1])
    scores = fcn.evaluate(best, dataset, precision="float32")
    return {"stage": stage.name, "variant": stage.variant, "mean_iou": scores.mean_iou,
            "published": PRESETS[stage.preset].accuracy, "run_dir": str(run_dir)}  # fmt: skip


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("voc_root", help="VOC 2012 (VOCdevkit/VOC2012)")
    parser.add_argument("sbd_root", help="SBD (benchmark_RELEASE)")
    parser.add_argument("--run-dir", required=True, help="one run directory per stage in it")
    parser.add_argument("--weights", default="imagenet",
                        help="imagenet (fcn.train's default), a Keras VGG16 weights file, none")
    names = [s.name for s in STAGES]
    parser.add_argument("--stages", nargs="+", choices=names, default=names,
                        help="stages to run, in order")  # fmt: skip
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--images-per-epoch", type=int, default=IMAGES_PER_EPOCH)
    parser.add_argument("--width", type=float, default=1.0, help="1/16 for a toy run")
    parser.add_argument("--verbose", default="auto", type=lambda v: v if v == "auto" else int(v),
                        help="fcn.train's verbose: auto, 0, 1 or 2")  # fmt: skip
    parser.add_argument("--json", help="write the table here")
    args = parser.parse_args(argv)
    strategy = distribute.choose_strategy()  # before TensorFlow runs anything else
    val = fcn.data.seg11valid_pairs(args.voc_root)
    for gpu, hours in expected_hours().items():
        share = f"{ASSUMED_SHARE:.0%}"
        print(f"# expected per stage on {gpu}: {hours:.1f} h of training steps (estimate: "
              f"{share} of its peak, validation aside)", flush=True)  # fmt: skip
    rows = [run_stage(s, args, strategy, val) for s in STAGES if s.name in args.stages]
    print("| stage | mean IU, this run | published (fcn.berkeleyvision.org) |")
    print("|---|---:|---|")
    for row in rows:
        print(f"| {row['stage']} | {100 * row['mean_iou']:.1f} | {row['published']} |")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return rows


if __name__ == "__main__":
    main()
