"""Machine facts (fcn.device): GPU memory growth, importing changes no device setting, when a
GPU is expected, and the one line the command line says."""

from __future__ import annotations

import subprocess
import sys

import pytest
import tensorflow as tf

import fcn
from fcn import device


@pytest.mark.parametrize(
    ("visible", "expected"),
    [(None, None), ("", None), ("-1", None), ("0", "CUDA_VISIBLE_DEVICES=0"),
     ("1,2", "CUDA_VISIBLE_DEVICES=1,2")],
)  # fmt: skip
def test_a_gpu_is_expected_where_cuda_visible_devices_names_one(monkeypatch, visible, expected):
    monkeypatch.setattr(device.os.path, "exists", lambda path: False)  # no /dev/nvidia0
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert device.expected_gpu() == expected


def test_a_device_file_makes_a_gpu_expected(monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(device.os.path, "exists", lambda path: path == "/dev/nvidia0")
    assert device.expected_gpu() == "/dev/nvidia0 exists"


@pytest.mark.parametrize(
    "flags", [frozenset(), frozenset({"avx512_bf16"}), frozenset({"amx_bf16"})]
)
@pytest.mark.parametrize("kernels", ["oneDNN", "Eigen"])
@pytest.mark.parametrize("gpu_expected", [False, True])
def test_the_machine_line_names_cpu_kernels_and_precision(monkeypatch, flags, kernels,
                                                          gpu_expected):  # fmt: skip
    """On a machine without GPUs: the CPU's model, the kernel set, and bf16 exactly where the
    CPU has native bf16 and oneDNN runs it; a warning first where a GPU was expected."""
    monkeypatch.setattr(device.tf.config, "list_physical_devices", lambda kind=None: [])
    monkeypatch.setattr(device, "cpu_info", lambda: ("Some CPU", flags))
    monkeypatch.setattr(device, "cpu_kernels", lambda: kernels)
    monkeypatch.setattr(
        device, "expected_gpu", lambda: "/dev/nvidia0 exists" if gpu_expected else None
    )
    line = device.compute_summary()
    native = {"avx512_bf16": "AVX512-BF16", "amx_bf16": "AMX"}.get(next(iter(flags), ""))
    tail = f"computing on the CPU: Some CPU, {kernels} kernels, "
    tail += (
        f"bfloat16 where precision is auto ({native})"
        if native and kernels == "oneDNN"
        else "float32"
    )
    assert tail in line
    assert (
        line.startswith("warning: /dev/nvidia0 exists but TensorFlow sees no GPU") == gpu_expected
    )


def test_memory_growth_is_enabled_for_every_gpu(monkeypatch):
    gpus = ["GPU:0", "GPU:1"]
    grown = []
    monkeypatch.setattr(
        tf.config, "list_physical_devices", lambda kind: gpus if kind == "GPU" else []
    )
    monkeypatch.setattr(
        tf.config.experimental, "set_memory_growth", lambda d, on: grown.append((d, on))
    )
    monkeypatch.setattr(tf.config.experimental, "get_memory_growth", lambda d: d == "GPU:1")
    fcn.device.enable_memory_growth()
    assert grown == [("GPU:0", True)]  # GPU:1 had it on already: not touched again

    def too_late(device, enable):
        raise RuntimeError("Physical devices cannot be modified after being initialized")

    monkeypatch.setattr(tf.config.experimental, "set_memory_growth", too_late)
    monkeypatch.setattr(tf.config, "list_physical_devices", lambda kind: [_FakeGpu()])
    with pytest.warns(UserWarning, match="memory growth is off"):
        fcn.device.enable_memory_growth()


IMPORT_SCRIPT = """
import os, sys, tempfile
import tensorflow as tf
calls = []
class Gpu:
    name = "/physical_device:GPU:0"
tf.config.list_physical_devices = lambda kind=None: [Gpu()] if kind == "GPU" else []
tf.config.experimental.get_device_details = lambda device: {}
tf.config.experimental.get_memory_growth = lambda device: False
tf.config.experimental.set_memory_growth = lambda device, on: calls.append(device)
import fcn
from fcn.cli import main
print(len(calls))
model = fcn.build_model("fcn8s", weights=None, width=1 / 16)
print(len(calls))
path = os.path.join(tempfile.mkdtemp(), "m.keras")
model.save(path)
fcn.load_model(path)
print(len(calls))
sys.stdout.flush()
assert main(["convert", "missing.caffemodel", "--out", "m.keras"]) == 2  # after the setting
print(len(calls))
"""


def test_importing_fcn_or_building_a_model_changes_no_device_setting_loading_one_does():
    """``import fcn`` and ``build_model`` have no global side effect; load_model turns on memory
    growth (as train does) before it creates variables, and so does a command of the ``fcn``
    command line before it runs. A fresh process: the first import."""
    run = subprocess.run([sys.executable, "-c", IMPORT_SCRIPT], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["0", "0", "1", "2"]


class _FakeGpu:
    name = "/physical_device:GPU:0"


@pytest.mark.parametrize("fastest", [None, "oneDNN", "Eigen"])
@pytest.mark.parametrize("running", ["oneDNN", "Eigen"])
@pytest.mark.parametrize("user_value", [None, "0"])
def test_advice_only_where_a_faster_kernel_set_was_measured_and_the_user_chose_none(
    monkeypatch, fastest, running, user_value
):
    monkeypatch.setattr(device, "fastest_kernels", lambda workload: fastest)
    monkeypatch.setattr(device, "cpu_kernels", lambda: running)
    if user_value is None:
        monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    else:
        monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", user_value)
    advice = device.kernels_advice("training")
    if fastest in (None, running) or user_value is not None:
        assert advice is None
    else:
        value = "1" if fastest == "oneDNN" else "0"
        assert f"faster under TensorFlow's {fastest} kernels than under {running}" in advice
        assert f"TF_ENABLE_ONEDNN_OPTS={value} before" in advice
        assert "fcn.choose_kernels('training')" in advice


def test_train_passes_the_advice_on_as_a_warning(monkeypatch, tmp_path):
    import fcn.training.train as training

    monkeypatch.setattr(training, "kernels_advice", lambda workload: f"advice for {workload}")
    with pytest.warns(UserWarning, match="advice for training"):
        fcn.train(fcn.data.sample_voc_root(), run_dir=tmp_path, weights=None, width=1 / 16,
                  epochs=1, steps_per_epoch=1, crop_size=64, batch_size=1, val_files=(),
                  verbose=0)  # fmt: skip
