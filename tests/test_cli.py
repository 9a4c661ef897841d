"""The ``fcn`` command line in real subprocesses: happy paths and one-line user errors."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
from conftest import COMPUTING, assert_confusion_of, randomize, said
from PIL import Image
from test_cpu import ONEDNN_BY_DEFAULT
from test_data_download import Server, archive, voc_tar

import fcn
import fcn.cpu
import fcn.presets
from fcn.caffe import convert_caffe
from fcn.cli import EXAMPLES, build_parser, main
from fcn.data import read_label, sample_voc_root
from fcn.device import cpu_kernels
from fcn.testing import caffe_layers, write_caffemodel

VOC = str(sample_voc_root())
COMMANDS = [
    "train", "evaluate", "predict", "models", "find-batch-size", "download", "demo", "convert",
    "export", "info",
]  # fmt: skip
def fcn_cli(*args, cwd=None, env=None):
    """Run ``python -m fcn ARGS`` as a user would; returns the CompletedProcess."""
    environment = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "fcn", *map(str, args)], capture_output=True, text=True,
        cwd=cwd, env=environment, timeout=600,
    )  # fmt: skip


def closed_url() -> str:
    """An address on 127.0.0.1 where nothing listens: a download from it fails at once."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/"


def assert_user_error(run, *fragments):
    assert run.returncode == 2, run.stderr[-2000:]
    assert "Traceback" not in run.stderr
    lines = [line for line in run.stderr.splitlines() if line.startswith("fcn: error:")]
    assert len(lines) == 1, run.stderr[-2000:]
    for fragment in fragments:
        assert fragment in lines[0]


@pytest.fixture(scope="module")
def model_file(tiny_fcn8s, tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "tiny.keras"
    tiny_fcn8s.save(path)
    return path


def test_help_and_version(capsys):
    """The installed entry point in a subprocess; the help texts in-process (the same parser)."""
    assert fcn_cli("--version").stdout.strip() == f"fcn {fcn.__version__}"
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    for name in COMMANDS:
        assert name in out
    parser = build_parser()
    for name in COMMANDS:
        help_text = parser._subparsers._group_actions[0].choices[name].format_help()
        assert "examples:" in help_text and f"fcn {name}" in help_text
        assert EXAMPLES[name] in help_text


def test_help_and_version_answer_without_tensorflow():
    """``--version``, ``--help`` and every command's ``--help`` (and ``fcn models``) in a fresh
    interpreter as the entry point runs them: TensorFlow and Keras are never imported."""
    argvs = [["--version"], ["--help"], ["models"]] + [[name, "--help"] for name in COMMANDS]
    code = (
        "import contextlib, io, sys\n"
        "from fcn.cli import main\n"
        f"for argv in {argvs!r}:\n"
        "    with contextlib.redirect_stdout(io.StringIO()):\n"
        "        try:\n"
        "            assert main(argv) == 0, argv\n"
        "        except SystemExit as exit_:\n"
        "            assert exit_.code == 0, argv\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'tensorflow', 'keras'}))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "[]"
    assert run.stderr == ""


@pytest.mark.parametrize("verbose", [False, True])
def test_a_computing_command_says_one_line_of_its_own_and_hides_tensorflows(tmp_path, verbose):
    """Without --verbose, the standard error of a command that starts TensorFlow is fcn's own
    machine line and the error, nothing of TensorFlow's start-up; --verbose keeps both lines
    (and lets TensorFlow's through)."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL", "FCN_VERBOSE")}
    args = ["convert", str(tmp_path / "none.caffemodel"), "--out", str(tmp_path / "x.keras")]
    run = subprocess.run(
        [sys.executable, "-m", "fcn", *args, *(["--verbose"] if verbose else [])],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode == 2
    lines = run.stderr.strip().splitlines()
    ours = [line for line in lines if line.startswith("fcn: ")]
    assert len(ours) == 2 and ours[0].startswith(COMPUTING), lines
    assert f", {cpu_kernels()} kernels, " in ours[0] or "GPU" in ours[0]
    assert ours[1].startswith("fcn: error: ") and "none.caffemodel" in ours[1]
    if not verbose:
        assert lines == ours


@pytest.mark.parametrize("user_value", [None, "0", "1"])
@pytest.mark.parametrize(
    ("command", "workload"), [("train", "training"), ("evaluate", "inference")]
)
def test_a_command_takes_the_kernel_set_measured_fastest_for_its_work(
    tmp_path, command, workload, user_value
):
    """Unset, ``TF_ENABLE_ONEDNN_OPTS`` becomes the kernel set measured fastest for what the
    command runs on this CPU (TensorFlow's own default where nothing was measured), and the
    machine line says the choice was fcn's; set, the user's value stands, unremarked."""
    env = {k: v for k, v in os.environ.items() if k != "TF_ENABLE_ONEDNN_OPTS"}
    if user_value is not None:
        env["TF_ENABLE_ONEDNN_OPTS"] = user_value
    missing = tmp_path / "none"
    args = ["train", missing] if command == "train" else ["evaluate", missing / "m.keras", missing]
    run = subprocess.run([sys.executable, "-m", "fcn", *map(str, args)], capture_output=True,
                         text=True, env=env, timeout=300, cwd=tmp_path)  # its runs/ there
    assert run.returncode == 2, run.stderr[-2000:]
    line = next(line for line in run.stderr.splitlines() if line.startswith(COMPUTING))
    if "GPU" in line:
        return
    flags = fcn.cpu.cpu_info()[1]
    tf_default = "oneDNN" if flags & ONEDNN_BY_DEFAULT else "Eigen"
    fastest = fcn.cpu.fastest_kernels(workload)
    chosen = fastest if user_value is None else None
    expected = chosen or {"0": "Eigen", "1": "oneDNN", None: tf_default}[user_value]
    assert f", {expected} kernels" in line, line
    assert (f"fcn's choice for {workload}" in line) == (chosen is not None), line


def test_models_lists_the_presets_and_where_each_is(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FCN_WEIGHTS_DIR", str(tmp_path))
    monkeypatch.setenv("FCN_MODELS_URL", "http://127.0.0.1:9/")
    (tmp_path / "fcn16s-voc.keras").write_bytes(b"")
    assert main(["models"]) == 0
    out = capsys.readouterr().out.splitlines()
    listed = 2 * len(fcn.presets.PRESETS)  # two lines a model, then the quantised variants
    assert [line.split()[0] for line in out[:listed:2]] == list(fcn.presets.PRESETS)
    assert "\n".join(out[listed:]) == fcn.cli.QUANTISED_VARIANTS
    assert out[0].startswith("fcn8s-voc (default)  fcn8s, 21 classes, 65.5 mean IU")
    assert out[1].strip() == "downloaded on first use: http://127.0.0.1:9/fcn8s-heavy-pascal.caffemodel"
    assert out[3].strip() == f"cached: {tmp_path / 'fcn16s-voc.keras'}"


def test_info_prints_size_and_offsets(capsys):
    assert main(["info", "--variant", "fcn16s"]) == 0
    out = capsys.readouterr().out
    assert "crop offsets: {'score_pool4c': 5, 'score': 27}" in out
    assert "score_pool4" in out and "parameters: " in out


def test_predict_writes_palette_labels_and_overlays(model_file, tmp_path):
    image = np.random.default_rng(0).integers(0, 256, (41, 57, 3)).astype(np.uint8)
    Image.fromarray(image).save(tmp_path / "photo.jpg")
    run = fcn_cli("predict", tmp_path / "photo.jpg", "--model", model_file, "--out", tmp_path / "o")
    assert run.returncode == 0, run.stderr[-2000:]
    labels = read_label(tmp_path / "o" / "photo.png")
    assert labels.shape == (41, 57)
    np.testing.assert_array_equal(labels, fcn.predict(tmp_path / "photo.jpg", model_file))
    assert Image.open(tmp_path / "o" / "photo.png").mode == "P"
    assert Image.open(tmp_path / "o" / "photo_overlay.png").size == (57, 41)


def test_predict_user_errors(model_file, tmp_path):
    assert_user_error(
        fcn_cli("predict", tmp_path / "missing.jpg", "--model", model_file, "--out",
                tmp_path / "o"),
        f"{tmp_path / 'missing.jpg'}: no such image file",
    )
    (tmp_path / "x.jpg").write_bytes(b"")
    closed = closed_url()  # the default model cannot come
    assert_user_error(
        fcn_cli("predict", tmp_path / "x.jpg", "--out", tmp_path / "o", cwd=tmp_path,
                env={"FCN_WEIGHTS_DIR": str(tmp_path), "KERAS_HOME": str(tmp_path / "k"),
                     "FCN_MODELS_URL": closed}),
        "fcn8s-heavy-pascal.caffemodel", closed, "fcn convert",
    )  # fmt: skip


def _refused(capsys, *args) -> str:
    """``fcn ARGS`` in-process: a one-line user error (status 2); returns the line."""
    assert main([str(a) for a in args]) == 2
    err = said(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("fcn: error:"), err
    return err[0]


def _tree(folder) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}  # fmt: skip


def test_predict_never_writes_two_results_under_one_name(model_file, tmp_path, capsys):
    """Two images of one stem (in two folders, or two formats) would share a result: refused
    naming both and the result, before any work (the --out folder is never made)."""
    rng = np.random.default_rng(0)
    for name in ("a/photo.jpg", "b/photo.jpg", "c/photo.png", "c/photo.jpg", "d/Photo.jpg"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        Image.fromarray(rng.integers(0, 256, (20, 30, 3), np.uint8)).save(tmp_path / name)
    out = tmp_path / "out"
    for first, second in [("a/photo.jpg", "b/photo.jpg"), ("c/photo.jpg", "c/photo.png"),
                          ("a/photo.jpg", "d/Photo.jpg")]:  # one file where case is ignored
        line = _refused(capsys, "predict", tmp_path / first, tmp_path / second, "--out", out,
                        "--model", model_file)  # fmt: skip
        both = f"{tmp_path / first} and {tmp_path / second} would both be predicted into "
        assert both + f"{out / Path(second).stem}.png" in line and "separate --out" in line
        assert not out.exists()
    line = _refused(capsys, "predict", tmp_path / "c", "--out", out, "--model", model_file)
    assert str(tmp_path / "c" / "photo.jpg") in line and str(tmp_path / "c" / "photo.png") in line


def test_predict_never_overwrites_an_input_nor_an_earlier_run_unasked(model_file, tmp_path,
                                                                      capsys):  # fmt: skip
    """``fcn predict imgs/ --out imgs/`` where imgs/x.png is a user's image: refused (with
    --overwrite too) naming it, every byte of imgs/ kept, also when an input is reached by a
    link in --out; an --out holding an earlier run's results: refused naming them unless
    --overwrite, which replaces them with this run's and nothing else."""
    rng = np.random.default_rng(1)
    imgs = tmp_path / "imgs"
    imgs.mkdir()
    for name in ("x.png", "x.jpg", "y.jpg"):
        Image.fromarray(rng.integers(0, 256, (20, 30, 3), np.uint8)).save(imgs / name)
    (tmp_path / "link.png").symlink_to(imgs / "x.png")
    before = _tree(imgs)
    for images, out in [([imgs], imgs), ([imgs / "y.jpg"], imgs / "." ),
                        ([tmp_path / "link.png"], tmp_path)]:  # fmt: skip
        for extra in ([], ["--overwrite"]):
            line = _refused(capsys, "predict", *images, "--out", out, "--model", model_file,
                            *extra)  # fmt: skip
            assert f"--out {out} holds the input " in line and "apart from the images" in line
    real = tmp_path / "elsewhere"  # an input reached by a link: its file is OUT/z.png
    real.mkdir()
    Image.fromarray(rng.integers(0, 256, (20, 30, 3), np.uint8)).save(real / "z.png")
    (imgs / "z.png").symlink_to(real / "z.png")
    line = _refused(capsys, "predict", imgs / "z.png", "--out", real, "--model", model_file,
                    "--overwrite")  # fmt: skip
    assert f"{real / 'z.png'} is the input {imgs / 'z.png'} (a link)" in line
    (imgs / "z.png").unlink()
    assert _tree(imgs) == before
    out = tmp_path / "out"
    args = ["predict", str(imgs / "y.jpg"), "--out", str(out), "--model", str(model_file)]
    assert main(args) == 0
    capsys.readouterr()
    first = _tree(out)
    assert sorted(first) == ["y.png", "y_overlay.png"]
    (out / "y.png").write_bytes(b"the user's own")
    (out / "notes.txt").write_text("kept")
    line = _refused(capsys, "predict", imgs / "y.jpg", imgs / "x.jpg", "--out", out,
                    "--model", model_file)  # fmt: skip
    assert f"{out} already holds 2 of the files this run would write" in line
    assert "--overwrite" in line and str(out / "y_overlay.png") in line
    assert (out / "y.png").read_bytes() == b"the user's own"
    assert main([*args, "--overwrite"]) == 0
    capsys.readouterr()
    assert _tree(out) == {**first, "notes.txt": b"kept"}  # this run's results, nothing else


def test_predict_refuses_a_folder_without_images(model_file, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no image")
    line = _refused(capsys, "predict", tmp_path / "empty", "--out", tmp_path / "o",
                    "--model", model_file)  # fmt: skip
    assert f"{tmp_path / 'empty'}: no images in this folder" in line


def test_evaluate_prints_table_and_writes_json_and_plot(model_file, tmp_path):
    run = fcn_cli(
        "evaluate", model_file, VOC, "--split", "val", "--json", tmp_path / "r.json",
        "--precision", "float32",
        "--plot", tmp_path / "c.png",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "aeroplane" in run.stdout and "mean_iou" in run.stdout
    result = json.loads((tmp_path / "r.json").read_text())
    assert result["num_images"] == 8
    pairs = fcn.data.eval_dataset(fcn.data.voc_pairs(VOC, "val")).as_numpy_iterator()
    assert_confusion_of(fcn.load_model(model_file), pairs, np.array(result["confusion"]))
    drawn = fcn.EvaluationResult(fcn.ConfusionMatrix(np.array(result["confusion"])),
                                 tuple(fcn.VOC_CLASSES), result["num_images"])  # fmt: skip
    drawn.plot_confusion(tmp_path / "here.png")  # the plot of the JSON's matrix, drawn here
    with Image.open(tmp_path / "c.png") as cli, Image.open(tmp_path / "here.png") as here:
        np.testing.assert_array_equal(np.asarray(cli), np.asarray(here))


def test_evaluate_and_train_user_errors(model_file, tmp_path, capsys):
    assert_user_error(fcn_cli("evaluate", model_file, tmp_path / "nowhere"), "nowhere")
    for args, fragment in [
        (["evaluate", str(tmp_path / "none.keras"), VOC], "none.keras"),
        (["train", str(tmp_path / "nowhere"), "--weights", "none"], "nowhere"),
    ]:  # the same handler in-process (a subprocess costs seconds of TensorFlow start-up)
        assert main(args) == 2
        err = said(capsys.readouterr().err)
        assert len(err) == 1 and err[0].startswith("fcn: error:") and fragment in err[0]


def test_train_options_are_train_config_fields_and_only_those_given_are_passed():
    """No option given, none parsed (fcn.train then takes TrainConfig's defaults, or a resumed
    run's own settings); each option's help is its field's, with the field's default."""
    parser = build_parser()
    args = parser.parse_args(["train", "VOC"])
    options = {f.name for f in dataclasses.fields(fcn.TrainConfig) if f.metadata.get("cli", True)}
    assert {f.name for f in dataclasses.fields(fcn.TrainConfig)} - options == {"verbose"}
    assert not options & set(vars(args))
    train = parser._subparsers._group_actions[0].choices["train"]
    helps = {action.dest: action.help for action in train._actions}
    for field in dataclasses.fields(fcn.TrainConfig):
        if field.name in options:
            assert helps[field.name].startswith(field.metadata["help"].replace("%", "%%"))
            if field.default not in (None, False):
                assert helps[field.name].endswith(f"(default: {field.default})")


def test_train_options_land_in_the_config(monkeypatch, tmp_path, capsys):
    """Every kind of option (choices, none for None, a number, a flag, --no-x) reaches the
    TrainConfig that fcn.train receives, and the staged-training example parses."""
    calls = []

    def fake_train(voc_root, *, sbd_root, **given):
        calls.append((voc_root, fcn.TrainConfig(**given), sbd_root))
        return fcn.TrainResult(model=None, history=[], best_checkpoint=None, run_dir=tmp_path)

    monkeypatch.setattr(fcn, "train", fake_train)
    args = ["train", "VOC", "--sbd", "SBD", "--variant", "fcn16s", "--init-from", "a.keras"]
    args += ["--weights", "none", "--seed", "None", "--learning-rate", "1e-3", "--resume"]
    args += ["--no-augment", "--mixed-precision", "mixed_bfloat16", "--val-max-pixels", "9"]
    assert main(args) == 0
    expected = fcn.TrainConfig(
        variant="fcn16s", init_from="a.keras", weights=None, seed=None, learning_rate=1e-3,
        resume=True, augment=False, mixed_precision="mixed_bfloat16", val_max_pixels=9,
    )  # fmt: skip
    assert calls == [("VOC", expected, "SBD")]
    examples = [line.split("#")[0].split() for line in EXAMPLES["train"].splitlines()[1:]]
    for example in examples:
        assert main(example[1:]) == 0, example
    assert calls[-1][1] == fcn.TrainConfig(variant="fcn16s", init_from="runs/fcn32s/best.keras")
    assert len(calls) == 1 + len(examples)
    assert main(["train", "VOC", "--mixed-precision", "none"]) == 0  # float32 throughout
    assert calls[-1][1] == fcn.TrainConfig(mixed_precision=None)
    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "VOC", "--recipe", "fast"])
    assert "invalid choice: 'fast'" in capsys.readouterr().err


def test_train_runs_and_resumes(tmp_path, capsys):
    """In-process (the console script itself is run by the other tests): a first run, the
    refusal to overwrite, then a resume that gives only the run directory and the new epochs
    (the run keeps its width and the rest: only the options typed are passed), and a changed
    width refused in one line."""
    run_dir = str(tmp_path / "run")
    args = ["train", VOC, "--weights", "none", "--width", "0.0625", "--crop-size", "64"]
    args += ["--batch-size", "2", "--steps-per-epoch", "1", "--run-dir", run_dir]
    args += ["--val-every", "2"]  # one evaluation: after the resumed second epoch
    assert main([*args, "--epochs", "1"]) == 0
    assert "best model: (no validation" in capsys.readouterr().out
    assert main([*args, "--epochs", "2"]) == 2
    assert "resume" in capsys.readouterr().err
    with warnings.catch_warnings():
        warnings.filterwarnings("error", "nothing to resume")  # a real resume, not a new run
        assert main(["train", VOC, "--run-dir", run_dir, "--resume", "--epochs", "2"]) == 0
    assert f"best model: {tmp_path / 'run' / 'best.keras'}" in capsys.readouterr().out
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["epoch"] == 2 and state["iterations"] == 2 and state["best_epoch"] == 2
    assert state["settings"]["width"] == 0.0625 and state["settings"]["crop_size"] == 64
    capsys.readouterr()
    assert main(["train", VOC, "--run-dir", run_dir, "--resume", "--width", "0.125"]) == 2
    err = said(capsys.readouterr().err)
    assert len(err) == 1
    assert err[0].startswith("fcn: error: resume: width 0.125 differs from the run's 0.0625")


def test_train_that_diverges_exits_1_with_one_line_and_keeps_the_initial_model(tmp_path, capsys):
    """A learning rate of 1e30 overflows the weights in the first epoch, under any kernels."""
    args = ["train", VOC, "--weights", "none", "--width", "0.0625", "--crop-size", "64"]
    args += ["--batch-size", "2", "--steps-per-epoch", "3", "--epochs", "2"]
    args += ["--learning-rate", "1e30", "--val-every", "2", "--run-dir", str(tmp_path / "run")]
    assert main(args) == 1
    lines = [line for line in said(capsys.readouterr().err) if line.startswith("fcn:")]
    assert len(lines) == 1 and lines[0].startswith("fcn: training stopped: epoch 1: non-finite")
    assert "kept epoch-0000.keras" in lines[0]
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["checkpoint"] == "epoch-0000.keras" and state["history"] == []
    assert sorted(p.name for p in (tmp_path / "run").glob("*.keras")) == ["epoch-0000.keras"]


def test_find_batch_size_reports_a_batch(model_file, capsys):
    args = ["find-batch-size", "--model", str(model_file), "--crop-size", "64"]
    assert main([*args, "--max-batch", "4"]) == 0
    out = capsys.readouterr().out
    assert "batch   1: peak " in out and "batch   2: peak " in out
    assert "largest batch of 64x64 crops that fits: 4" in out  # the tiny model: up to the cap
    assert main([*args, "--memory-limit-gb", "0.001"]) == 1  # 1 MB: not even one crop
    assert "largest batch of 64x64 crops that fits: 0" in capsys.readouterr().out


def test_download_from_a_local_server(tmp_path, monkeypatch, capsys):
    with Server({"voc.tar": voc_tar()}) as server:
        local = archive(server, "voc.tar", voc_tar())
        monkeypatch.setattr(
            fcn.data, "download_voc", functools.partial(fcn.data.download_voc, archive=local)
        )
        assert main(["download", "voc", "--dest", str(tmp_path)]) == 0
    assert str(tmp_path / "VOCdevkit" / "VOC2012") in capsys.readouterr().out
    assert (tmp_path / "VOCdevkit" / "VOC2012" / "ImageSets").is_dir()


def test_demo_offline_trains_the_smoke_model_and_says_why(tmp_path):
    """The paper's FCN-8s cannot be had (its address refuses): the demo says so and why, then
    runs the smoke training end to end (run_demo in a fresh process, one 1-step epoch: the
    command line's --epochs would ask for the smoke training outright)."""
    closed = closed_url()
    out = str(tmp_path / "demo")
    code = f"from fcn.demo import run_demo; run_demo({out!r}, epochs=1, steps_per_epoch=1)"
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=600,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "FCN_MODELS_URL": closed,
             "KERAS_HOME": str(tmp_path / "k"), "FCN_WEIGHTS_DIR": str(tmp_path)},
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    assert "The paper's FCN-8s cannot be had here, so the demo trains the smoke model" in run.stdout
    assert f"{closed}fcn8s-heavy-pascal.caffemodel" in run.stdout
    assert "What these numbers mean: this is a smoke run" in run.stdout
    assert "model: a width-1/8 FCN-8s from a random initialisation" in run.stdout
    out = tmp_path / "demo"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["num_images"] == 8
    for name in ["metrics.txt", "confusion.png", "training_curves.png"]:
        assert (out / name).stat().st_size > 500, name
    assert len(list((out / "predictions").glob("*_compare.png"))) == 8
    truth = read_label(sample_voc_root() / "SegmentationClass" / "2007_000033.png")
    assert read_label(out / "predictions" / "2007_000033.png").shape == truth.shape == (366, 500)


def test_demo_scores_the_papers_fcn8s_when_it_can_be_had(tmp_path, monkeypatch, capsys):
    """fcn8s-voc served from 127.0.0.1 (a width-1/16 FCN-8s written as the paper's Caffe file,
    its MD5 the registry's): the demo downloads and converts it, trains nothing, scores it on
    the 8 val images and says it is the paper's model; its predictions are the converted
    model's."""
    source = randomize(fcn.build_model("fcn8s", weights=None, width=1 / 16), seed=3)
    served = tmp_path / "served.caffemodel"
    write_caffemodel(served, caffe_layers(source))
    known = fcn.presets.PRESETS["fcn8s-voc"]
    payload = served.read_bytes()
    md5 = hashlib.md5(payload).hexdigest()
    monkeypatch.setitem(fcn.presets.PRESETS, "fcn8s-voc", dataclasses.replace(known, md5=md5))
    monkeypatch.setenv("KERAS_HOME", str(tmp_path / "keras"))
    monkeypatch.setenv("FCN_WEIGHTS_DIR", str(tmp_path / "none"))
    out = tmp_path / "demo"
    with Server({known.caffemodel: payload}) as server:
        monkeypatch.setenv("FCN_MODELS_URL", server.url(""))
        assert main(["demo", "--out", str(out)]) == 0
        assert len(server.requests) == 1
    printed = capsys.readouterr().out
    assert "model: fcn8s-voc, the paper's trained FCN-8s" in printed
    assert "never seen in its training" in printed and "smoke" not in printed
    assert not (out / "run").exists() and not (out / "training_curves.png").exists()
    assert json.loads((out / "metrics.json").read_text())["num_images"] == 8
    converted = convert_caffe(served)
    image = sample_voc_root() / "JPEGImages" / "2007_000033.jpg"
    np.testing.assert_array_equal(
        read_label(out / "predictions" / "2007_000033.png"), fcn.predict(image, converted)
    )


def test_demo_lengths_imply_the_smoke_training(monkeypatch):
    """--epochs or --steps-per-epoch only mean something to the smoke training, so giving one
    runs it rather than being ignored beside the paper's model."""
    import fcn.demo

    calls = []
    monkeypatch.setattr(fcn.demo, "run_demo", lambda out, **kw: calls.append(kw))
    assert main(["demo"]) == 0
    assert main(["demo", "--epochs", "2"]) == 0
    assert main(["demo", "--steps-per-epoch", "3"]) == 0
    assert main(["demo", "--train"]) == 0
    assert [c["smoke"] for c in calls] == [False, True, True, True]
    assert calls[1]["epochs"] == 2 and "steps_per_epoch" not in calls[1]
    assert calls[2]["steps_per_epoch"] == 3 and "epochs" not in calls[0]
