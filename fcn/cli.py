"""The ``fcn`` command line: train, evaluate, predict, models, find-batch-size, download, demo,
convert, export, info.

User errors (missing files, bad data, no model, out of memory, ...) print one line
``fcn: error: ...`` and exit with status 2, without a traceback.

Quick and quiet: the parser is built from plain facts ([`fcn.layout`][], [`fcn.options`][],
[`fcn.presets`][], [`fcn.TrainConfig`][]), so ``--help`` of every command and ``--version``
answer without importing TensorFlow; a command imports what it runs when it runs. TensorFlow's
start-up lines (CUDA drivers, CPU instructions, oneDNN) are hidden unless ``--verbose`` or
``FCN_VERBOSE=1`` asks for them (``TF_CPP_MIN_LOG_LEVEL``, when set, is left as it is); instead
a command that computes says once, in one line, where it computes
([`fcn.device.compute_summary`][]: the GPUs, or the CPU, its kernels and precision, and a
warning when a GPU was expected but TensorFlow sees none). Before TensorFlow starts, a command
takes the CPU kernel set measured fastest for what it runs ([`COMMAND_WORKLOADS`][]) unless
``TF_ENABLE_ONEDNN_OPTS`` is set.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from argparse import BooleanOptionalAction
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args, get_type_hints

import fcn
from fcn.cpu import Workload, choose_kernels
from fcn.inference.budget import STREAMED_MAX_PIXELS
from fcn.layout import VARIANTS
from fcn.options import (
    DEFAULT_CALIBRATION_IMAGES,
    EXPORT_FORMATS,
    OUTPUTS,
    PRECISIONS,
    QUANTIZATIONS,
)
from fcn.presets import DEFAULT_MODEL, PRESETS, download_url, placed_model
from fcn.training.config import TrainConfig

_MAX_PIXELS = f"{STREAMED_MAX_PIXELS:,} px"

USER_ERRORS = (OSError, ValueError, NotImplementedError, RuntimeError)
"""What a command can raise because of its input or environment (DataError is a ValueError,
OutOfMemoryError and WeightsUnavailableError are RuntimeErrors)."""


def _cmd_train(args) -> int:
    # only the options given are passed: a resumed run keeps its own settings for the rest
    given = {f.name: getattr(args, f.name) for f in _train_options() if hasattr(args, f.name)}
    result = fcn.train(args.voc_root, sbd_root=args.sbd, **given)
    print(f"run directory: {result.run_dir}")
    print(f"best model: {result.best_checkpoint or '(no validation: see the epoch checkpoint)'}")
    if result.failure:
        print(f"fcn: training stopped: {result.failure}", file=sys.stderr)
        return 1
    return 0


def _cmd_evaluate(args) -> int:
    from fcn.inference.predict import inference_model

    model = inference_model(args.model, args.precision, args.max_pixels)
    result = fcn.evaluate(
        model, args.data, args.split, max_pixels=args.max_pixels, precision=args.precision
    )
    print(result.table())
    if args.json:
        result.save_json(args.json)
    if args.plot:
        result.plot_confusion(args.plot)
    return 0


def _cmd_predict(args) -> int:
    from PIL import Image

    from fcn import data, plots
    from fcn.data.atomic import write_whole
    from fcn.inference.predict import expand_images, inference_model

    for folder in filter(os.path.isdir, args.images):
        if not any(expand_images(folder)):
            raise FileNotFoundError(f"{folder}: no images in this folder (.jpg, .png, ...)")
    paths = list(expand_images(args.images))
    for path in paths:
        if not path.is_file():
            raise FileNotFoundError(f"{path}: no such image file")
    results = _result_paths(paths, Path(args.out), args.overwrite)  # before any work
    model = inference_model(args.model, args.precision, args.max_pixels)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    for path, (label_file, overlay_file) in zip(paths, results):
        image = data.read_image(path)
        labels = fcn.predict(image, model, max_pixels=args.max_pixels, precision=args.precision)
        write_whole(label_file, data.write_label, labels)
        overlay = Image.fromarray(plots.overlay(image, labels))
        write_whole(overlay_file, overlay.save, format="PNG")  # overlay.save(tmp, format=...)
    print(f"{len(paths)} label maps (VOC palette PNG) and overlays written to {args.out}")
    return 0


def _result_paths(images: list[Path], out: Path, overwrite: bool) -> list[tuple[Path, Path]]:
    """Where ``fcn predict`` writes each image's label map and overlay: ``OUT/<stem>.png`` and
    ``OUT/<stem>_overlay.png``. Refused, naming the files, before anything is computed: an
    ``OUT`` that holds an input image (``fcn predict imgs/ --out imgs/``), a result on an input
    reached by a link, two results whose names differ at most in case (``a/photo.jpg
    b/photo.jpg``, ``Photo.jpg photo.png``: one file where case is ignored), both even with
    ``--overwrite``; results on existing files (an earlier run's) without ``--overwrite``."""
    inputs = {_file_id(image): image for image in images}
    written: dict[str, tuple[Path, Path]] = {}  # case-folded result -> (result, its image)
    for image in images:
        if image.parent.resolve() == out.resolve():
            raise ValueError(
                f"--out {out} holds the input {image}, which a result could replace: pass an "
                "--out folder apart from the images"
            )
        for result in (out / f"{image.stem}.png", out / f"{image.stem}_overlay.png"):
            if str(result).casefold() in written:
                raise ValueError(
                    f"{written[str(result).casefold()][1]} and {image} would both be predicted "
                    f"into {result}: give them separate --out folders (results are named by "
                    "the image's stem)"
                )
            if result.exists() and _file_id(result) in inputs:
                raise ValueError(
                    f"{result} is the input {inputs[_file_id(result)]} (a link): {image}'s "
                    "result would replace it; pass an --out folder apart from the images"
                )
            written[str(result).casefold()] = result, image
    existing = [result for result, _ in written.values() if result.exists()]
    if existing and not overwrite:
        listed = ", ".join(map(str, existing[:3])) + (" ..." if len(existing) > 3 else "")
        raise FileExistsError(
            f"{out} already holds {len(existing)} of the files this run would write ({listed}): "
            "pass --overwrite to replace them, or another --out"
        )
    results = [result for result, _ in written.values()]
    return list(zip(results[::2], results[1::2]))


def _file_id(path: Path) -> tuple[int, int]:
    """The (device, inode) of the file ``path`` names, links followed: one for all its names."""
    status = path.stat()
    return status.st_dev, status.st_ino


def _cmd_models(args) -> int:
    for name, known in PRESETS.items():
        default = " (default)" if name == DEFAULT_MODEL else ""
        placed = placed_model(name)
        where = f"cached: {placed}" if placed else f"downloaded on first use: {download_url(name)}"
        print(f"{known.describe().replace(name, name + default, 1)}\n    {where}")
    print(QUANTISED_VARIANTS)
    return 0


QUANTISED_VARIANTS = (
    "quantised variants: each model (or a .keras of yours) exports as int8 LiteRT or ONNX, "
    "calibrated on your images:\n    fcn export NAME --format litert --size 512 512 --quantize "
    "int8 --calibration VOC_ROOT --out NAME_int8.tflite   (then: fcn evaluate NAME_int8.tflite "
    "VOC_ROOT)"
)
"""What ``fcn models`` says last: the int8 files a user can make of a model."""


def _cmd_find_batch_size(args) -> int:
    model = (
        fcn.load_model(args.model) if args.model else fcn.build_model(args.variant, weights=None)
    )
    limit = int(args.memory_limit_gb * 2**30) if args.memory_limit_gb else None
    report = fcn.find_batch_size(
        model, args.crop_size, max_batch=args.max_batch, memory_limit=limit
    )
    for batch, peak in sorted(report.peak_bytes.items()):
        print(f"batch {batch:3d}: peak {peak / 2**30:.2f} GiB")
    print(
        f"largest batch of {args.crop_size}x{args.crop_size} crops that fits: {report.batch_size}"
    )
    return 0 if report.batch_size else 1


def _cmd_download(args) -> int:
    from fcn import data

    fetch = {"voc": data.download_voc, "sbd": data.download_sbd}[args.dataset]
    print(fetch(args.dest, progress=True))
    return 0


def _cmd_demo(args) -> int:
    from fcn.demo import run_demo

    lengths = {k: v for k, v in [("epochs", args.epochs),
                                 ("steps_per_epoch", args.steps_per_epoch)] if v is not None}
    # a smoke training's length given: the smoke training it is (never silently unused)
    run_demo(args.out, weights=args.weights, smoke=args.train or bool(lengths), **lengths)
    return 0


def _cmd_convert(args) -> int:
    model = fcn.convert_caffe(args.caffemodel, args.variant)
    model.save(args.out)
    print(f"{args.caffemodel} -> {args.out} ({model.count_params():,} parameters, "
          f"{model.output_shape[-1]} classes)")  # fmt: skip
    return 0


def _cmd_export(args) -> int:
    path = fcn.export_model(
        args.model, args.out, args.format, size=args.size and tuple(args.size), output=args.output,
        precision=args.precision, quantize=args.quantize, calibration=args.calibration,
        calibration_images=args.calibration_images,
    )  # fmt: skip
    batch = "1" if args.format == "litert" else "N"
    shape = " x ".join([batch, *map(str, args.size or ("H", "W"))])
    kind = f"{args.quantize} " if args.quantize else ""
    print(f"{args.model} -> {path} ({kind}{args.format}: uint8 image {shape} x 3 -> {args.output})")
    return 0


def _cmd_info(args) -> int:
    model = fcn.build_model(args.variant, weights=None)
    model.summary(line_length=110)
    print(f"parameters: {model.count_params():,}")
    print(f"crop offsets: {fcn.CROP_OFFSETS[args.variant]}")
    return 0


def _train_options() -> list[dataclasses.Field]:
    """The fields of [`fcn.TrainConfig`][] that ``fcn train`` has an option for."""
    return [f for f in dataclasses.fields(TrainConfig) if f.metadata.get("cli", True)]


def _option(field: dataclasses.Field) -> dict[str, Any]:
    """``add_argument`` keywords for ``field``: its help (and default) and choices, a flag for a
    bool (``--x`` / ``--no-x`` where None means unset), else its type, with ``none`` for None
    where the default is not None (``--weights none``, ``--seed none``). An option not given is
    left out of the parsed arguments (``argparse.SUPPRESS``): [`fcn.train`][] takes
    TrainConfig's default for it, or a resumed run's own setting."""
    hint = get_type_hints(TrainConfig)[field.name]
    members = set(get_args(hint) or (hint,))
    text = field.metadata["help"].replace("%", "%%")
    if field.default is not None and field.default is not False:
        text += f" (default: {field.default})"
    option = {"default": argparse.SUPPRESS, "help": text}
    if bool in members:
        option["action"] = "store_true" if field.default is False else BooleanOptionalAction
        return option
    parse = next((t for t in (int, float) if t in members), str)
    choices = field.metadata.get("choices")
    if type(None) in members and field.default is not None:
        parse = _or_none(parse)
        choices = choices and (*choices, None)  # "none" is one of them (--mixed-precision none)
    return {**option, "type": parse, "choices": choices}


def _or_none(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse``, reading ``none`` (any case) as None."""

    def parse_or_none(value: str) -> Any:
        return None if value.lower() == "none" else parse(value)

    parse_or_none.__name__ = parse.__name__  # argparse names it in "invalid int value"
    return parse_or_none


EXAMPLES = {
    "train": """examples:
  fcn train data/VOCdevkit/VOC2012                       # FCN-8s from VGG16, VOC train/val
  fcn train data/VOCdevkit/VOC2012 --sbd data/benchmark_RELEASE   # train_aug / seg11valid
  fcn train VOC2012 --recipe paper --run-dir runs/paper   # the paper's batch-1 recipe
  fcn train VOC2012 --batch-size 20 --accumulate 10 --mixed-precision mixed_float16
  fcn train VOC2012 --run-dir runs/fcn8s --resume         # continue after a crash
  fcn train VOC2012 --variant fcn32s                      # staged training: FCN-32s first,
  fcn train VOC2012 --variant fcn16s --init-from runs/fcn32s/best.keras   # then FCN-16s""",
    "evaluate": """examples:
  fcn evaluate runs/fcn8s/best.keras data/VOCdevkit/VOC2012 --split val
  fcn evaluate weights/fcn8s-voc.keras VOC2012 --json val.json --plot confusion.png
  fcn evaluate fcn8s_int8.tflite VOC2012      # an exported LiteRT file, in windows of its size""",
    "predict": """examples:
  fcn predict photo.jpg --out predictions/
  fcn predict photos/ --model runs/fcn8s/best.keras --out predictions/ --max-pixels 500000
  fcn predict photos/ --model fcn8s_int8.tflite --out predictions/   # a LiteRT file""",
    "find-batch-size": """examples:
  fcn find-batch-size --crop-size 320
  fcn find-batch-size --model runs/fcn8s/best.keras --crop-size 500 --memory-limit-gb 10""",
    "download": """examples:
  fcn download voc --dest data/     # VOCtrainval_11-May-2012.tar, md5-checked, resumable
  fcn download sbd --dest data/     # SBD benchmark.tgz""",
    "demo": """examples:
  fcn demo                          # the paper's FCN-8s if it can be had, else a smoke training
  fcn demo --train --out /tmp/demo --epochs 2       # the smoke training (a few CPU minutes)
  fcn demo --weights vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5   # full FCN-8s""",
    "models": """examples:
  fcn models                        # the paper's four, and where each is (or will be) kept""",
    "convert": """examples:
  fcn convert fcn8s-heavy-pascal.caffemodel --variant fcn8s --out weights/fcn8s-voc.keras
  fcn convert fcn8s-atonce-pascal.caffemodel --variant fcn8s_atonce --out fcn8s-atonce.keras""",
    "export": """examples:
  fcn export fcn8s-voc --out export/fcn8s                 # SavedModel: uint8 images, any size
  fcn export runs/fcn8s/best.keras --format litert --size 512 512 --out fcn8s.tflite
  fcn export fcn8s-voc --format onnx --output logits --out fcn8s.onnx   # needs tf2onnx
  fcn export runs/fcn8s/best.keras --format litert --size 512 512 --quantize int8 \\
      --calibration data/VOCdevkit/VOC2012 --out fcn8s_int8.tflite   # then: fcn evaluate it""",
    "info": """examples:
  fcn info --variant fcn16s""",
}


VERBOSE_HELP = "show TensorFlow's start-up and info lines (or set FCN_VERBOSE=1)"

MULTI_WORKER = """several processes or machines (fcn.training.loop): start the same command once per
worker, each with its own TF_CONFIG; the first worker is the chief, the only one that reads
the weights file and writes --run-dir; the others take its settings (one given another value
refuses) and must be given the same data; --batch-size is the global batch, split over workers:
  TF_CONFIG='{"cluster": {"worker": ["hostA:23456", "hostB:23456"]},
              "task": {"type": "worker", "index": 0}}' fcn train VOC2012 --batch-size 16
  TF_CONFIG='{"cluster": {"worker": ["hostA:23456", "hostB:23456"]},
              "task": {"type": "worker", "index": 1}}' fcn train VOC2012 --batch-size 16
two processes on one machine: the same with 127.0.0.1:23456 and 127.0.0.1:23457.
if a worker dies, the others wait: stop them all and start all again with --resume."""


def _precision_option(parser: argparse.ArgumentParser, default: str) -> None:
    parser.add_argument(
        "--precision", default=default, choices=PRECISIONS,
        help="auto: bfloat16 where the hardware runs it natively (AMX or AVX512-BF16 under "
        "oneDNN, a bf16 GPU), else float32; default %(default)s",
    )  # fmt: skip


def build_parser() -> argparse.ArgumentParser:
    """The ``fcn`` command's argument parser: one subcommand per task, each with its examples.

    Examples:
        >>> args = build_parser().parse_args(["train", "VOC2012", "--epochs", "2"])
        >>> args.command, args.voc_root, args.epochs, hasattr(args, "variant")  # only as given
        ('train', 'VOC2012', 2, False)
    """
    parser = argparse.ArgumentParser(
        prog="fcn",
        description="FCN-8s/16s/32s semantic segmentation on TensorFlow/Keras 3, memory-bounded.",
        epilog="run `fcn COMMAND --help` for a command's options and examples",
    )
    parser.add_argument("--version", action="version", version=f"fcn {fcn.__version__}")
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    verbose = argparse.ArgumentParser(add_help=False)  # also after the command: fcn train --verbose
    verbose.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                         help=VERBOSE_HELP)  # fmt: skip

    def command(name, func, help, computes=True):
        epilog = EXAMPLES[name] + ("\n\n" + MULTI_WORKER if name == "train" else "")
        p = sub.add_parser(
            name, help=help, description=help, epilog=epilog, parents=[verbose],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )  # fmt: skip
        p.set_defaults(func=func, computes=computes)
        return p

    commands = (  # name, what runs it, its help, its arguments, whether it computes
        ("train", _cmd_train, "train an FCN on Pascal VOC (and SBD)", _train_arguments, True),
        ("evaluate", _cmd_evaluate, "score a model at full resolution (streaming)",
         _evaluate_arguments, True),
        ("predict", _cmd_predict, "write label PNGs (VOC palette) and overlays",
         _predict_arguments, True),
        ("models", _cmd_models, "list the trained models known by name", None, False),
        ("find-batch-size", _cmd_find_batch_size, "probe the largest batch that fits",
         _find_batch_size_arguments, True),
        ("download", _cmd_download, "download and extract Pascal VOC 2012 or SBD",
         _download_arguments, False),
        ("demo", _cmd_demo, "segment the embedded VOC sample: the paper's FCN-8s where it can "
         "be had, else a smoke training", _demo_arguments, True),
        ("convert", _cmd_convert, "convert a Caffe FCN .caffemodel (no Caffe needed)",
         _convert_arguments, True),
        ("export", _cmd_export, "export for serving: SavedModel, LiteRT or ONNX",
         _export_arguments, True),
        ("info", _cmd_info, "print a model's layers, parameter count and crop offsets",
         _info_arguments, True),
    )  # fmt: skip
    for name, func, help, arguments, computes in commands:
        p = command(name, func, help, computes)
        if arguments is not None:
            arguments(p)
    return parser


def _train_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn train``'s arguments."""
    p.add_argument("voc_root", help="VOCdevkit/VOC2012 folder")
    p.add_argument("--sbd", help="SBD benchmark_RELEASE folder: train_aug + seg11valid")
    for field in _train_options():
        p.add_argument(f"--{field.name.replace('_', '-')}", **_option(field))


def _evaluate_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn evaluate``'s arguments."""
    p.add_argument("model", help=".keras model file, a known name, or a .tflite file of fcn export")
    p.add_argument("data", help="VOCdevkit/VOC2012 folder")
    p.add_argument("--split", default="val")
    p.add_argument(
        "--max-pixels",
        type=int,
        help=f"pixels per forward pass (default: whole photos up to {_MAX_PIXELS} for an FCN)",
    )
    _precision_option(p, "auto")
    p.add_argument("--json", help="write the full result as JSON here")
    p.add_argument("--plot", help="write the confusion matrix as PNG here")


def _predict_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn predict``'s arguments."""
    p.add_argument("images", nargs="+", help="image files or folders")
    p.add_argument("--out", required=True, help="output folder: OUT/<stem>.png and "
                   "OUT/<stem>_overlay.png per image (never an input's name)")  # fmt: skip
    p.add_argument("--overwrite", action="store_true",
                   help="replace files of the results' names in --out (else refused)")  # fmt: skip
    p.add_argument("--model", help=f".keras model, a known name or a .tflite file of fcn export "
                   f"(default: {DEFAULT_MODEL}, the paper's FCN-8s, downloaded and converted "
                   "once)")  # fmt: skip
    p.add_argument(
        "--max-pixels", type=int, help=f"larger images are tiled (default: {_MAX_PIXELS})"
    )
    _precision_option(p, "auto")


def _find_batch_size_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn find-batch-size``'s arguments."""
    p.add_argument("--model", help=".keras model (default: a fresh full-size --variant)")
    p.add_argument("--variant", default="fcn8s", choices=VARIANTS)
    p.add_argument("--crop-size", type=int, default=320)
    p.add_argument("--max-batch", type=int, default=64)
    p.add_argument("--memory-limit-gb", type=float, help="default: GPU's own; CPU: 80%% of RAM")


def _download_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn download``'s arguments."""
    p.add_argument("dataset", choices=["voc", "sbd"])
    p.add_argument("--dest", default="data", help="folder for the archive and its contents")


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn demo``'s arguments."""
    p.add_argument("--out", default="fcn-demo", help="output folder (replaced)")
    p.add_argument(
        "--train", action="store_true",
        help="train the smoke model even where the paper's FCN-8s is at hand",
    )  # fmt: skip
    p.add_argument("--epochs", type=int,
                   help="of the smoke training, which giving it implies (default 8)")  # fmt: skip
    p.add_argument("--steps-per-epoch", type=int,
                   help="of the smoke training, which giving it implies (default 10)")  # fmt: skip
    p.add_argument("--weights", help="a Keras VGG16 weights file: train the full FCN-8s from it")


def _convert_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn convert``'s arguments."""
    p.add_argument("caffemodel", help="the .caffemodel file, e.g. fcn8s-heavy-pascal.caffemodel")
    p.add_argument("--variant", default="fcn8s", choices=VARIANTS)
    p.add_argument("--out", required=True, help="the .keras file to write")


def _export_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn export``'s arguments."""
    p.add_argument("model", help=".keras model or a known name (fcn8s-voc, ...)")
    p.add_argument("--out", required=True, help="the folder (saved_model) or file to write")
    p.add_argument("--format", default="saved_model", choices=EXPORT_FORMATS,
                   help="saved_model (a folder), litert (.tflite), onnx (.onnx); "
                   "default %(default)s")  # fmt: skip
    p.add_argument("--size", type=int, nargs=2, metavar=("H", "W"),
                   help="fixed image size in pixels (litert: required; else any size)")  # fmt: skip
    p.add_argument("--output", default="labels", choices=OUTPUTS,
                   help="labels (N, H, W) or logits (N, H, W, C), default %(default)s")  # fmt: skip
    _precision_option(p, "float32")
    p.add_argument("--quantize", choices=QUANTIZATIONS,
                   help="int8: weights and activations in int8 (litert, onnx), calibrated on "
                   "--calibration")  # fmt: skip
    p.add_argument("--calibration", metavar="VOC_ROOT_OR_IMAGES",
                   help="with --quantize: a VOC root (its train images) or a folder of images")
    p.add_argument("--calibration-images", type=int, metavar="N",
                   help="with --quantize: images calibrated on, spread over --calibration "
                   f"(all if fewer), default {DEFAULT_CALIBRATION_IMAGES}")  # fmt: skip


def _info_arguments(p: argparse.ArgumentParser) -> None:
    """``fcn info``'s arguments."""
    p.add_argument("--variant", default="fcn8s", choices=VARIANTS)


COMMAND_WORKLOADS: dict[str, Workload] = {
    "train": "training", "find-batch-size": "training", "evaluate": "inference",
    "predict": "inference",
}  # fmt: skip
"""What each command mostly runs: its kernel set is the one measured fastest for that on this
CPU ([`fcn.cpu.choose_kernels`][]) unless ``TF_ENABLE_ONEDNN_OPTS`` is set. ``demo`` runs the
paper's model (inference) unless asked to train ([`command_workload`][]); the others (convert,
export, info) keep TensorFlow's default."""


def command_workload(args: argparse.Namespace) -> Workload | None:
    """What the parsed command ``args`` mostly runs ([`COMMAND_WORKLOADS`][]), None for none.

    Examples:
        >>> parser = build_parser()
        >>> [command_workload(parser.parse_args(a)) for a in (["demo"], ["demo", "--train"])]
        ['inference', 'training']
    """
    if args.command == "demo":
        lengths = (args.epochs, args.steps_per_epoch)  # given: the smoke training
        training = args.train or args.weights or any(v is not None for v in lengths)
        return "training" if training else "inference"
    return COMMAND_WORKLOADS.get(args.command)


def _start_tensorflow_quietly() -> None:
    """Import TensorFlow and let it probe its devices with the process's standard error (file
    descriptor 2, where its C++ code writes) pointed at /dev/null, then keep its later info and
    warning lines off (``TF_CPP_MIN_LOG_LEVEL=2`` unless set): the CUDA-driver, CPU-instruction
    and oneDNN lines of a start are not for the user (``TF_CPP_MIN_LOG_LEVEL`` alone no longer
    hides them since absl logging); [`fcn.device.compute_summary`][] says what matters."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            import tensorflow as tf

            tf.config.list_physical_devices("GPU")
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def main(argv: list[str] | None = None) -> int:
    """Run the ``fcn`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit status:
    0 done, 1 a run that did not succeed (training stopped on NaN, no batch fits), 2 a user
    error (one line ``fcn: error: ...`` on stderr), 130 interrupted.

    Examples:
        >>> main([])  # no command: the help
        usage: fcn [-h] [--version] [--verbose] COMMAND ...
        ...
        0
        >>> main(["evaluate", "no-such-model.keras", "VOC2012"])  # a missing file: one line
        2
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    verbose = args.verbose or os.environ.get("FCN_VERBOSE", "") not in ("", "0")
    try:
        if args.computes:
            workload = command_workload(args)
            if workload:  # before TensorFlow starts
                choose_kernels(workload)
            if not verbose:
                _start_tensorflow_quietly()
            from fcn.device import compute_summary, enable_memory_growth

            enable_memory_growth()  # before a command builds or loads a model on a GPU
            print(f"fcn: {compute_summary()}", file=sys.stderr, flush=True)
        return args.func(args)
    except USER_ERRORS as err:
        print(f"fcn: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("fcn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
