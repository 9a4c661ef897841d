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
    """The ``VOC2012`` folder given it, ``VOCdevkit`` or the folder holding ``VOCdevkit``."""
    return _find_root(Path(root), ("", "VOC2012", "VOCdevkit/VOC2012"), "ImageSets/Segmentation")


def sbd_root(root: str | os.PathLike) -> Path:
    """SBD's ``dataset`` folder given it, ``benchmark_RELEASE`` or the folder holding that."""
    return _find_root(Path(root), ("", "dataset", "benchmark_RELEASE/dataset"), "cls")


def read_ids(path: str | os.PathLike) -> list[str]:
    """The image ids of a split file: one per line, blank lines ignored."""
    try:
        text = Path(path).read_text()
    except OSError as error:
        raise DataError(f"split file {os.fspath(path)}: cannot read ({error})") from error
    return [line.strip() for line in text.splitlines() if line.strip()]


def voc_ids(root: str | os.PathLike, split: str) -> list[str]:
    """Ids of a VOC 2012 segmentation split (``ImageSets/Segmentation/<split>.txt``)."""
    return read_ids(_split_file(voc_root(root) / "ImageSets" / "Segmentation", split, VOC_SPLITS))


def sbd_ids(root: str | os.PathLike, split: str) -> list[str]:
    """Ids of an SBD split (``benchmark_RELEASE/dataset/<split>.txt``)."""
    return read_ids(_split_file(sbd_root(root), split, SBD_SPLITS))


def seg11valid_ids() -> list[str]:
    """The 736 ids of ``seg11valid``, FCN's validation set: VOC 2011 val minus SBD train.

    Shipped as package data (``fcn/resources/seg11valid.txt``, provenance in its README).
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
        on_error: pairs with a missing file raise a :class:`DataError` naming them, or are
            skipped (see :data:`fcn.data.OnError`).
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
        on_error: as in :func:`voc_pairs`.
    """
    root_dir = sbd_root(root)
    ids = sbd_ids(root_dir, split) if isinstance(split, str) else list(split)
    return _pairs(root_dir, ids, "img/{}.jpg", "cls/{}.mat", on_error)


def exclude_ids(ids: Iterable[str], *excluded: Iterable[str]) -> list[str]:
    """The sorted distinct ``ids`` that are in none of ``excluded``."""
    drop = set(chain.from_iterable(excluded))
    return sorted(set(ids) - drop)


def train_aug_pairs(
    voc: str | os.PathLike, sbd: str | os.PathLike, *, on_error: OnError = "raise"
) -> SegmentationFiles:
    """``train_aug``: SBD train + SBD val + VOC 2012 train, minus VOC 2012 val (10,582 ids).

    Ids in VOC 2012 train use VOC's files (finer labels, with void borders); the others use
    SBD's. No id of VOC 2012 val is included, so that split stays a fair validation set.
    """
    voc_train = set(voc_ids(voc, "train"))
    ids = exclude_ids(
        chain(sbd_ids(sbd, "train"), sbd_ids(sbd, "val"), voc_train), voc_ids(voc, "val")
    )
    return voc_pairs(voc, [i for i in ids if i in voc_train], on_error=on_error) + sbd_pairs(
        sbd, [i for i in ids if i not in voc_train], on_error=on_error
    )


def seg11valid_pairs(voc: str | os.PathLike, *, on_error: OnError = "raise") -> SegmentationFiles:
    """The 736 ``seg11valid`` pairs (:func:`seg11valid_ids`) read from a VOC 2012 folder."""
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
