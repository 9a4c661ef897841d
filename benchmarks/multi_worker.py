"""Issue 14: training images/s through Keras' ``fit`` and through ``fcn.training.loop``'s loop,
in one process and as one or two workers of a MultiWorkerMirroredStrategy cluster on 127.0.0.1.

Every process is pinned to one core (``sched_setaffinity``, one intra- and one inter-op thread),
so on this 2-core machine two workers do twice the work in parallel: their figure against one
worker's is the cost of the collectives, not a speed-up to expect from more cores. Each run
trains a width-reduced FCN-8s (``--width``) on fixed crops (``--crop``, ``--batch`` per worker,
no augmentation: the input pipeline is not what is measured) of a synthetic VOC folder through
the same input function as ``fcn.train``; the first epoch (tracing) is not timed, the second
(``--steps`` steps) is. Cells run one after another in fresh processes, ``--rounds`` times
interleaved; medians are printed.

    python benchmarks/multi_worker.py [--width 0.25] [--crop 224] [--batch 2] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
CELLS = ("fit, 1 process", "loop, 1 process", "loop, 1 worker", "loop, 2 workers")


def worker(cell: str, args) -> dict:
    """One process of ``cell`` (a worker reads its ``TF_CONFIG``): build, compile as fcn.train
    does, train 2 epochs, time the 2nd."""
    index = json.loads(os.environ.get("TF_CONFIG") or "{}").get("task", {}).get("index", 0)
    os.sched_setaffinity(0, {index % os.cpu_count()})
    import dataclasses

    import keras
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    import fcn
    from fcn.device import cpu_summary
    from fcn.training import distribute, loop
    from fcn.training.recipes import RECIPES
    from fcn.training.train import compile_for_training, input_fn

    strategy = (
        tf.distribute.MultiWorkerMirroredStrategy()
        if "worker" in cell
        else tf.distribute.get_strategy()
    )
    workers = strategy.num_replicas_in_sync
    recipe = dataclasses.replace(
        RECIPES["practical"], crop_size=args.crop, batch_size=args.batch * workers, augment=False
    )
    files = fcn.data.voc_pairs(args.data, "train")
    with strategy.scope():
        model = fcn.build_model("fcn8s", weights=None, width=args.width, dropout=0.0)
        compile_for_training(model, recipe, 2 * args.steps, pretrained=False)
    if workers > 1:
        distribute.sync_from_chief(strategy, [*model.weights, *model.optimizer.variables])
    dataset = strategy.distribute_datasets_from_function(input_fn(files, recipe, 0))

    class Clock(keras.callbacks.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            self.start = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds = time.perf_counter() - self.start

    clock = Clock()
    schedule = {
        "epochs": 2, "initial_epoch": 0, "steps_per_epoch": args.steps, "callbacks": [clock],
        "verbose": 0,
    }  # fmt: skip
    if cell.startswith("fit"):
        model.fit(dataset, **schedule)
    else:
        loop.fit(model, strategy, dataset, **schedule)
    images = args.steps * recipe.batch_size
    return {"cell": cell, "images_per_s": images / clock.seconds,
            "step_s": clock.seconds / args.steps, "cpu": cpu_summary()}  # fmt: skip


def run_cell(cell: str, args) -> dict:
    from fcn.training.distribute import local_cluster

    configs = local_cluster(2 if cell.endswith("2 workers") else 1) if "worker" in cell else [None]
    plain = {k: v for k, v in os.environ.items() if k != "TF_CONFIG"}
    processes = [
        subprocess.Popen(
            [sys.executable, __file__, "--worker", cell, "--data", args.data,
             "--width", str(args.width), "--crop", str(args.crop), "--batch", str(args.batch),
             "--steps", str(args.steps)],
            stdout=subprocess.PIPE, text=True,
            env={**plain, "TF_CONFIG": config} if config else plain,
        )  # fmt: skip
        for config in configs
    ]
    rows = [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in processes]
    return rows[0]  # the chief's clock: every worker waits for the others at each step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", metavar="CELL", help="run one process of CELL")
    parser.add_argument("--data", help="a VOC-layout folder (default: a synthetic one, made)")
    parser.add_argument("--width", type=float, default=0.25)
    parser.add_argument("--crop", type=int, default=224)
    parser.add_argument("--batch", type=int, default=2, help="crops per worker per step")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args)))
        return
    if args.data is None:
        from fcn.data import write_synthetic_voc

        args.data = str(write_synthetic_voc(tempfile.mkdtemp(), 64, shapes=[(args.crop,) * 2]))
    results: dict[str, list[dict]] = {cell: [] for cell in CELLS}
    for _ in range(args.rounds):
        for cell in CELLS:
            results[cell].append(run_cell(cell, args))
            print(json.dumps(results[cell][-1]), flush=True)
    print(results[CELLS[0]][0]["cpu"])
    print(f"| cell | images/s (median of {args.rounds}) | s per step |")
    print("|---|---:|---:|")
    for cell in CELLS:
        rate = statistics.median(r["images_per_s"] for r in results[cell])
        step = statistics.median(r["step_s"] for r in results[cell])
        print(f"| {cell} | {rate:.2f} | {step:.3f} |")


if __name__ == "__main__":
    main()
