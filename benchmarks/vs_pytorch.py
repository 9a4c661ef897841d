"""fcn beside the PyTorch FCN-8s of pytorch-fcn: speed and peak memory, side by side in one run.

Every cell runs in a fresh process; rounds interleave the two frameworks (torch cell, fcn cell,
...) so that drift on the machine hits both alike; each figure is the median over rounds.
Peak RSS is the kernel's VmHWM of the whole process (import, build and steps); the "where it
goes" columns are VmRSS after ``import``, after the build, and the step's own peak above the
build. Cells:

* ``build``: the model with fresh weights (fcn: ``build_model("fcn8s", weights=None)``);
  fcn also from a VGG16 weights file (``--vgg16``, the shared real notop file by default) and
  ``fcn.load_model`` of a saved ``.keras`` FCN-8s.
* ``forward 500x500 b1``: fcn through :func:`fcn.inference.streamed.compiled_forward` (the path
  ``fcn.evaluate``/``fcn.predict`` take: streamed); torch ``model.eval()`` under
  ``torch.inference_mode``.
* precision ``fp32`` and ``bf16`` of the forward and train cells: torch under
  ``torch.autocast("cpu", torch.bfloat16)``; fcn's forward of a saved ``.keras`` FCN-8s from
  ``fcn.load_model(path, precision=...)`` (bf16: what ``fcn.predict(image, path)`` runs on a
  bf16 CPU, the weights read straight into bf16) and its training under ``mixed_bfloat16``.
  PyTorch gets its fastest CPU layout: model and input ``channels_last`` (since Dec 3; before,
  its default layout).
* kernel sets: fcn's cells under oneDNN and under Eigen (``TF_ENABLE_ONEDNN_OPTS=1`` / ``0``;
  bf16 under oneDNN only: Eigen computes bf16 in float32). Each cell also reports the share of
  the CPU's peak it reaches (``peak_share``: the cell's FLOPs per second over cores x clock x
  :data:`PEAK_FLOP_PER_CYCLE` of its precision; a training step counted as 3 forwards).
* ``train 500x500 b1`` and ``train 320x320 b4``: one SGD step with momentum 0.9 and weight decay
  5e-4 on the per-pixel mean cross-entropy ignoring 255 (fcn:
  :func:`fcn.training.train.compile_for_training` with the practical recipe and
  :func:`fcn.training.loop.train_step`, the step ``fcn.train`` runs; before
  Dec 2, 10:00 UTC ``train_on_batch``, i.e. ``fit``'s step). Every layer trains (from fresh
  weights ``compile_for_training`` freezes nothing).
* ``default 320x320 b2``: the step ``fcn.train`` runs by default, the practical recipe's (2
  crops of 320, the VGG body's blocks ``frozen_blocks`` of it frozen, as from pretrained
  weights, the skip layers' rates); PyTorch the same step with the same blocks'
  ``requires_grad`` off (since Dec 7, issue 45).
* ``--estimate``: fcn train cells at 320 and 500, batches 1, 2 and 4, beside
  :func:`fcn.training.batch_size.training_memory_estimate`.
* ``--deploy``: the forward of the files ``fcn export`` writes for deployment, each run by its
  own runtime without TensorFlow (what a deployed process imports): the same saved FCN-8s as
  LiteRT (``ai-edge-litert``'s interpreter, XNNPACK) and as ONNX (ONNX Runtime's CPU
  provider), float32 and int8 (``quantize="int8"``, calibrated on ``--calibration-images`` of
  the package's VOC sample: the scales do not change the speed), at the forward's 500x500.

The PyTorch model is written here layer for layer as pytorch-fcn's ``FCN8s`` (conv1_1 padded by
100, ceil-mode pools, 7x7 fc6, bilinear-shaped transposed convs, crops at fcn's
:data:`~fcn.layout.CROP_OFFSETS`); its worker never imports TensorFlow (the parent passes the
geometry). Needs ``pip install -e ".[bench]"`` (torch CPU).

    python benchmarks/vs_pytorch.py                  # 2 rounds of the main table
    python benchmarks/vs_pytorch.py --rounds 3 --estimate
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
from pathlib import Path

from procmem import process_peak_mib, reset_peak, rss_mib

VGG16_NOTOP = (
    Path(__file__).resolve().parents[2]
    / "shared/vgg16_imagenet_notop/vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
)
MAIN = [("build", 0, 0), ("forward", 500, 1), ("train", 500, 1), ("train", 320, 4),
        ("default", 320, 2)]
PRECISIONS = ("fp32", "bf16")
PEAK_FLOP_PER_CYCLE = {  # (vendor, bf16 hardware, cpu family) -> per core: fp32, bf16
    ("GenuineIntel", "AMX", 6): {"fp32": 64, "bf16": 1024},
    ("GenuineIntel", "AVX512-BF16", 6): {"fp32": 64, "bf16": 128},
    ("AuthenticAMD", "AVX512-BF16", 25): {"fp32": 32, "bf16": 64},  # Zen 4: 2 x 256-bit pipes
    ("AuthenticAMD", "AVX512-BF16", 26): {"fp32": 64, "bf16": 128},  # Zen 5: 2 x 512-bit
}
"""Nominal peak FLOP per cycle per core: AVX-512 FMA fp32 (2 x 16 lanes x 2), AVX512-BF16
dot products twice that, AMX tiles ~1,024 bf16 (the figure of issue 23); AMD's Zen 4 (cpu
family 25) runs AVX-512 on two 256-bit pipes, half of Intel's per cycle (measured: 3x3
convolutions at 95 GFLOP/s per core fp32, 210 bf16, at 2.6-3.3 GHz), and Zen 5 (EPYC, family
26) on two 512-bit pipes (measured: PyTorch's fp32 forward at 160 GFLOP/s per core at a
nominal 2.6 GHz, over Zen 4's whole peak)."""
ESTIMATE = [("train", size, batch) for size in (320, 500) for batch in (1, 2, 4)]


def torch_fcn8s(
    geometry: dict, num_classes: int = 21, channel_dropout: bool = True, dropout: float = 0.5
):
    """pytorch-fcn's FCN8s (the staged net), from fcn's geometry (pad, blocks, crop offsets);
    ``channel_dropout``: pytorch-fcn's ``Dropout2d`` after fc6 and fc7, else element-wise
    ``Dropout`` (fcn's). ``named_layers()`` maps fcn's layer names to the modules."""
    from torch import nn

    drop = nn.Dropout2d if channel_dropout else nn.Dropout

    class FCN8s(nn.Module):
        def __init__(self):
            super().__init__()
            blocks, channels = [], 3
            for b, (convs, filters) in enumerate(geometry["blocks"]):
                layers = []
                for i in range(convs):
                    pad = geometry["pad"] if b == i == 0 else 1
                    layers += [nn.Conv2d(channels, filters, 3, padding=pad), nn.ReLU(inplace=True)]
                    channels = filters
                blocks.append(nn.Sequential(*layers, nn.MaxPool2d(2, 2, ceil_mode=True)))
            self.blocks = nn.ModuleList(blocks)
            self.fc = nn.Sequential(
                nn.Conv2d(512, 4096, 7), nn.ReLU(inplace=True), drop(dropout),
                nn.Conv2d(4096, 4096, 1), nn.ReLU(inplace=True), drop(dropout),
            )  # fmt: skip
            self.score_fr = nn.Conv2d(4096, num_classes, 1)
            self.score_pool4 = nn.Conv2d(512, num_classes, 1)
            self.score_pool3 = nn.Conv2d(256, num_classes, 1)
            up = {"upscore2": (4, 2), "upscore_pool4": (4, 2), "upscore8": (16, 8)}
            for name, (k, s) in up.items():
                setattr(self, name, nn.ConvTranspose2d(num_classes, num_classes, k, s, bias=False))

        def named_layers(self) -> dict:
            convs = {f"conv{b + 1}_{i + 1}": block[2 * i]
                     for b, block in enumerate(self.blocks) for i in range(len(block) // 2)}
            names = ("score_fr", "score_pool4", "score_pool3", "upscore2", "upscore_pool4",
                     "upscore8")  # fmt: skip
            return {**convs, "fc6": self.fc[0], "fc7": self.fc[3],
                    **{name: getattr(self, name) for name in names}}  # fmt: skip

        def features(self, x):  # (fc7, [pool1, ..., pool5])
            pools, h = [], x
            for block in self.blocks:
                h = block(h)
                pools.append(h)
            return self.fc(h), pools

        def forward(self, x):
            h, pools = self.features(x)
            offsets = geometry["offsets"]
            h = self.upscore2(self.score_fr(h))
            for pool, score, up, crop in (
                (pools[3], self.score_pool4, self.upscore_pool4, "score_pool4c"),
                (pools[2], self.score_pool3, self.upscore8, "score_pool3c"),
            ):
                skip, o = score(pool), offsets[crop]
                h = up(h + skip[:, :, o : o + h.shape[2], o : o + h.shape[3]])
            o = offsets["score"]
            return h[:, :, o : o + x.shape[2], o : o + x.shape[3]].contiguous()

    return FCN8s()


def torch_cell(
    kind: str, size: int, batch: int, repeats: int, geometry: dict, precision: str
) -> dict:
    import contextlib

    import numpy as np
    import torch

    torch.set_num_threads(os.cpu_count())
    autocast = (
        (lambda: torch.autocast("cpu", torch.bfloat16)) if precision == "bf16"
        else contextlib.nullcontext
    )  # fmt: skip
    out = {"import_mib": rss_mib()["VmRSS"]}
    reset_peak()
    start = time.perf_counter()
    model = torch_fcn8s(geometry).to(memory_format=torch.channels_last)
    out.update(build_s=time.perf_counter() - start, built_mib=rss_mib()["VmRSS"],
               build_peak_mib=rss_mib()["VmHWM"],
               weights_mib=sum(p.numel() for p in model.parameters()) * 4 / 2**20)  # fmt: skip
    if kind == "build":
        return {**out, "peak_mib": process_peak_mib()}
    rng = np.random.default_rng(0)
    images = torch.from_numpy(rng.uniform(-120, 135, (batch, 3, size, size)).astype(np.float32))
    images = images.to(memory_format=torch.channels_last)
    labels = torch.from_numpy(rng.integers(0, 21, (batch, size, size)))
    if kind == "forward":
        model.eval()

        def step():
            with torch.inference_mode(), autocast():
                model(images).argmax(1)
    else:
        if kind == "default":  # the practical recipe's frozen blocks, from the parent
            for block in model.blocks[: geometry["frozen_blocks"]]:
                block.requires_grad_(False)
        trained = [p for p in model.parameters() if p.requires_grad]
        optimizer = torch.optim.SGD(trained, lr=1e-10, momentum=0.9, weight_decay=5e-4)
        loss_fn = torch.nn.CrossEntropyLoss(ignore_index=255)

        def step():
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                loss = loss_fn(model(images), labels)
            loss.backward()
            optimizer.step()

    return {**out, **_timed(step, repeats)}


def runtime_cell(size: int, batch: int, repeats: int, source: str) -> dict:
    """The forward of an exported ``.tflite`` or ``.onnx`` file by its own runtime: uint8
    images in, labels out; no TensorFlow in the process."""
    import numpy as np

    start = time.perf_counter()
    if source.endswith(".tflite"):
        from ai_edge_litert.interpreter import Interpreter
    else:
        import onnxruntime
    out = {"import_s": time.perf_counter() - start, "import_mib": rss_mib()["VmRSS"]}
    reset_peak()
    start = time.perf_counter()
    if source.endswith(".tflite"):
        runner = Interpreter(model_path=source, num_threads=os.cpu_count()).get_signature_runner()

        def forward(images):
            return runner(image=images)["labels"]
    else:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = os.cpu_count()
        session = onnxruntime.InferenceSession(source, options, providers=["CPUExecutionProvider"])

        def forward(images):
            return session.run(["labels"], {"image": images})[0]

    out.update(build_s=time.perf_counter() - start, built_mib=rss_mib()["VmRSS"],
               build_peak_mib=rss_mib()["VmHWM"],
               weights_mib=os.path.getsize(source) / 2**20)  # fmt: skip
    images = np.random.default_rng(0).integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
    return {**out, **_timed(lambda: np.asarray(forward(images)), repeats)}


def export_deployed(saved: Path, size: int, calibration_images: int) -> list[tuple[str, str, str]]:
    """``saved`` written as LiteRT and ONNX files of ``size`` x ``size``, float32 and int8:
    (runtime, precision, path) of each."""
    import fcn

    files = []
    for runtime, format in (("LiteRT", "litert"), ("ONNX Runtime", "onnx")):
        suffix = ".tflite" if format == "litert" else ".onnx"
        for precision in ("fp32", "int8"):
            quantize = {}
            if precision == "int8":
                quantize = {"quantize": "int8", "calibration": fcn.data.sample_voc_root(),
                            "calibration_images": calibration_images}  # fmt: skip
            path = saved.with_name(f"fcn8s_{precision}{suffix}")
            fcn.export_model(saved, path, format, size=(size, size), **quantize)
            files.append((runtime, precision, str(path)))
    return files


def fcn_cell(kind: str, size: int, batch: int, repeats: int, source: str, precision: str) -> dict:
    import numpy as np

    if source.endswith((".tflite", ".onnx")):
        return runtime_cell(size, batch, repeats, source)

    start = time.perf_counter()
    import keras

    import fcn
    from fcn.inference.streamed import compiled_forward
    from fcn.training.batch_size import training_memory_estimate
    from fcn.training.recipes import RECIPES
    from fcn.training.train import compile_for_training

    out = {"import_s": time.perf_counter() - start, "import_mib": rss_mib()["VmRSS"]}
    reset_peak()
    start = time.perf_counter()
    if kind in ("train", "default") and precision == "bf16":
        keras.mixed_precision.set_global_policy("mixed_bfloat16")  # what fcn.train sets
    bf16_forward = kind == "forward" and precision == "bf16"  # weights read into bf16: once
    if source.endswith(".keras"):
        model = fcn.load_model(source, precision="bfloat16" if bf16_forward else None)
    else:
        model = fcn.build_model("fcn8s", weights=source or None)
    out.update(build_s=time.perf_counter() - start, built_mib=rss_mib()["VmRSS"],
               build_peak_mib=rss_mib()["VmHWM"],
               weights_mib=model.count_params() * 4 / 2**20)  # fmt: skip
    if kind == "build":
        return {**out, "peak_mib": process_peak_mib()}
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (batch, size, size, 3), dtype=np.uint8)
    labels = rng.integers(0, 21, (batch, size, size), dtype=np.uint8)
    if kind == "forward":
        forward = compiled_forward(model, "labels")

        def step():
            np.asarray(forward(images))
    else:
        import tensorflow as tf

        from fcn.training.loop import train_step

        pretrained = kind == "default"  # the frozen blocks and the skip layers' rates
        compile_for_training(model, RECIPES["practical"], total_batches=1000,
                             pretrained=pretrained)  # fmt: skip
        out["estimate_mib"] = training_memory_estimate(model, size, batch) / 2**20
        batches = iter(tf.data.Dataset.from_tensors((images, labels)).repeat())
        fcn_step = train_step(model, tf.distribute.get_strategy())  # what fcn.train runs

        def step():
            float(fcn_step(batches))

    return {**out, **_timed(step, repeats)}


def _timed(step, repeats: int) -> dict:
    """First step (traces), then ``repeats`` steady steps: times (s); peak RSS of all the
    steps (``steps_peak_mib``) and of the steady ones alone (``steady_peak_mib``)."""
    reset_peak()
    start = time.perf_counter()
    step()
    first = time.perf_counter() - start
    first_peak = rss_mib()["VmHWM"]
    reset_peak()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    mem = rss_mib()
    return {
        "first_step_s": first,
        "step_s": statistics.median(times),
        "steps_peak_mib": max(first_peak, mem["VmHWM"]),
        "steady_peak_mib": mem["VmHWM"],
        "after_steps_mib": mem["VmRSS"],
        "peak_mib": process_peak_mib(),
    }


def run_cell(framework: str, kind: str, size: int, batch: int, args, extra: str,
             precision: str = "fp32", kernels: str = "") -> dict:  # fmt: skip
    command = [sys.executable, __file__, "--cell", framework, kind, str(size), str(batch), extra,
               precision, "--repeats", str(args.repeats)]  # fmt: skip
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    if kernels in ("oneDNN", "Eigen"):  # else a runtime of its own (LiteRT, ONNX Runtime)
        env["TF_ENABLE_ONEDNN_OPTS"] = {"oneDNN": "1", "Eigen": "0"}[kernels]
    run = subprocess.run(command, capture_output=True, text=True, env=env)
    if run.returncode:
        raise RuntimeError(f"{framework} {kind} {size} {batch}: {run.stderr[-2000:]}")
    row = json.loads(run.stdout.strip().splitlines()[-1])
    source = Path(extra).name if framework == "fcn" and extra else ""  # fcn: a file, or ""
    name = framework + (f" {kernels}" if kernels else "")
    row = {"framework": name, "kind": kind, "size": size, "batch": batch, "source": source,
           "precision": precision, **row}  # fmt: skip
    if "step_s" in row and size and kind != "default":  # a frozen body's backward: not counted
        flops = args.flops[size] * batch * (3 if kind == "train" else 1)
        row["tflops"] = flops / row["step_s"] / 1e12
        if precision in args.peak:  # int8: no nominal peak given
            row["peak_share"] = flops / row["step_s"] / args.peak[precision]
    return row


def forward_flops(model, size: int, width: int | None = None) -> int:
    """FLOPs (2 per multiply-add) of ``model``'s convolutions on one ``size`` x ``width`` image
    (height x width; ``width`` default ``size``)."""
    import keras
    import numpy as np

    convs = [layer for layer in model.layers if isinstance(layer, keras.layers.Conv2D)]
    probe = keras.Model(model.input, [layer.output for layer in convs])
    specs = probe.compute_output_spec(keras.KerasTensor((1, size, width or size, 3)))
    total = 0
    for layer, spec in zip(convs, specs):
        kh, kw, a, b = layer.kernel.shape  # transposed: (kh, kw, out, in), out = filters
        taps = kh * kw * (b if isinstance(layer, keras.layers.Conv2DTranspose) else a)
        if isinstance(layer, keras.layers.Conv2DTranspose):
            taps //= layer.strides[0] * layer.strides[1]  # each output reads 1/s^2 of the taps
        total += 2 * int(np.prod(spec.shape[1:])) * taps
    return total


def peak_flops() -> dict[str, float]:
    """This CPU's nominal peak FLOP/s per precision (cores x clock x :data:`PEAK_FLOP_PER_CYCLE`;
    bf16 without native hardware: fp32's), and the line that says so."""
    from fcn.cpu import cpu_info
    from fcn.device import native_bf16

    with open("/proc/cpuinfo") as f:
        info = {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in f if ":" in ln)}
    vendor, mhz = info["vendor_id"], float(info["cpu MHz"])
    per_cycle = PEAK_FLOP_PER_CYCLE.get((vendor, native_bf16(), int(info["cpu family"])))
    if per_cycle is None:
        fp32 = 64 if "avx512f" in cpu_info()[1] else 32
        per_cycle = {"fp32": fp32, "bf16": fp32}
    return {p: os.cpu_count() * mhz * 1e6 * per_cycle[p] for p in PRECISIONS}


def _median_rows(rows: list[dict]) -> dict:
    merged = dict(rows[0])
    for key, value in rows[0].items():
        if isinstance(value, float):
            merged[key] = statistics.median(row[key] for row in rows)
    return merged


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3, help="steady steps per cell")
    parser.add_argument("--estimate", action="store_true", help="also the estimate cells")
    parser.add_argument("--vgg16", default=str(VGG16_NOTOP), help="a Keras VGG16 weights file")
    kinds = sorted({kind for kind, _, _ in MAIN})
    parser.add_argument("--kinds", nargs="+", default=kinds, choices=kinds, help="cells to run")
    parser.add_argument("--precisions", nargs="+", default=list(PRECISIONS), choices=PRECISIONS)
    parser.add_argument("--kernels", nargs="+", default=["oneDNN", "Eigen"],
                        choices=["oneDNN", "Eigen"], help="fcn's kernel sets")  # fmt: skip
    parser.add_argument("--deploy", action="store_true",
                        help="also the forward of exported LiteRT and ONNX files, fp32 and int8")
    parser.add_argument("--calibration-images", type=int, default=4,
                        help="--deploy's int8 calibration (the VOC sample's training images)")
    parser.add_argument("--cell", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.cell:
        framework, kind, size, batch, extra, precision = args.cell
        if framework == "torch":
            out = torch_cell(kind, int(size), int(batch), args.repeats, json.loads(extra),
                             precision)  # fmt: skip
        else:
            out = fcn_cell(kind, int(size), int(batch), args.repeats, extra, precision)
        print(json.dumps(out))
        return
    import keras

    import fcn
    from fcn.device import cpu_summary
    from fcn.layout import CROP_OFFSETS, INPUT_PAD, VGG_BLOCKS
    from fcn.training.recipes import RECIPES

    print(f"# {cpu_summary()}", flush=True)
    args.peak = peak_flops()
    peaks = ", ".join(f"{p} {v / 1e12:.2f} TFLOP/s" for p, v in args.peak.items())
    print(f"# nominal peak: {peaks}", flush=True)
    offsets = CROP_OFFSETS["fcn8s"]
    frozen = RECIPES["practical"].frozen_blocks
    geometry = json.dumps(
        {"pad": INPUT_PAD, "blocks": VGG_BLOCKS, "offsets": offsets, "frozen_blocks": frozen}
    )
    saved = Path(tempfile.mkdtemp(prefix="fcn-vs-torch-")) / "fcn8s.keras"
    keras.utils.set_random_seed(0)
    reference = fcn.build_model("fcn8s", weights=None)
    reference.save(saved)
    args.flops = {size: forward_flops(reference, size) for _, size, _ in MAIN if size}
    del reference
    sources = [""] + ([args.vgg16] if os.path.exists(args.vgg16) else []) + [str(saved)]
    cells = []
    for kind, size, batch in (cell for cell in MAIN if cell[0] in args.kinds):
        if kind == "build":
            cells.append(("torch", kind, size, batch, geometry, "fp32", ""))
            cells += [("fcn", kind, size, batch, source, "fp32", "") for source in sources]
            continue
        for precision in args.precisions:
            cells.append(("torch", kind, size, batch, geometry, precision, ""))
            for kernels in args.kernels:
                if precision == "fp32" or kernels == "oneDNN":
                    source = str(saved) if kind == "forward" else ""  # load_model(precision=)
                    cells.append(("fcn", kind, size, batch, source, precision, kernels))
    if args.deploy:
        size, batch = next((size, batch) for kind, size, batch in MAIN if kind == "forward")
        for runtime, precision, path in export_deployed(saved, size, args.calibration_images):
            cells.append(("fcn", "forward", size, batch, path, precision, runtime))
    results: dict[tuple, list[dict]] = {}
    for round_ in range(args.rounds):
        for cell in cells:
            row = run_cell(*cell[:4], args, *cell[4:])
            results.setdefault(cell, []).append(row)
            print(json.dumps({"round": round_, **row}), flush=True)
    if args.estimate:
        for kind, size, batch in ESTIMATE:
            row = run_cell("fcn", kind, size, batch, args, "")
            results[("fcn", kind, size, batch, "estimate")] = [row]
            print(json.dumps({"round": "estimate", **row}), flush=True)
    summary = [_median_rows(rows) for rows in results.values()]
    print(json.dumps({"summary": summary}))
    print(TABLE_HEADER)
    for row in summary:
        print(_table_row(row))


TABLE_HEADER = (
    "| framework | cell | precision | source | import MiB | built MiB | build peak MiB "
    "| steps peak MiB | steady steps peak MiB | process peak MiB | step s | first step s "
    "| TFLOP/s | share of peak | estimate MiB |\n"
    f"|{'---|' * 15}"
)


def _table_row(row: dict) -> str:
    cell = row["kind"] + (f" {row['size']}x{row['size']} b{row['batch']}" if row["size"] else "")
    cols = [row["framework"], cell, row.get("precision", "fp32"), row["source"] or "-"]
    keys = ("import_mib", "built_mib", "build_peak_mib", "steps_peak_mib", "steady_peak_mib",
            "peak_mib")  # fmt: skip
    for key in keys:
        cols.append(f"{row[key]:,.0f}" if key in row else "-")
    for key in ("step_s", "first_step_s", "tflops"):
        cols.append(f"{row[key]:.2f}" if key in row else "-")
    cols.append(f"{row['peak_share']:.0%}" if "peak_share" in row else "-")
    cols.append(f"{row['estimate_mib']:,.0f}" if "estimate_mib" in row else "-")
    return "| " + " | ".join(cols) + " |"


if __name__ == "__main__":
    main()
