"""The arithmetic behind issue 24's published figures: ``benchmarks/time_to_accuracy.py``'s
minutes-to-level table, its figure redrawn from the JSON, and its refusal of a one-sided seed.

The benchmark itself (two hours of training) is not run here; its helpers are, on curves made up
in the test, whose answers follow from the curve by hand.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import time_to_accuracy  # noqa: E402
from time_to_accuracy import levels_table, minutes_to  # noqa: E402

ROUNDING = 0.05
"""minutes_to prints one decimal: its answer is within half a tenth of a minute."""

curves = st.lists(
    st.tuples(st.floats(0.1, 10), st.floats(0, 1)), min_size=1, max_size=12
).map(
    lambda steps: [
        {"minutes": float(t), "mean_iou": v}
        for t, (_, v) in zip(np.cumsum([dt for dt, _ in steps]), steps)
    ]
)


@given(curves, st.floats(0, 1))
def test_minutes_to_is_the_first_crossing_of_the_measured_curve(points, level):
    """The answer is where the straight lines between measured points first reach ``level``:
    no measured point before it reaches it, the line there is at ``level``; nothing is assumed
    before the first measurement (no IoU of 0 at minute 0)."""
    times = np.array([p["minutes"] for p in points])
    ious = np.array([p["mean_iou"] for p in points])
    answer = minutes_to(points, level)
    if answer == "-":
        assert (ious < level).all()
    elif answer.startswith("<="):
        assert ious[0] >= level
        assert float(answer[2:]) == pytest.approx(times[0], abs=ROUNDING)
    else:
        t = float(answer)
        assert ious[0] < level, "reached at the first point: nothing measured before it"
        assert times[0] - ROUNDING <= t <= times[-1] + ROUNDING
        assert (ious[times < t - ROUNDING] < level).all(), "an earlier point already reached it"
        slope = np.abs(np.diff(ious) / np.diff(times)).max()
        assert abs(np.interp(t, times, ious) - level) <= slope * ROUNDING + 1e-9


def _runs() -> list[dict]:
    return [
        {"framework": "fcn", "label": "fcn seed 7", "machine": "a test CPU",
         "points": [{"minutes": 5.0, "images": 800, "mean_iou": 0.1},
                    {"minutes": 10.0, "images": 1600, "mean_iou": 0.3}]},
        {"framework": "torch", "label": "torch seed 7", "machine": "a test CPU",
         "points": [{"minutes": 5.0, "images": 360, "mean_iou": 0.25},
                    {"minutes": 10.0, "images": 720, "mean_iou": 0.27}]},
        {"framework": "fcn", "label": "fcn other", "machine": "a test CPU",
         "points": [{"minutes": 5.0, "images": 800, "mean_iou": 0.9}]},
    ]  # fmt: skip


def test_levels_table_by_hand():
    """fcn: 0.1 at 5 min, 0.3 at 10: 0.2 is half way (7.5), 0.05 was already reached at the
    first point (<=5.0), 0.4 never. torch: 0.25 then 0.27."""
    assert levels_table(_runs()[:2], [0.05, 0.2, 0.4]).splitlines() == [
        "| run | 0.05 | 0.2 | 0.4 |",
        "|---|---:|---:|---:|",
        "| fcn seed 7 | <=5.0 | 7.5 | - |",
        "| torch seed 7 | <=5.0 | <=5.0 | - |",
    ]


def _main(monkeypatch, *argv: str) -> None:
    monkeypatch.setattr(sys, "argv", ["time_to_accuracy.py", *argv])
    time_to_accuracy.main()


def test_levels_and_replot_read_only_the_runs_labelled(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(_runs()))
    figure = tmp_path / "seed7.png"
    drawn, plot = [], time_to_accuracy.plot

    def recording_plot(runs: list[dict], path: Path) -> None:
        drawn.extend(run["label"] for run in runs)
        plot(runs, path)

    monkeypatch.setattr(time_to_accuracy, "plot", recording_plot)
    _main(monkeypatch, "--levels", "0.2", "--replot", "--label", "seed 7", "--json", str(runs),
          "--figure", str(figure))  # fmt: skip
    table = capsys.readouterr().out.splitlines()
    assert table[2:] == ["| fcn seed 7 | 7.5 |", "| torch seed 7 | <=5.0 |"]  # not "fcn other"
    assert drawn == ["fcn seed 7", "torch seed 7"]
    width, height = Image.open(figure).size
    assert width > 500 and height > 200
    with pytest.raises(SystemExit, match="no run labelled 'seed 8'"):
        _main(monkeypatch, "--replot", "--label", "seed 8", "--json", str(runs))


def test_replot_without_a_figure_is_refused(tmp_path, monkeypatch):
    """The default figure is the committed AMX pair's: ``--replot`` never overwrites it."""
    runs = tmp_path / "runs.json"
    runs.write_text(json.dumps(_runs()))
    with pytest.raises(SystemExit, match="--replot needs --figure PATH"):
        _main(monkeypatch, "--replot", "--label", "seed 7", "--json", str(runs))


def test_a_seed_for_fcn_alone_is_refused(tmp_path, monkeypatch):
    """``--set seed=N`` would seed fcn's run and not PyTorch's: refused before any training."""
    with pytest.raises(SystemExit, match="--set seed=N would seed fcn alone: pass --seed N"):
        _main(monkeypatch, "--voc", str(tmp_path), "--weights", str(tmp_path), "--set", "seed=3")
