"""The notebooks: saved as notebooks/build.py writes them, with outputs, and they run top to bottom.

Running the three takes about 3 minutes on 2 CPU cores (``FCN_NOTEBOOK_FAST=1`` settings), each
on a Jupyter kernel of this interpreter.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import nbformat
import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
_spec = importlib.util.spec_from_file_location("build_notebooks", NOTEBOOKS / "build.py")
build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(build)

PICTURES = {"quickstart": 2, "train_and_evaluate": 2, "memory": 1}
"""PNG outputs each notebook shows at least."""


def outputs(nb: nbformat.NotebookNode) -> list[dict]:
    return [output for cell in nb.cells if cell.cell_type == "code" for output in cell.outputs]


def pictures(nb: nbformat.NotebookNode) -> int:
    return sum("image/png" in output.get("data", {}) for output in outputs(nb))


def check_memory_growth(nb: nbformat.NotebookNode) -> None:
    """Peak RSS per image: the cache-everything pipeline grows by MBs, fcn's does not."""
    cell = next(c for c in nb.cells if c.source.startswith("growth = "))
    (result,) = [o for o in cell.outputs if o.output_type == "execute_result"]
    growth = ast.literal_eval(result["data"]["text/plain"])
    cached, streaming = growth["cache everything"], growth["fcn.data.train_dataset"]
    assert cached > 5, growth  # ~9.8 MB of float32 image and one-hot label per image
    assert cached > 20 * streaming, growth


@pytest.mark.parametrize("name", list(build.NOTEBOOKS))
def test_saved_notebook_is_built_and_run(name):
    saved = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    built = build.notebook(name)
    cells = [(c.cell_type, c.source) for c in saved.cells]
    assert cells == [(c.cell_type, c.source) for c in built.cells], (
        f"{name}.ipynb differs from notebooks/build.py: run `python notebooks/build.py {name}`"
    )
    code = [c for c in saved.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    assert not [o for o in outputs(saved) if o.output_type == "error"]
    assert pictures(saved) >= PICTURES[name]
    if name == "memory":
        check_memory_growth(saved)


@pytest.mark.parametrize("name", list(build.NOTEBOOKS))
def test_notebook_runs_top_to_bottom(name):
    nb = build.notebook(name)
    build.execute(nb, fast=True)  # raises CellExecutionError naming the first failing cell
    assert pictures(nb) >= PICTURES[name]
    if name == "memory":
        check_memory_growth(nb)
