"""Write the notebooks from the cells below, then run them so they keep their outputs and pictures.

    python notebooks/build.py                 # all three, default settings (the committed outputs)
    python notebooks/build.py memory          # one of them
    python notebooks/build.py --fast          # FCN_NOTEBOOK_FAST=1: the small settings of the test

The ``.ipynb`` files are generated: edit the cells here and rebuild. ``tests/test_notebooks.py``
checks that the committed notebooks hold exactly these cells, with outputs, and runs each one
top to bottom with ``FCN_NOTEBOOK_FAST=1``. Kernels run this interpreter (``sys.executable``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import nbformat
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
KERNEL = "fcn-notebooks"
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
"""What the saved notebooks ask for when opened in Jupyter."""


def md(source: str) -> tuple[str, str]:
    return "markdown", source


def code(source: str) -> tuple[str, str]:
    return "code", source


def setup(imports: str) -> tuple[str, str]:
    """The first code cell: inline figures, ``imports``, the ``FAST`` switch."""
    return code(f"""\
%matplotlib inline
{imports}

FAST = os.environ.get("FCN_NOTEBOOK_FAST") == "1"  # the test's small settings
print(f"fcn {{fcn.__version__}}, fast settings: {{FAST}}")""")


QUICKSTART = [
    md("""\
# Quickstart: from `fcn.build_model` to a coloured label map

`fcn` is the FCN-8s of Long, Shelhamer and Darrell (*Fully Convolutional Networks for Semantic
Segmentation*, CVPR 2015) for TensorFlow/Keras 3: it builds the model, trains it, evaluates it
and predicts label maps at the original image resolution, with memory bounded at every step.
This notebook builds a model, teaches it one image, predicts it and draws the result.

It runs offline on a CPU in about a minute. `FCN_NOTEBOOK_FAST=1` (set by the test) trains for
fewer steps; the saved outputs come from the default settings."""),
    setup("""\
import os
import tempfile

import keras
import numpy as np

import fcn
from fcn import data, plots"""),
    md("""\
## 1. Build an FCN-8s

The real model starts from VGG16 trained on ImageNet:

```python
model = fcn.build_model("fcn8s")  # weights="imagenet": downloads Keras' VGG16 file once
```

That download needs the internet (about 528 MB, kept in `~/.keras/models`). Offline, as here,
`weights=None` starts from random weights, and `width=1/8` keeps the paper's topology (the same
layers, crops and skip connections) with an eighth of the channels, so that it trains on a CPU.
The model takes RGB images of any size, values 0..255, and returns one logit per class for every
pixel, on the same pixel grid."""),
    code("""\
model = fcn.build_model("fcn8s", weights=None, width=1 / 8)
logits = model(np.zeros((1, 375, 500, 3), np.uint8))
print(f"{model.count_params():,} parameters (the full-width FCN-8s has about 134 million)")
print("image (1, 375, 500, 3) -> logits", tuple(logits.shape))"""),
    md("""\
## 2. Teach it one image

A from-scratch FCN needs hours of GPU time to learn Pascal VOC. To get a meaningful picture in a
minute, we train on a single image of the VOC sample that ships with the package
(`fcn.data.sample_voc_root()`: 20 real VOC 2012 images with their labels). Fitting one image is
the classic sanity check of a segmentation model: it shows that data, loss and model agree,
**not** that the model generalises to new images.

`fcn.train` builds the same model itself from these arguments, trains it and keeps a run
directory (checkpoints, `log.csv`, TensorBoard logs). `train_and_evaluate.ipynb` trains on a
whole VOC folder with validation."""),
    code("""\
root = data.sample_voc_root()
train_files = data.voc_pairs(root, "train")
index = next(i for i, path in enumerate(train_files.images) if "2008_000238" in path)
image_path, label_path = train_files.images[index], train_files.labels[index]
one_image = data.SegmentationFiles((image_path,) * 8, (label_path,) * 8)  # two batches of 4

keras.utils.set_random_seed(0)
result = fcn.train(
    train_files=one_image,
    val_files=(),
    run_dir=tempfile.mkdtemp(prefix="fcn-quickstart-"),
    weights=None,
    width=1 / 8,
    epochs=1,
    steps_per_epoch=24 if FAST else 40,
    crop_size=128 if FAST else 160,
    batch_size=4,
    learning_rate=0.02,
    augment=False,
    verbose=2,
)
model = result.model"""),
    md("""\
## 3. Predict

`fcn.predict` takes a path, a PIL image, an (H, W, 3) uint8 array or a list of these, and
returns (H, W) uint8 class indices at the original resolution (a list for a list). The image
streams through the network in bands of rows (a 4000x3000 photo runs whole in ~0.4 GiB above the
model's resting footprint, where Keras' own forward pass aborts); images above `max_pixels`
(25M by default) run in overlapping tiles;
`fcn.predict_proba` also returns the per-class softmax. Without `model`, it loads
`weights/fcn8s-voc.keras` (`fcn.load_model()`): a model you trained and copied there."""),
    code("""\
labels = fcn.predict(image_path, model)
print(labels.shape, labels.dtype)
classes, counts = np.unique(labels, return_counts=True)
{fcn.VOC_CLASSES[c]: f"{n / labels.size:.0%}" for c, n in zip(classes, counts)}"""),
    md("""\
## 4. Look at it

`fcn.plots.plot_segmentation` shows the image, the ground truth, the prediction and the
prediction over the image, with a legend of the classes present in VOC colours (void, the
unscored border pixels, in cream). Every plotting function returns a matplotlib figure and takes
`path=` to save it as a PNG; none needs a display."""),
    code("""\
image = data.read_image(image_path)
plots.plot_segmentation(image, labels, data.read_label(label_path))"""),
    md("""\
The building blocks make pictures of your own: `plots.colorize(labels)` gives the VOC colours
as an (H, W, 3) uint8 array, `plots.overlay(image, labels, alpha=0.5)` blends them over the image
(background and void keep the image)."""),
    code("""\
from PIL import Image

Image.fromarray(np.hstack([plots.colorize(labels), plots.overlay(image, labels)])).reduce(2)"""),
    md("""\
## Next

- `train_and_evaluate.ipynb`: `fcn.train` on a VOC folder, training curves, `fcn.evaluate`,
  the confusion matrix, and the full-size call for real training.
- `memory.ipynb`: why neither training nor evaluation runs out of memory."""),
]

TRAIN_AND_EVALUATE = [
    md("""\
# Train and evaluate on a VOC folder

`fcn.train` takes a Pascal VOC folder (`VOCdevkit/VOC2012`, or any image/label files) and
returns a trained model and a run directory; `fcn.evaluate` scores a model at full resolution
with a streaming confusion matrix. Here both run on the VOC sample that ships with the package
(`fcn.data.sample_voc_root()`: 12 train and 8 val images, VOC layout).

**The numbers below are a smoke run, not VOC accuracy**: a width-1/8 FCN-8s from random weights
(or, with a Keras VGG16 weights file in `FCN_VGG16_WEIGHTS`, the full FCN-8s from it; the
training cell says which), trained for about a minute of CPU on 12 images. They show that
training, checkpoints, validation and evaluation run end to end. The FCN authors' staged
FCN-8s, from VGG16 ImageNet weights trained on SBD train_aug on a GPU, scored 65.5 mean IU on
seg11valid (their figure; `benchmarks/reproduce_paper.py` retrains their table with fcn); the
call for a full training is at the end. `FCN_NOTEBOOK_FAST=1` (set by the test) trains
even less; the saved outputs come from the default settings."""),
    setup("""\
import os
import tempfile
from pathlib import Path

import keras

import fcn
from fcn import data, plots
from fcn.demo import smoke_settings
from fcn.training.checkpoint import read_log"""),
    code("""\
root = data.sample_voc_root()
for split in ("train", "val"):
    print(f"{split}: {len(data.voc_pairs(root, split))} image/label pairs")"""),
    md("""\
## Train

Random 160x160 crops without random scaling (`augment=False`), batches of 4, SGD with momentum
and a poly learning-rate schedule (the `practical` recipe with a learning rate for a
from-scratch model). After every epoch the 8 val images are scored at full resolution; the best
model by validation mean IoU is kept as `best.keras`, and `log.csv` gets one row per epoch.
With `resume=True` a stopped run continues from its last completed epoch."""),
    code("""\
# A Keras VGG16 weights file in FCN_VGG16_WEIGHTS trains the full FCN-8s from it instead.
used, settings = smoke_settings(os.environ.get("FCN_VGG16_WEIGHTS"))
print(used)
keras.utils.set_random_seed(0)
run_dir = Path(tempfile.mkdtemp(prefix="fcn-train-")) / "run"
result = fcn.train(
    root,
    run_dir=run_dir,
    epochs=2 if FAST else 4,
    steps_per_epoch=6 if FAST else 10,
    crop_size=128 if FAST else 160,
    augment=False,
    verbose=2,
    **settings,
)
sorted(path.name for path in run_dir.iterdir())"""),
    md("""\
## Training curves

`fcn.plots.plot_training_curves` draws `run_dir/log.csv` (read by
`fcn.training.checkpoint.read_log`): the training loss, and the validation scores as fractions
(mean IoU, pixel accuracy, mean class accuracy, frequency-weighted IoU)."""),
    code("plots.plot_training_curves(read_log(run_dir))"),
    md("""\
## Evaluate

`fcn.evaluate(model, voc_root, split)` reads the split lazily, runs images of equal size
together up to `max_pixels` input pixels per forward pass (tiles above that), streams each pass
through the network in bands of rows, and keeps only a (21, 21) int64 confusion matrix, so
memory does not grow with the number of images. It returns an `EvaluationResult`: the four
scores of the reference `score.py`, per-class IoU and accuracy, `to_dict()` / `save_json()` and
`plot_confusion()`. A class that is neither labelled nor predicted has IoU NaN and does not
count in the mean."""),
    code("""\
best = keras.models.load_model(result.best_checkpoint)
evaluation = fcn.evaluate(best, root, "val")
print(evaluation)"""),
    md("""\
The confusion matrix, row-normalised: each row is a ground-truth class, and shows where its
pixels went. A model this small and this briefly trained predicts mostly background, so most of
the mass sits in the first column."""),
    code("evaluation.plot_confusion()"),
    md("""\
## The real thing (not run here)

Download VOC 2012 and SBD (1.9 GB and 1.4 GB), then train from VGG16 ImageNet weights (Keras
downloads them once) on train_aug (10,582 images) with validation on seg11valid (736 images):

```python
voc_root = fcn.data.download_voc("data")  # data/VOCdevkit/VOC2012
sbd_root = fcn.data.download_sbd("data")  # data/benchmark_RELEASE
result = fcn.train(voc_root, sbd_root=sbd_root, run_dir="runs/fcn8s")
evaluation = fcn.evaluate(keras.models.load_model(result.best_checkpoint), voc_root, "val")
```

The defaults are the `practical` recipe: 320x320 augmented crops, batch 2, SGD momentum 0.9,
learning rate 1e-3 with a poly schedule, 50 epochs, validation after each. `recipe="paper"`
trains on one whole image per step with momentum 0.99, as the paper did. On a smaller GPU add
`accumulate=` and `mixed_precision="mixed_float16"` (see `memory.ipynb`). From a shell:
`fcn train data/VOCdevkit/VOC2012 --sbd data/benchmark_RELEASE`."""),
]

MEMORY = [
    md("""\
# Why it does not run out of memory

A common way to feed a segmentation model: decode every image, resize it, turn its label into
a one-hot float32 mask, `.cache()` the lot in RAM, then shuffle and batch. Memory then grows
with the data set: a 320x320 crop with 21 classes holds 320·320·21·4 B = 8.6 MB of one-hot
label plus 1.2 MB of float32 image, about 9.8 MB per image, so VOC train_aug (10,582 images)
would need about 104 GB.

`fcn.data.train_dataset` shuffles only the list of file names, decodes and augments in parallel
workers, keeps labels as sparse uint8 class indices and prefetches two batches: memory is set by
the batch, not by the data set. Evaluation and prediction are bounded the same way (below).

Both pipelines run here over growing synthetic VOC-layout data sets
(`fcn.data.write_synthetic_voc`: VOC-sized JPEGs, palette PNG labels), two epochs each, every
measurement in a fresh subprocess so that each peak RSS (the process's high-water mark,
`ru_maxrss`) is its own. The code is `benchmarks/loader_memory.py`;
`benchmarks/README.md` has the same measurement at up to 3,200 images.
`FCN_NOTEBOOK_FAST=1` (set by the test) uses smaller sets; the saved outputs come from the
default settings."""),
    setup("""\
import inspect
import os
import sys
import tempfile
from pathlib import Path

import fcn
from fcn.testing import plot_memory_growth

sys.path.insert(0, str(Path.cwd().parent / "benchmarks"))  # benchmarks/loader_memory.py"""),
    code("""\
import loader_memory as bench

SIZES = [25, 100] if FAST else [50, 100, 200, 400]
PIPELINES = {"naive": "cache everything", "streaming": "fcn.data.train_dataset"}
print(inspect.getsource(bench.naive))
print(inspect.getsource(bench.streaming))"""),
    code("""\
voc = bench.generate(Path(tempfile.mkdtemp(prefix="fcn-memory-")), max(SIZES), SIZES)
rows = []
for pipeline, name in PIPELINES.items():
    for size in SIZES:
        row = {**bench.run_worker(pipeline, voc, size, epochs=2), "pipeline": name}
        rows.append(row)
        print(
            f"{name:24} {size:4} images: peak RSS {row['peak_rss_mb']:7.1f} MB "
            f"({row['growth_mb']:7.1f} MB above TensorFlow at rest), {row['seconds']:5.1f} s"
        )"""),
    code("plot_memory_growth(rows)"),
    md("""\
Peak RSS per extra image (MB), between the smallest and the largest set. The streaming
pipeline's few MB of drift follow the number of crops processed (tf.data worker threads'
high-water mark), not the data set: `benchmarks/README.md` measures 0.011 MB per image from 200
to 3,200 images."""),
    code("""\
growth = {
    name: round(bench.slope([row for row in rows if row["pipeline"] == name]), 3)
    for name in PIPELINES.values()
}
cached_gb = growth["cache everything"] * 10_582 / 1000
print(f"cache everything: about {cached_gb:.0f} GB more for VOC train_aug (10,582 images)")
growth"""),
    md("""\
## GPU memory

On a GPU the limit is the card's memory, and the activations of a training step dominate it.
`fcn.training.batch_size.training_memory_estimate`
adds up weights, momentum and the gradients in flight,
and 1.5x every layer's activation for a batch of crops (float32; the 1.5 is measured on the CPU,
`benchmarks/README.md`). For the full-width FCN-8s:"""),
    code("""\
from fcn.training.batch_size import training_memory_estimate

full = fcn.build_model("fcn8s", weights=None)  # random weights: the sizes are what matters
for crop, batch in [(320, 1), (320, 8), (500, 1), (500, 8)]:
    gib = training_memory_estimate(full, crop, batch) / 2**30
    print(f"crop {crop}x{crop}, batch {batch}: about {gib:5.1f} GiB per training step")
del full"""),
    md("""\
What `fcn` does about it:

- **Memory growth, before the first model.** TensorFlow otherwise takes nearly all the memory
  of every visible GPU the first time it touches one. `fcn.load_model`, `fcn.train` and the
  `fcn` command call `fcn.enable_memory_growth()` first (`import fcn` and `fcn.build_model`
  change nothing: call it yourself before building a model on a GPU), so a process holds what
  it uses and other jobs can share the card.
  If something initialised the GPU before, it warns: call `fcn.enable_memory_growth()` first
  or set `TF_FORCE_GPU_ALLOW_GROWTH=true`.
- **`fcn.find_batch_size(model, crop_size=320)`** runs real training steps (forward, backward,
  SGD with momentum) at batch 1, 2, 4, ... until one fails, bisects, restores the weights, and
  returns a `BatchSizeReport` (the batch that fits, the peak memory of each probe). On a CPU it
  extrapolates from batches 1 and 2 against 80% of the available RAM.
- **Gradient accumulation.** `fcn.train(..., batch_size=2, accumulate=4)` averages the
  gradients of 4 batches of 2 before each update: the effective batch of 8 in the memory of 2.
- **Mixed precision.** `fcn.train(..., mixed_precision="mixed_float16")` (or
  `"mixed_bfloat16"`) computes in 16-bit floats, about half the activation memory; the logits
  stay float32 for the loss.
- **A clear error.** If a step still does not fit, `fcn.train` raises `fcn.OutOfMemoryError`
  with the estimate and a batch size that fits on this device, instead of TensorFlow's raw
  `ResourceExhaustedError`.
- **Evaluation and prediction.** Inference streams through the network in bands of rows
  (`fcn.inference.streamed`): each layer keeps only the few rows its next band needs, and only the
  coarse scores are kept whole, so a 4000x3000 photo runs in one exact pass at ~0.4 GiB above
  the model's resting footprint, where Keras' own forward pass of it aborts (`std::bad_alloc`)
  on this 24 GiB machine. Images above `max_pixels`
  (25M by default) run in overlapping tiles whose 256 px margin makes their logits match
  whole-image ones to float rounding; evaluation keeps only a (21, 21) int64 confusion
  matrix, whatever the number of images."""),
]

NOTEBOOKS = {
    "quickstart": QUICKSTART,
    "train_and_evaluate": TRAIN_AND_EVALUATE,
    "memory": MEMORY,
}


def notebook(name: str) -> nbformat.NotebookNode:
    """The unexecuted notebook ``name`` (a key of :data:`NOTEBOOKS`)."""
    new_cell = {"markdown": nbformat.v4.new_markdown_cell, "code": nbformat.v4.new_code_cell}
    cells = [new_cell[kind](source) for kind, source in NOTEBOOKS[name]]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata.kernelspec = KERNELSPEC
    return nb


def execute(nb: nbformat.NotebookNode, *, fast: bool, timeout: int = 600) -> None:
    """Run ``nb`` in place, in this folder, on a kernel of this interpreter; raises
    ``nbclient.exceptions.CellExecutionError`` on the first failing cell."""
    with tempfile.TemporaryDirectory() as kernels:
        spec = Path(kernels) / KERNEL
        spec.mkdir()
        argv = [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"]
        argv.append("--IPKernelApp.capture_fd_output=False")  # C++ logs stay off the outputs
        env = {"FCN_NOTEBOOK_FAST": "1" if fast else "0", "TF_CPP_MIN_LOG_LEVEL": "3"}
        if fast:  # the small model, even where a VGG16 file is set for the full one
            env["FCN_VGG16_WEIGHTS"] = ""
        kernel = {"argv": argv, "display_name": KERNEL, "language": "python", "env": env}
        (spec / "kernel.json").write_text(json.dumps(kernel))
        manager = KernelManager(
            kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[kernels])
        )
        client = NotebookClient(
            nb, km=manager, timeout=timeout, resources={"metadata": {"path": str(HERE)}}
        )
        client.execute()
    nb.metadata.kernelspec = KERNELSPEC


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help=f"some of {', '.join(NOTEBOOKS)} (default: all)")
    parser.add_argument("--fast", action="store_true", help="FCN_NOTEBOOK_FAST=1")
    args = parser.parse_args()
    if unknown := set(args.names) - set(NOTEBOOKS):
        parser.error(f"no notebook {', '.join(sorted(unknown))}")
    for name in args.names or NOTEBOOKS:
        start = time.perf_counter()
        nb = notebook(name)
        execute(nb, fast=args.fast)
        nbformat.write(nb, HERE / f"{name}.ipynb")
        print(f"{name}.ipynb: {time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
