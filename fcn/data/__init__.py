"""Pascal VOC, SBD and custom segmentation data, streamed from disk, memory bounded by the batch.

List pairs of files ([`voc_pairs`][], [`sbd_pairs`][], [`train_aug_pairs`][],
[`seg11valid_pairs`][], [`SegmentationFiles`][]), then read them with
[`train_dataset`][] (shuffled, augmented, batched crops) or [`eval_dataset`][] (full-size
pairs, one at a time). Labels are uint8 class indices, 255 (IGNORE_LABEL) for void.
"""

from fcn.data.augment import Augmenter
from fcn.data.decode import read_image, read_label, read_pair, write_label
from fcn.data.download import SBD, VOC2012, Archive, download_archive, download_sbd, download_voc
from fcn.data.errors import DataError, OnError, SkipLog
from fcn.data.files import SegmentationFiles
from fcn.data.pipeline import eval_dataset, train_dataset
from fcn.data.sample import SAMPLE_DIR, sample_voc_root
from fcn.data.synthetic import write_synthetic_voc
from fcn.data.voc import (
    exclude_ids,
    sbd_ids,
    sbd_pairs,
    seg11valid_ids,
    seg11valid_pairs,
    train_aug_pairs,
    voc_ids,
    voc_pairs,
)

__all__ = [
    "SAMPLE_DIR",
    "sample_voc_root",
    "SBD",
    "VOC2012",
    "Archive",
    "Augmenter",
    "DataError",
    "OnError",
    "SegmentationFiles",
    "SkipLog",
    "download_archive",
    "download_sbd",
    "download_voc",
    "eval_dataset",
    "exclude_ids",
    "read_image",
    "read_label",
    "read_pair",
    "sbd_ids",
    "sbd_pairs",
    "seg11valid_ids",
    "seg11valid_pairs",
    "train_aug_pairs",
    "train_dataset",
    "voc_ids",
    "voc_pairs",
    "write_label",
    "write_synthetic_voc",
]
