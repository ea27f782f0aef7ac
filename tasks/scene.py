"""The rendered data set on disk: what the ``render`` stage writes and what scene targets and the examiner read."""

from __future__ import annotations

import json
from typing import Any, Dict, Tuple

import numpy as np

from weakspot.errors import DataError
from weakspot.io import atomic_path, write_json, write_parquet

from tasks.paths import RENDER


def write_render(images: np.ndarray, table: Any, scene: Dict[str, Any], lin: Dict[str, Any]) -> None:
    with atomic_path(RENDER / "images.npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, images, allow_pickle=False)
    write_parquet(RENDER / "views.parquet", table)
    write_json(RENDER / "scene.json", {"scene": scene, "lineage": lin})


def read_render() -> Tuple[np.ndarray, Any, Dict[str, Any]]:
    """(images, per-image table, the scene settings that rendered them); a DataError if the stage has not run."""
    import pandas as pd

    paths = [RENDER / "images.npy", RENDER / "views.parquet", RENDER / "scene.json"]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise DataError(f"rendered data set not found ({', '.join(missing)}); run the 'render' stage first")
    images = np.load(paths[0], allow_pickle=False)
    table = pd.read_parquet(paths[1])
    if len(images) != len(table):
        raise DataError(f"{paths[0]} holds {len(images)} images but {paths[1]} describes {len(table)}")
    return images, table, json.loads(paths[2].read_text())["scene"]
