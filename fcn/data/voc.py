"""Pascal VOC 2012 and SBD (Hariharan et al.) listings, and the FCN paper's split arithmetic."""

from __future__ import annotations

import os
from collections.abc import Iterable
from importlib import resources
from itertools import chain
from pathlib import Path

from fcn.data.errors import DataError, OnError
from fcn.data.files import SegmentationFiles

VOC_SPLITS: tuple[str, ...] = ("train", "val", "trainval")
SBD_SPLITS: tuple[str, ...] = ("train", "val")


def voc_root(root: str | os.PathLike) -> Path:
    """The ``VOC2012`` folder given it, ``VOCdevkit`` or the folder holding ``VOCdevkit``.

    Examples:
        >>> from fcn.data import SAMPLE_DIR, sample_voc_root
        >>> voc_root(SAMPLE_DIR) == voc_root(SAMPLE_DIR / "VOCdevkit") == sample_voc_root()
        True
    """
    return _find_root(Path(root), ("", "VOC2012", "VOCdevkit/VOC2012"), "ImageSets/Segmentation")


def sbd_root(root: str | os.PathLike) -> Path:
    """SBD's ``dataset`` folder given it, ``benchmark_RELEASE`` or the folder holding that.

    Examples:
        >>> import tempfile
        >>> top = Path(tempfile.mkdtemp())
        >>> (top / "benchmark_RELEASE" / "dataset" / "cls").mkdir(parents=True)
        >>> sbd_root(top).relative_to(top).as_posix()
        'benchmark_RELEASE/dataset'
    """
    return _find_root(Path(root), ("", "dataset", "benchmark_RELEASE/dataset"), "cls")


def read_ids(path: str | os.PathLike) -> list[str]:
    """The image ids of a split file: one per line, blank lines ignored.

    Examples:
        >>> from fcn.data import sample_voc_root
        >>> ids = read_ids(sample_voc_root() / "ImageSets" / "Segmentation" / "train.txt")
        >>> len(ids), ids[0]
        (12, '2007_000515')
    """
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise DataError(f"split file {os.fspath(path)}: cannot read ({error})") from error
    return [line.strip() for line in text.splitlines() if line.strip()]


def voc_ids(root: str | os.PathLike, split: str) -> list[str]:
    """Ids of a VOC 2012 segmentation split (``ImageSets/Segmentation/<split>.txt``).

    Examples:
        >>> from fcn.data import sample_voc_root
        >>> len(voc_ids(sample_voc_root(), "val")), voc_ids(sample_voc_root(), "val")[0]
        (8, '2007_000033')
    """
    return read_ids(_split_file(voc_root(root) / "ImageSets" / "Segmentation", split, VOC_SPLITS))


def sbd_ids(root: str | os.PathLike, split: str) -> list[str]:
    """Ids of an SBD split (``benchmark_RELEASE/dataset/<split>.txt``).

    Examples:
        >>> import tempfile
        >>> dataset = Path(tempfile.mkdtemp(), "benchmark_RELEASE", "dataset")
        >>> (dataset / "cls").mkdir(parents=True)
        >>> _ = (dataset / "train.txt").write_text("2008_000002\\n2008_000003\\n")
        >>> sbd_ids(dataset.parent, "train")
        ['2008_000002', '2008_000003']
    """
    return read_ids(_split_file(sbd_root(root), split, SBD_SPLITS))


def seg11valid_ids() -> list[str]:
    """The 736 ids of ``seg11valid``, FCN's validation set: VOC 2011 val minus SBD train.

    Shipped as package data (``fcn/resources/seg11valid.txt``, provenance in its README).

    Examples:
        >>> ids = seg11valid_ids()
        >>> len(ids), len(set(ids)), ids[0]
        (736, 736, '2007_000033')
    """
    with resources.as_file(resources.files("fcn") / "resources" / "seg11valid.txt") as path:
        return read_ids(path)


def voc_pairs(
    root: str | os.PathLike, split: str | Iterable[str], *, on_error: OnError = "raise"
) -> SegmentationFiles:
    """VOC 2012 pairs ``JPEGImages/<id>.jpg`` + ``SegmentationClass/<id>.png`` (palette PNG).

    Args:
        root: ``VOC2012``, ``VOCdevkit`` or the folder holding ``VOCdevkit``.
        split: ``"train"``, ``"val"``, ``"trainval"`` or an explicit list of ids.
        on_error: pairs with a missing file raise a [`DataError`][] naming them, or are
            skipped (see [`fcn.data.OnError`][]).

    Examples:
        >>> from fcn.data import sample_voc_root
        >>> files = voc_pairs(sample_voc_root(), "train")
        >>> len(files), Path(files.images[0]).name, Path(files.labels[0]).name
        (12, '2007_000515.jpg', '2007_000515.png')
    """
    root_dir = voc_root(root)
    ids = voc_ids(root_dir, split) if isinstance(split, str) else list(split)
    return _pairs(root_dir, ids, "JPEGImages/{}.jpg", "SegmentationClass/{}.png", on_error)


def sbd_pairs(
    root: str | os.PathLike, split: str | Iterable[str], *, on_error: OnError = "raise"
) -> SegmentationFiles:
    """SBD pairs ``img/<id>.jpg`` + ``cls/<id>.mat`` (MATLAB struct ``GTcls.Segmentation``).

    Args:
        root: ``benchmark_RELEASE``, its ``dataset`` folder or the folder holding it.
        split: ``"train"`` (8,498 ids), ``"val"`` (2,857) or an explicit list of ids.
        on_error: as in [`voc_pairs`][].

    Examples:
        >>> import tempfile
        >>> dataset = Path(tempfile.mkdtemp(), "benchmark_RELEASE", "dataset")
        >>> for folder, name in (("img", "2008_000002.jpg"), ("cls", "2008_000002.mat")):
        ...     (dataset / folder).mkdir(parents=True); (dataset / folder / name).touch()
        >>> Path(sbd_pairs(dataset.parent, ["2008_000002"]).labels[0]).name
        '2008_000002.mat'
    """
    root_dir = sbd_root(root)
    ids = sbd_ids(root_dir, split) if isinstance(split, str) else list(split)
    return _pairs(root_dir, ids, "img/{}.jpg", "cls/{}.mat", on_error)


def exclude_ids(ids: Iterable[str], *excluded: Iterable[str]) -> list[str]:
    """The sorted distinct ``ids`` that are in none of ``excluded``.

    Examples:
        >>> exclude_ids(["b", "a", "c", "a"], ["c"], ["d"])
        ['a', 'b']
    """
    drop = set(chain.from_iterable(excluded))
    return sorted(set(ids) - drop)


def train_aug_pairs(
    voc: str | os.PathLike, sbd: str | os.PathLike, *, on_error: OnError = "raise"
) -> SegmentationFiles:
    """``train_aug``: SBD train + SBD val + VOC 2012 train, minus VOC 2012 val (10,582 ids).

    Ids in VOC 2012 train use VOC's files (finer labels, with void borders); the others use
    SBD's. No id of VOC 2012 val is included, so that split stays a fair validation set.

    Examples:
        >>> import tempfile
        >>> from fcn.data import sample_voc_root
        >>> voc, sbd = sample_voc_root(), Path(tempfile.mkdtemp(), "dataset")
        >>> (sbd / "cls").mkdir(parents=True)
        >>> for split in ("train", "val"):  # SBD listing one VOC train and one VOC val id
        ...     _ = (sbd / f"{split}.txt").write_text(voc_ids(voc, split)[0])
        >>> len(train_aug_pairs(voc, sbd))  # VOC train's 12 (VOC's files); VOC val left out
        12
    """
    voc_train = set(voc_ids(voc, "train"))
    ids = exclude_ids(
        chain(sbd_ids(sbd, "train"), sbd_ids(sbd, "val"), voc_train), voc_ids(voc, "val")
    )
    return voc_pairs(voc, [i for i in ids if i in voc_train], on_error=on_error) + sbd_pairs(
        sbd, [i for i in ids if i not in voc_train], on_error=on_error
    )


def seg11valid_pairs(voc: str | os.PathLike, *, on_error: OnError = "raise") -> SegmentationFiles:
    """The 736 ``seg11valid`` pairs ([`seg11valid_ids`][]) read from a VOC 2012 folder.

    Examples:
        >>> from fcn.data import sample_voc_root
        >>> seg11valid_pairs(sample_voc_root())  # the 20-image sample lacks most of them
        Traceback (most recent call last):
        fcn.data.errors.DataError: 7... of 736 image/label pairs lack files: ...
    """
    return voc_pairs(voc, seg11valid_ids(), on_error=on_error)


def _pairs(
    root: Path, ids: list[str], image: str, label: str, on_error: OnError
) -> SegmentationFiles:
    """``root/image.format(id)`` with ``root/label.format(id)`` for each id."""
    return SegmentationFiles.from_lists(
        [root / image.format(i) for i in ids], [root / label.format(i) for i in ids],
        on_error=on_error,
    )  # fmt: skip


def _find_root(given: Path, candidates: tuple[str, ...], marker: str) -> Path:
    for candidate in candidates:
        if (given / candidate / marker).is_dir():
            return given / candidate
    raise DataError(
        f"dataset root not found: no {marker} folder in {given} or in "
        + ", ".join(str(given / c) for c in candidates if c)
    )


def _split_file(folder: Path, split: str, known: tuple[str, ...]) -> Path:
    path = folder / f"{split}.txt"
    if not path.is_file():
        raise DataError(f"split file not found: {path} (standard splits: {', '.join(known)})")
    return path
