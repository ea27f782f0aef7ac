"""Data sources, stratified splits, deliberately biased splits and the Parquet form of prepared data.

Caveats first: nothing here downloads anything; images are float32 ``(n, C, H, W)`` in [0, 1], tables float64
``(n, d)`` as read; labels are int64 codes into ``Dataset.classes``. See :mod:`weakspot.data.sources` for the spec
strings.

Examples
--------
>>> from weakspot.data import load_source, split_dataset, to_frame
>>> ds = load_source("digits")
>>> parts = split_dataset(ds.y, seed=0)
>>> train = ds.subset(parts["train"])
"""

from weakspot.data.bias import BIAS_PRESETS, BiasRule, Preset, biased_split_indices
from weakspot.data.dataset import Dataset
from weakspot.data.frames import from_frame, read_split_parquet, to_frame, write_split_parquet
from weakspot.data.sources import SOURCES, SPEC_FORMS, load_source, register_source, sha256_file
from weakspot.data.split import split_dataset

register = register_source

__all__ = [
    "BIAS_PRESETS",
    "BiasRule",
    "Dataset",
    "Preset",
    "SOURCES",
    "SPEC_FORMS",
    "biased_split_indices",
    "from_frame",
    "load_source",
    "read_split_parquet",
    "register",
    "register_source",
    "sha256_file",
    "split_dataset",
    "to_frame",
    "write_split_parquet",
]
