"""``fcn demo``: the whole product on the 20 real VOC images that ship with the package.

Real segmentation whenever it can be had: where the paper's FCN-8s ([`DEFAULT_MODEL`][]) is
cached or can be downloaded, the demo scores it on the 8 val images (all of them in the paper's
held-out seg11valid: it never trained on them) with the streaming evaluator at full resolution,
predicts them and says so. Offline, or with ``smoke=True``, it runs the smoke training instead
and says why: a width-reduced FCN-8s (the paper's topology, 1/8 of its channels, random init),
or with a VGG16 weights file the full FCN-8s from it, trained on the 12 train images, the best
epoch by validation mean IoU evaluated and predicted the same way. Either way the metrics
table, JSON and pictures go to an output folder.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import keras

from fcn import data, plots
from fcn.inference.evaluate import evaluate
from fcn.inference.model_files import ModelUnavailableError, known_model_path, load_model
from fcn.inference.predict import predict_files
from fcn.model import class_names
from fcn.presets import DEFAULT_MODEL, PRESETS
from fcn.training.checkpoint import read_log
from fcn.training.train import train

PAPER_NOTE = f"""\
What these numbers mean: the FCN authors' trained {DEFAULT_MODEL}
(published: {PRESETS[DEFAULT_MODEL].accuracy}, 736 images), scored on the 8 val images
that ship with fcn, all in seg11valid, so never seen in its training. Eight images make a noisy
score (a class absent from them scores nothing); `fcn evaluate {DEFAULT_MODEL} VOC_ROOT` scores
VOC 2012 val (which, unlike seg11valid, overlaps the SBD images it trained on)."""

HONEST_NOTE = """\
What these numbers mean: this is a smoke run of the whole pipeline (train -> checkpoint ->
streaming evaluation -> prediction) on 12 training images for a few CPU minutes. Its mean IoU
says that everything runs end to end; it is not a measure of FCN accuracy. The FCN authors'
staged FCN-8s (VGG16 ImageNet init, SBD train_aug, days on a GPU) scored 65.5 mean IU on
seg11valid: their figure. fcn's own defaults were measured on CPUs and 118 VOC images only
(benchmarks/README.md); `python benchmarks/reproduce_paper.py VOC_ROOT SBD_ROOT --run-dir RUNS`
trains the paper's table with fcn on a GPU, and `fcn train VOC_ROOT --sbd SBD_ROOT` the
defaults."""


def smoke_settings(weights: str | os.PathLike | None) -> tuple[str, dict]:
    """What the demo and the notebooks train in a few CPU minutes: a sentence saying which
    model, and the [`fcn.train`][] arguments. Without ``weights``: a width-1/8 FCN-8s from
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
    smoke: bool = False,
    epochs: int = 8,
    steps_per_epoch: int = 10,
    weights: str | os.PathLike | None = None,
) -> dict:
    """Run the demo into ``out_dir`` (replaced if it exists); returns the evaluation summary.

    The paper's FCN-8s where [`fcn.inference.model_files.known_model_path`][] has it (placed,
    cached, or downloaded now and converted once: about 540 MB) and neither ``smoke`` nor
    ``weights`` asks for training; if it cannot be had, the smoke training, saying why. The
    smoke training without ``weights``: a width-1/8 FCN-8s from a random initialisation (no
    download, a few minutes) for ``epochs`` of ``steps_per_epoch``; with a Keras VGG16 weights
    file: the full FCN-8s from it, the default recipe's learning rate, batch 2 (about 10
    minutes on 2 CPU cores). The output says which model it scored.

    Writes ``metrics.txt``, ``metrics.json``, ``confusion.png``, ``predictions/<id>.png`` (VOC
    palette label maps) and ``predictions/<id>_compare.png`` (image / ground truth /
    prediction); a smoke training also ``run/`` (checkpoints, log.csv, TensorBoard) and
    ``training_curves.png``.

    Examples:
        >>> import tempfile
        >>> smoke_settings(None)[1]  # what it trains without weights (a few CPU minutes)
        {'weights': None, 'width': 0.125, 'batch_size': 4, 'learning_rate': 0.01}
        >>> run_demo(tempfile.mkdtemp(), weights="no-such-vgg16.h5")  # checked before training
        Traceback (most recent call last):
        FileNotFoundError: VGG16 weights file not found: no-such-vgg16.h5
    """
    out = Path(out_dir)
    root = data.sample_voc_root()
    val = data.voc_pairs(root, "val")
    paper = None if smoke or weights else _papers_model()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    if paper is not None:
        used, note = f"model: {DEFAULT_MODEL}, the paper's trained FCN-8s ({paper})", PAPER_NOTE
        print(used, flush=True)
        model = load_model(paper)
    else:
        used, settings = smoke_settings(weights)
        note = HONEST_NOTE
        print(used, flush=True)
        keras.utils.set_random_seed(0)
        result = train(
            root, run_dir=out / "run", epochs=epochs, steps_per_epoch=steps_per_epoch,
            crop_size=224, val_every=max(1, epochs // 4), verbose=2, **settings,
        )  # fmt: skip
        model = result.model
        if result.best_checkpoint:
            model = load_model(result.best_checkpoint)
        plots.plot_training_curves(read_log(out / "run"), out / "training_curves.png")
    scores = evaluate(model, data.eval_dataset(val))
    (out / "metrics.txt").write_text(f"{scores.table()}\n\n{used}\n{note}\n")
    scores.save_json(out / "metrics.json")
    scores.plot_confusion(out / "confusion.png")
    (out / "predictions").mkdir()
    for (image_path, prediction), label_path in zip(predict_files(val.images, model), val.labels):
        data.write_label(out / "predictions" / f"{image_path.stem}.png", prediction)
        plots.plot_segmentation(
            data.read_image(image_path), prediction, data.read_label(label_path),
            class_names(model), path=out / "predictions" / f"{image_path.stem}_compare.png",
        )  # fmt: skip
    print(scores.table())
    print(f"\n{used}\n{note}\n\nEverything is in {out.resolve()}")
    return scores.summary()


def _papers_model() -> Path | None:
    """The paper's FCN-8s as a ``.keras`` file (cached, or downloaded and converted now), or
    None, saying why the demo trains instead."""
    try:
        return known_model_path(DEFAULT_MODEL)
    except ModelUnavailableError as err:
        print(f"The paper's FCN-8s cannot be had here, so the demo trains the smoke model "
              f"instead. Why: {err}", flush=True)  # fmt: skip
        return None
