"""``benchmarks/reproduce_paper.py`` end to end at toy scale: every stage of the paper's table
trains on a synthetic VOC + SBD layout (train_aug) and is scored on seg11valid, each staged net
starts from the one before, and a second run resumes instead of training again.

The real VOC images that ship with fcn hold 8 of seg11valid's ids (the validation and scoring
set); SBD is written here (ids outside VOC, one class painted on each image)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import keras
import numpy as np
import pytest
from test_data_files import write_sbd

import fcn
from fcn.data import sample_voc_root, seg11valid_ids, voc_pairs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import reproduce_paper  # noqa: E402


def id_of(path: str) -> str:
    return Path(path).stem


TOY = ["--weights", "none", "--width", "0.0625", "--epochs", "1", "--images-per-epoch", "2",
       "--verbose", "0"]  # fmt: skip


def test_the_four_stages_train_score_and_resume(tmp_path, capsys, monkeypatch):
    voc = sample_voc_root()
    sample_val = voc_pairs(voc, "val")  # the 8 of seg11valid's 736 ids that ship with fcn
    assert set(map(id_of, sample_val.images)) <= set(seg11valid_ids())
    monkeypatch.setattr(fcn.data, "seg11valid_pairs", lambda root: voc_pairs(root, "val"))
    sbd = write_sbd(tmp_path / "sbd", {"train": ["2099_000001", "2099_000002"],
                                       "val": ["2099_000003"]})  # fmt: skip
    run_dir = tmp_path / "runs"
    table = tmp_path / "table.json"
    rows = reproduce_paper.main([str(voc), str(sbd), "--run-dir", str(run_dir), *TOY,
                                 "--json", str(table)])  # fmt: skip
    printed = capsys.readouterr().out
    assert [row["stage"] for row in rows] == [s.name for s in reproduce_paper.STAGES]
    assert json.loads(table.read_text()) == rows
    for row in rows:
        assert 0.0 <= row["mean_iou"] <= 1.0
        assert f"| {row['stage']} | {100 * row['mean_iou']:.1f} | {row['published']} |" in printed
        state = json.loads((run_dir / row["stage"] / "state.json").read_text())
        assert state["settings"]["variant"] == row["variant"]
    assert "expected per stage on NVIDIA A100" in printed
    # FCN-16s starts from FCN-32s' best: score_fr (zero when built) holds FCN-32s' trained
    # kernel before FCN-16s' first step, and its steps at 1/100 of the rate move it little
    first = keras.saving.load_model(run_dir / "fcn32s" / "best.keras", compile=False)
    second = keras.saving.load_model(run_dir / "fcn16s" / "best.keras", compile=False)
    a, b = (m.get_layer("score_fr").kernel.numpy() for m in (first, second))
    assert np.abs(a).max() > 0
    assert np.abs(b - a).max() < 0.5 * np.abs(a).max()
    # a second run resumes each finished stage: nothing trains again, the scores repeat
    before = {r["stage"]: (run_dir / r["stage"] / "best.keras").stat().st_mtime_ns for r in rows}
    again = reproduce_paper.main([str(voc), str(sbd), "--run-dir", str(run_dir), *TOY])
    assert [r["mean_iou"] for r in again] == pytest.approx([r["mean_iou"] for r in rows])
    after = {r["stage"]: (run_dir / r["stage"] / "best.keras").stat().st_mtime_ns for r in again}
    assert after == before
