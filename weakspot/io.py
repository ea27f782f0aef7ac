"""Atomic artifact writers: a temp file in the same folder, then ``os.replace``.

A killed run leaves either the old artifact or the new one, never half a file.
These helpers take paths from their caller; the library knows no file layout.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator, List, Union

PathLike = Union[str, os.PathLike]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: In the name of a file being written (``.<name>.partial-XXXX<suffix>``): a kill -9 can leave one behind, never a
#: half-written artifact under the artifact's own name; `weakspot audit` sweeps them and .dvcignore hides them.
PARTIAL = ".partial-"


@contextlib.contextmanager
def atomic_path(path: PathLike, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success flush it to disk, give it the permissions the umask
    allows (``mkstemp`` makes it 0600, which would leave a served report unreadable) and rename it onto ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}{PARTIAL}", suffix=suffix or path.suffix, dir=path.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        with open(tmp_path, "rb+") as fh:
            os.fsync(fh.fileno())
        os.chmod(tmp_path, 0o666 & ~_umask())
        os.replace(tmp_path, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            tmp_path.unlink()
        raise


def write_text(path: PathLike, text: str) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_bytes(path: PathLike, data: bytes) -> Path:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def _json_default(obj: Any) -> Any:
    """``json.dumps(default=...)``: numpy scalars and arrays as Python numbers and lists, paths as strings."""
    try:
        import numpy as np

        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, np.ndarray):
            return obj.tolist()
    except ImportError:  # pragma: no cover
        pass
    if isinstance(obj, (Path, os.PathLike)):
        return os.fspath(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def write_json(path: PathLike, obj: Any) -> Path:
    return write_text(path, json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n")


def write_parquet(path: PathLike, df: "Any") -> Path:
    """Write a pandas DataFrame as Parquet (pyarrow), atomically."""
    with atomic_path(path) as tmp:
        df.to_parquet(tmp, engine="pyarrow", index=False)
    return Path(path)


def save_figure(path: PathLike, fig: "Any", dpi: int = 110) -> Path:
    """Save a matplotlib figure as PNG atomically and close it."""
    import matplotlib.pyplot as plt

    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=dpi, bbox_inches="tight", format="png")
    plt.close(fig)
    return Path(path)


def save_torch(path: PathLike, state: Any) -> Path:
    import torch

    with atomic_path(path) as tmp:
        torch.save(state, tmp)
    return Path(path)


def remove_partials(folder: PathLike) -> List[Path]:
    """Remove the temporary files of :func:`atomic_path` (``.<name>.partial-*``) under ``folder`` that a killed
    writer left behind; call it only when nothing is writing there. Returns the removed paths."""
    folder = Path(folder)
    gone = [f for f in folder.rglob(f".*{PARTIAL}*") if f.is_file()] if folder.is_dir() else []
    for f in gone:
        f.unlink()
    return gone
