"""fcn.data.atomic.write_whole: the file appears whole or not at all, and no temporary stays."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fcn.data.atomic import write_whole


@given(
    old=st.one_of(st.none(), st.binary()),
    new=st.binary(),
    suffix=st.sampled_from(["", ".keras", ".json", ".tmp"]),
    durable=st.booleans(),
    fails=st.booleans(),
)
def test_a_file_is_replaced_whole_or_kept_and_no_temporary_stays(
    tmp_path_factory, old, new, suffix, durable, fails
):
    """Any content, over any former file or none: the path holds the new bytes after a write
    that returns, the old ones (or nothing) after a write that raises midway; the writer wrote a
    name of its own ending in the path's suffix, and only the path is left in the folder."""
    path = tmp_path_factory.mktemp("w") / f"state{suffix}"
    if old is not None:
        path.write_bytes(old)
    seen = []

    def write(tmp: Path, data: bytes) -> None:
        seen.append(tmp)
        tmp.write_bytes(data[: len(data) // 2])
        if fails:
            raise OSError("disk full")
        with open(tmp, "ab") as f:
            f.write(data[len(data) // 2 :])

    if fails:
        with pytest.raises(OSError, match="disk full"):
            write_whole(path, write, new, durable=durable)
    else:
        write_whole(path, write, new, durable=durable)
    expected = old if fails else new
    assert (path.read_bytes() if path.exists() else None) == expected
    # beside it, named as resume_state's clean-up finds it, the suffix kept for Keras' save
    assert seen[0].parent == path.parent and seen[0].name.startswith(f".{path.stem}.tmp-")
    assert seen[0].name.endswith(path.suffix)
    left = sorted(p.name for p in path.parent.iterdir())
    assert left == ([] if expected is None else [path.name])


def _files(folder: Path) -> dict[str, str] | None:
    if not folder.exists():
        return None
    return {str(f.relative_to(folder)): f.read_text() for f in folder.rglob("*") if f.is_file()}


@pytest.mark.parametrize("old", [False, True])
@pytest.mark.parametrize("durable", [False, True])
@pytest.mark.parametrize("fails", [False, True])
def test_a_folder_is_replaced_whole_or_kept_and_no_temporary_stays(tmp_path, old, durable, fails):
    """A write may make a folder (a SavedModel export): over a former folder or none, the path
    holds the new folder after a write that returns, the old one (or nothing) after a write
    that raises midway, and only the path is left beside it."""
    path = tmp_path / "export"
    if old:
        (path / "variables").mkdir(parents=True)
        (path / "saved_model.pb").write_text("old graph")
        (path / "variables" / "data").write_text("old weights")

    def write(tmp: Path) -> None:
        (tmp / "variables").mkdir(parents=True)
        (tmp / "saved_model.pb").write_text("new graph")
        if fails:
            raise OSError("disk full")
        (tmp / "variables" / "data").write_text("new weights")

    before = _files(path)
    if fails:
        with pytest.raises(OSError, match="disk full"):
            write_whole(path, write, durable=durable)
    else:
        write_whole(path, write, durable=durable)
    new = {"saved_model.pb": "new graph", str(Path("variables", "data")): "new weights"}
    assert _files(path) == (before if fails else new)
    assert [p.name for p in tmp_path.iterdir()] == ([] if fails and not old else [path.name])
