"""Any number of classes, named or not: data checks, training, resume, evaluation, prediction."""

from __future__ import annotations

import pytest
from conftest import said

import fcn
from fcn.classes import default_class_names, read_class_names
from fcn.cli import main
from fcn.data import read_label, voc_pairs, write_synthetic_voc
from fcn.model import class_names

TINY_RUN = dict(weights=None, width=1 / 16, crop_size=64, batch_size=2, steps_per_epoch=1)


def test_class_names_from_a_list_or_a_file(tmp_path):
    (tmp_path / "names.txt").write_text("# my classes\nbackground\n\ncat  # the pets\ndog\n")
    assert read_class_names(tmp_path / "names.txt") == ("background", "cat", "dog")
    assert read_class_names(["a", "b"]) == ("a", "b")
    assert default_class_names(21)[1] == "aeroplane" and default_class_names(2) == (
        "class_0", "class_1",
    )  # fmt: skip
    for bad, message in [(["a", "a"], "repeat"), ([], "one non-empty"), (["a", " "], "non-empty")]:
        with pytest.raises(ValueError, match=message):
            read_class_names(bad)
    with pytest.raises(ValueError, match="missing.txt: cannot read"):
        read_class_names(tmp_path / "missing.txt")
    with pytest.raises(ValueError, match="2 class names for num_classes=3"):
        fcn.build_model("fcn8s", 3, None, width=1 / 16, class_names=["a", "b"])


@pytest.mark.parametrize("num_classes", [3, 30])
def test_any_class_count_trains_resumes_evaluates_and_predicts(tmp_path, capsys, num_classes):
    root = write_synthetic_voc(
        tmp_path / "data", 4, {"train": 4, "val": 2}, shapes=((64, 80),), num_classes=num_classes
    )
    names = [f"thing_{i}" for i in range(num_classes)]
    (tmp_path / "names.txt").write_text("\n".join(names) + "\n")
    run = dict(run_dir=tmp_path / "run", verbose=0, **TINY_RUN)
    first = fcn.train(root, class_names=tmp_path / "names.txt", epochs=1, **run)
    assert first.failure is None and "val_mean_iou" in first.history[0]
    resumed = fcn.train(root, resume=True, epochs=2, **run)  # classes from the checkpoint
    assert [row["epoch"] for row in resumed.history] == [0, 1]
    model = fcn.load_model(resumed.best_checkpoint)
    assert model.output_shape[-1] == num_classes and class_names(model) == tuple(names)
    result = fcn.evaluate(model, root, "val")
    assert result.class_names == tuple(names) and result.confusion.shape == (num_classes,) * 2
    labels = [read_label(path, num_classes) for path in voc_pairs(root, "val").labels]
    assert result.num_pixels == sum(int((label < num_classes).sum()) for label in labels)
    prediction = fcn.predict(voc_pairs(root, "val").images[0], model)
    assert prediction.shape == (64, 80) and prediction.max() < num_classes
    assert main(["evaluate", str(resumed.best_checkpoint), str(root)]) == 0
    assert names[-1] in capsys.readouterr().out


def test_labels_beyond_the_class_count_are_refused_naming_the_file(tmp_path, capsys):
    splits = {"train": 4, "val": 4}
    root = write_synthetic_voc(tmp_path / "data", 4, splits, shapes=((64, 80),), num_classes=30)
    (tmp_path / "names.txt").write_text("a\nb\nc\n")
    args = ["train", str(root), "--class-names", str(tmp_path / "names.txt"), "--weights"]
    args += ["none", "--width", "0.0625", "--crop-size", "64", "--batch-size", "2"]
    args += ["--steps-per-epoch", "1", "--epochs", "1", "--run-dir", str(tmp_path / "run")]
    assert main(args) == 2
    err = said(capsys.readouterr().err)
    assert len(err) == 1 and err[0].startswith("fcn: error:")
    assert "SegmentationClass/2026_00000" in err[0]
    assert "are neither classes 0..2 nor the ignore label 255" in err[0]
    args[args.index("--class-names") : args.index("--class-names") + 2] = ["--num-classes", "30"]
    args[-1] = str(tmp_path / "run30")
    assert main(args) == 0
