"""Lists of image/label file pairs: the whole per-image cost of a dataset until it is read."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from fcn.data.errors import DataError, OnError, report

IMAGE_SUFFIXES: tuple[str, ...] = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
LABEL_SUFFIXES: tuple[str, ...] = (".png", ".mat")
"""Label files: index PNGs (palette 'P' or grayscale 'L') or SBD-style ``.mat`` (GTcls)."""


@dataclass(frozen=True)
class SegmentationFiles:
    """Paired paths: ``labels[i]`` annotates ``images[i]``. Nothing is opened or decoded here.

    Build it with [`from_lists`][], [`from_folders`][] or the VOC/SBD listings; a million
    pairs cost two tuples of strings.

    Examples:
        >>> from fcn.data import sample_voc_root
        >>> root = sample_voc_root()
        >>> files = SegmentationFiles.from_folders(root / "JPEGImages", root / "SegmentationClass")
        >>> len(files), len(files.shard(4, 0)), Path(files.labels[0]).name
        (20, 5, '2007_000033.png')
    """

    images: tuple[str, ...]
    labels: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.images) != len(self.labels):
            raise DataError(f"{len(self.images)} images but {len(self.labels)} labels")

    def __len__(self) -> int:
        return len(self.images)

    @classmethod
    def from_lists(
        cls,
        images: Iterable[str | os.PathLike],
        labels: Iterable[str | os.PathLike],
        *,
        on_error: OnError = "raise",
    ) -> SegmentationFiles:
        """Pairs ``images[i]`` with ``labels[i]`` after checking that every file exists.

        Existence is checked with one directory listing per distinct folder, not one ``stat``
        per file. A pair with a missing file raises a [`DataError`][] naming the missing
        files, or is dropped (and logged) when ``on_error`` skips.
        """
        files = cls(tuple(map(os.fspath, images)), tuple(map(os.fspath, labels)))
        absent = _absent(files.images + files.labels)
        bad = {
            i: missing
            for i, pair in enumerate(zip(files.images, files.labels, strict=True))
            if (missing := [p for p in pair if p in absent])
        }
        if not bad:
            return files
        problems = [(p, "missing file") for missing in bad.values() for p in missing]
        report(problems, f"{len(bad)} of {len(files)} image/label pairs lack files", on_error)
        keep = [i for i in range(len(files)) if i not in bad]
        return cls(tuple(files.images[i] for i in keep), tuple(files.labels[i] for i in keep))

    @classmethod
    def from_folders(
        cls,
        image_dir: str | os.PathLike,
        label_dir: str | os.PathLike,
        *,
        on_error: OnError = "raise",
    ) -> SegmentationFiles:
        """Pairs ``image_dir/<stem>.<image suffix>`` with ``label_dir/<stem>.<label suffix>``.

        Pairs are sorted by stem. An image without a label, or a label without an image, raises
        a [`DataError`][] naming the stems (or is skipped and logged); so do two files of one
        stem in a folder.
        """
        images = _by_stem(Path(image_dir), IMAGE_SUFFIXES)
        labels = _by_stem(Path(label_dir), LABEL_SUFFIXES)
        unmatched = sorted(images.keys() ^ labels.keys())
        if unmatched:
            problems = [
                (images[s], "no label") if s in images else (labels[s], "no image")
                for s in unmatched
            ]
            report(problems, f"{image_dir} and {label_dir} do not match", on_error)
        stems = sorted(images.keys() & labels.keys())
        return cls(tuple(images[s] for s in stems), tuple(labels[s] for s in stems))

    def shard(self, num_shards: int, index: int) -> SegmentationFiles:
        """Every ``num_shards``-th pair starting at ``index``: disjoint shards for multi-worker."""
        if not 0 <= index < num_shards:
            raise ValueError(f"shard index {index} is not in [0, {num_shards})")
        return SegmentationFiles(self.images[index::num_shards], self.labels[index::num_shards])

    def duplicates(self) -> list[tuple[str, str]]:
        """The pairs that occur more than once, each named once, in order.

        Examples:
            >>> files = SegmentationFiles(("a.jpg", "b.jpg", "a.jpg"), ("a.png", "b.png", "a.png"))
            >>> files.duplicates()
            [('a.jpg', 'a.png')]
        """
        seen: set[tuple[str, str]] = set()
        repeated: dict[tuple[str, str], None] = {}
        for pair in zip(self.images, self.labels):
            if pair in seen:
                repeated[pair] = None
            seen.add(pair)
        return list(repeated)

    def __add__(self, other: SegmentationFiles) -> SegmentationFiles:
        return SegmentationFiles(self.images + other.images, self.labels + other.labels)


def _absent(paths: Sequence[str]) -> set[str]:
    """The paths that are not files, found with one ``os.scandir`` per distinct folder."""
    listings: dict[str, set[str]] = {}
    absent = set()
    for path in paths:
        folder, name = os.path.split(path)
        if folder not in listings:
            try:
                with os.scandir(folder or ".") as entries:
                    listings[folder] = {e.name for e in entries if not e.is_dir()}
            except (FileNotFoundError, NotADirectoryError):
                listings[folder] = set()
        if name not in listings[folder]:
            absent.add(path)
    return absent


def _by_stem(folder: Path, suffixes: Sequence[str]) -> dict[str, str]:
    if not folder.is_dir():
        raise DataError(f"folder not found: {folder}")
    found: dict[str, str] = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            stem, suffix = os.path.splitext(entry.name)
            if suffix.lower() not in suffixes or entry.is_dir():
                continue
            if stem in found:
                raise DataError(f"two files for {stem!r} in {folder}: {found[stem]}, {entry.path}")
            found[stem] = entry.path
    return found
