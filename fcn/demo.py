"""``fcn demo``: the whole product on the 20 real VOC images that ship with the package.

Trains a width-reduced FCN-8s (the paper's topology, 1/8 of its channels, random init: no
download), or with a VGG16 weights file the full FCN-8s from it, on the 12 train images, keeps
the best epoch by validation mean IoU, evaluates it with the streaming evaluator on the 8 val
images at full resolution, predicts them, and writes the metrics table, JSON and pictures to
an output folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import keras

from fcn import data, plots
from fcn.inference.evaluate import evaluate
from fcn.inference.model_files import load_model
from fcn.inference.predict import predict_files
from fcn.model import class_names
from fcn.training.checkpoint import read_log
from fcn.training.train import train

HONEST_NOTE = """\
What these numbers mean: this is a smoke run of the whole pipeline (train -> checkpoint ->
streaming evaluation -> prediction) on 12 training images for a few CPU minutes. Its mean IoU
says that everything runs end to end; it is not a measure of FCN accuracy. The real recipe
(VGG16 ImageNet init, train_aug, hours on a GPU) reaches about 65 mean IU on seg11valid:
`fcn train VOC_ROOT --sbd SBD_ROOT`."""


def smoke_settings(weights: str | os.PathLike | None) -> tuple[str, dict]:
    """What the demo and the notebooks train in a few CPU minutes: a sentence saying which
    model, and the :func:`fcn.train` arguments. Without ``weights``: a width-1/8 FCN-8s from
    a random initialisation at a from-scratch learning rate; with a Keras VGG16 weights file:
    the full FCN-8s from it at the default recipe's rate, batch 2.

    Examples:
        >>> smoke_settings(None)[0]
        'model: a width-1/8 FCN-8s from a random initialisation (no weights file given)'
    """
    if weights:
        used = f"model: the full FCN-8s, VGG16 convolutions from {os.fspath(weights)}"
        return used, {"weights": os.fspath(weights), "batch_size": 2}
    used = "model: a width-1/8 FCN-8s from a random initialisation (no weights file given)"
    return used, {"weights": None, "width": 1 / 8, "batch_size": 4, "learning_rate": 0.01}


def run_demo(
    out_dir: str | os.PathLike = "fcn-demo",
    *,
    epochs: int = 8,
    steps_per_epoch: int = 10,
    weights: str | os.PathLike | None = None,
) -> dict:
    """Run the demo into ``out_dir`` (replaced if it exists); returns the evaluation summary.

    Without ``weights``: a width-1/8 FCN-8s from a random initialisation (no download, a few
    minutes). With a Keras VGG16 weights file: the full FCN-8s from it, the default recipe's
    learning rate, batch 2 (about 10 minutes on 2 CPU cores). The output says which.

    Writes ``run/`` (checkpoints, log.csv, TensorBoard), ``metrics.txt``, ``metrics.json``,
    ``confusion.png``, ``training_curves.png``, ``predictions/<id>.png`` (VOC palette label maps)
    and ``predictions/<id>_compare.png`` (image / ground truth / prediction).

    Examples:
        >>> import tempfile
        >>> smoke_settings(None)[1]  # what it trains without weights (a few CPU minutes)
        {'weights': None, 'width': 0.125, 'batch_size': 4, 'learning_rate': 0.01}
        >>> run_demo(tempfile.mkdtemp(), weights="no-such-vgg16.h5")  # checked before training
        Traceback (most recent call last):
        FileNotFoundError: VGG16 weights file not found: no-such-vgg16.h5
    """
    out = Path(out_dir)
    shutil.rmtree(out, ignore_errors=True)
    root = data.sample_voc_root()
    val = data.voc_pairs(root, "val")
    used, settings = smoke_settings(weights)
    print(used, flush=True)
    keras.utils.set_random_seed(0)
    result = train(
        root, run_dir=out / "run", epochs=epochs, steps_per_epoch=steps_per_epoch,
        crop_size=224, val_every=max(1, epochs // 4), verbose=2, **settings,
    )  # fmt: skip
    model = result.model
    if result.best_checkpoint:
        model = load_model(result.best_checkpoint)
    scores = evaluate(model, data.eval_dataset(val))
    (out / "metrics.txt").write_text(f"{scores.table()}\n\n{used}\n{HONEST_NOTE}\n")
    scores.save_json(out / "metrics.json")
    scores.plot_confusion(out / "confusion.png")
    plots.plot_training_curves(read_log(out / "run"), out / "training_curves.png")
    (out / "predictions").mkdir()
    for (image_path, prediction), label_path in zip(predict_files(val.images, model), val.labels):
        data.write_label(out / "predictions" / f"{image_path.stem}.png", prediction)
        plots.plot_segmentation(
            data.read_image(image_path), prediction, data.read_label(label_path),
            class_names(model), path=out / "predictions" / f"{image_path.stem}_compare.png",
        )  # fmt: skip
    print(scores.table())
    print(f"\n{used}\n{HONEST_NOTE}\n\nEverything is in {out.resolve()}")
    return scores.summary()
