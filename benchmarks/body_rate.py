"""The second phase's body rate on small data: from a model trained in the head phase, the same
steps of every layer at each body rate, beside the head alone, scored on the hold-out.

``unfreeze="auto"`` trains every layer once the head has learned ([`fcn.training.phases`][]);
the VGG convolutions then train at ``body_rate`` times the schedule's rate
([`fcn.training.recipes.Recipe.body_rate`][]). This screen takes a head-phase checkpoint of the
118 training images of ``time_to_accuracy.py``'s split (``--checkpoint``: a ``.keras`` file of a
run of ``fcn.train``'s defaults), puts the schedule where the switch puts it (``--at`` of
``--total`` batches: the poly rate there), and for each arm trains ``--steps`` batches on the
same crops in the same order (``fcn.train``'s input pipeline, ``--seed``) from a fresh copy of
those weights and a fresh momentum: ``head`` (the body frozen, as ``unfreeze="never"``) and one
arm per ``--rates`` value (every layer, the body at that share of the rate). Each arm's
hold-out mean IoU (``fcn.evaluate``, full resolution, the split's 30 images), training losses
and seconds per step go to ``--json``. With ``--minutes``, each arm trains that long instead
(at most ``--steps`` batches): the head alone then takes more batches than every layer.

    python benchmarks/body_rate.py --checkpoint RUN_DIR/epoch-0011.keras --rates 1 0.1 0.01
    python benchmarks/body_rate.py --checkpoint RUN_DIR/epoch-0011.keras --rates 0.1 \
        --minutes 20 --steps 100000
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time
from pathlib import Path

from convergence import LossRecorder
from time_to_accuracy import VOC148, scores_of, split


class Budget(LossRecorder):
    """Every step's loss (``values``); stops training after ``seconds`` (None: never)."""

    def __init__(self, seconds: float | None):
        super().__init__()
        self.seconds, self.began = seconds, time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        super().on_train_batch_end(batch, logs)
        if self.seconds is not None and time.perf_counter() - self.began >= self.seconds:
            self.model.stop_training = True


def arm(source, rate: float | None, args, files, holdout) -> dict:
    """``args.steps`` batches (fewer where ``args.minutes`` of training end first) from
    ``source``'s weights: the head alone (``rate`` None) or every layer with the body at
    ``rate``; the hold-out scores after them."""
    import dataclasses

    import keras
    import tensorflow as tf

    import fcn
    from fcn.classes import VOC_CLASSES
    from fcn.data import eval_dataset
    from fcn.training import loop
    from fcn.training.phases import set_trainable
    from fcn.training.rates import HEAD_SCORE, caffe_sgd
    from fcn.training.recipes import RECIPES
    from fcn.training.train import compile_for_training, input_fn

    recipe = dataclasses.replace(RECIPES["practical"], body_rate=rate or 1.0)
    keras.utils.set_random_seed(args.seed)
    model = fcn.build_model("fcn8s", weights=None, dropout=0.5)
    model.set_weights(source.get_weights())
    compile_for_training(model, recipe, args.total, unfreeze=rate is not None)
    optimizer = caffe_sgd(model)
    optimizer.rate_factors[HEAD_SCORE].assign(source.optimizer.rate_factors[HEAD_SCORE])
    optimizer.iterations.assign(args.at)
    if rate is not None:
        set_trainable(model, recipe.frozen_layers(), True)
    data = input_fn(files, recipe, args.seed)(tf.distribute.InputContext())
    losses = Budget(None if args.minutes is None else args.minutes * 60)
    loop.fit(model, tf.distribute.get_strategy(), data, epochs=1, initial_epoch=0,
             steps_per_epoch=args.steps, callbacks=[losses], verbose=0)  # fmt: skip
    seconds = time.perf_counter() - losses.began
    result = fcn.evaluate(model, eval_dataset(holdout), precision=None)
    out = {"arm": "head" if rate is None else f"body_rate={rate:g}", "steps": len(losses.values),
           "seconds": seconds, "seconds_per_step": seconds / len(losses.values),
           "losses": losses.values,
           **scores_of(result.matrix, VOC_CLASSES)}  # fmt: skip
    print(json.dumps({k: v for k, v in out.items() if k not in ("losses", "class_iou")}),
          file=sys.stderr, flush=True)  # fmt: skip
    del model
    keras.backend.clear_session()
    gc.collect()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", required=True, help="a head-phase .keras of fcn.train")
    parser.add_argument("--voc", default=str(VOC148), help="a VOC root with a train split")
    parser.add_argument("--rates", nargs="+", type=float, default=[1.0, 0.1],
                        help="body rates, one arm each, beside the head alone")
    parser.add_argument("--steps", type=int, default=40, help="batches per arm (at most)")
    parser.add_argument("--minutes", type=float,
                        help="training minutes per arm: equal time, not equal batches")
    parser.add_argument("--at", type=int, default=1500,
                        help="the schedule's batch at the switch (half of 50 epochs on 118 images)")
    parser.add_argument("--total", type=int, default=2950, help="the schedule's batches")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default="body_rate.json", help="appended to")
    args = parser.parse_args()

    import keras

    import fcn
    import fcn.training.optimizer  # noqa: F401  (registers CaffeSGD for the checkpoint)
    from fcn.classes import VOC_CLASSES
    from fcn.data import eval_dataset, voc_pairs

    train_ids, holdout_ids = split(args.voc)
    files, holdout = voc_pairs(args.voc, train_ids), voc_pairs(args.voc, holdout_ids)
    source = keras.saving.load_model(args.checkpoint)
    start = fcn.evaluate(source, eval_dataset(holdout), precision=None)
    run = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "checkpoint": str(Path(args.checkpoint).resolve()), "argv": sys.argv[1:],
           "kernels": os.environ.get("TF_ENABLE_ONEDNN_OPTS", "default"),
           "start": scores_of(start.matrix, VOC_CLASSES),
           "arms": [arm(source, rate, args, files, holdout)
                    for rate in [None, *args.rates]]}  # fmt: skip
    runs = json.loads(Path(args.json).read_text()) if Path(args.json).exists() else []
    Path(args.json).write_text(json.dumps([*runs, run], indent=1) + "\n")
    for result in run["arms"]:
        last = result["losses"][-10:]
        print(f"{result['arm']:>16}: mean IoU {result['mean_iou']:.3f} (from "
              f"{run['start']['mean_iou']:.3f}), loss of the last 10 steps "
              f"{sum(last) / len(last):.3f}, {result['seconds_per_step']:.1f} s/step")


if __name__ == "__main__":
    main()
