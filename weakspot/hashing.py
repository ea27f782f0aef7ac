"""Digests of files, the one helper for every place that hashes one (provenance of data, lineage, reruns, history).

Caveat first: DVC records md5 digests (dvc.lock), weakspot's own provenance sha256; both are read in chunks, so a
large file never sits in memory whole.

>>> import tempfile, os
>>> with tempfile.NamedTemporaryFile(delete=False) as f:
...     _ = f.write(b"abc")
>>> file_digest(f.name, "md5")
'900150983cd24fb0d6963f7d28e17f72'
>>> os.unlink(f.name)
"""

from __future__ import annotations

import hashlib
import os
from typing import Union


def file_digest(path: Union[str, os.PathLike], algorithm: str = "sha256", chunk: int = 1 << 20) -> str:
    """Hex digest of a file's bytes (``algorithm``: any of :mod:`hashlib`'s, e.g. ``sha256`` or ``md5``)."""
    h = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(chunk), b""):
            h.update(block)
    return h.hexdigest()


def sha256_file(path: Union[str, os.PathLike]) -> str:
    """Hex sha256 of a file's bytes."""
    return file_digest(path, "sha256")
