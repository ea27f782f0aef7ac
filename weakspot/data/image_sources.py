"""A user's own images: ``imagefolder:PATH`` (a folder per class, torchvision's ``ImageFolder`` layout) and
``npz:PATH`` (arrays ``x``, ``y``, optional ``classes``).

Caveats first:

* Pixels are scaled to [0, 1] (8-bit images and ``uint8`` arrays divided by 255; float arrays must already lie in
  [0, 1]). A folder's images are grey (1 channel) when every file is grey, else RGB (3 channels).
* Images of different sizes are an error unless ``data.image_size`` states the size they are resized to (bilinear,
  Pillow); a stated size resizes every image.
* :mod:`weakspot.data.sources` registers both kinds. Files are read in sorted order; class codes follow the sorted folder names (``ImageFolder``'s order), or the
  ``classes`` array of an ``.npz``. Every file read is hashed into the provenance.
"""

from __future__ import annotations

from pathlib import Path
import os
from typing import Any, Dict, List, Optional

import numpy as np

from weakspot.data.dataset import Dataset
from weakspot.errors import ConfigError, DataError
from weakspot.hashing import sha256_file

#: the image files an image folder may hold (by suffix, case-insensitive)
PathLike = os.PathLike | str

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp")


def source_path(spec: str, arg: str, root: Optional[PathLike]) -> Path:
    """The path after a source's colon, under ``root`` when relative (a ConfigError when there is none)."""
    if not arg:
        raise ConfigError(f"data source {spec!r} needs a path after the colon, e.g. '{spec.split(':')[0]}:data/mine'")
    path = Path(arg).expanduser()
    if root is not None and not path.is_absolute():
        path = Path(root).expanduser() / path
    return path


def load_imagefolder(
    arg: str, *, label: Optional[str] = None, root: Optional[PathLike] = None, size: Optional[int] = None
) -> Dataset:
    """Images in one sub-folder per class (PNG, JPEG, ...), resized to ``size`` x ``size`` when given."""
    from PIL import Image, UnidentifiedImageError

    spec = f"imagefolder:{arg}"
    folder = source_path(spec, arg, root)
    if not folder.is_dir():
        raise DataError(f"{spec}: folder not found: {folder.resolve()}")
    class_dirs = sorted(d for d in folder.iterdir() if d.is_dir() and not d.name.startswith("."))
    if not class_dirs:
        raise DataError(f"{spec}: {folder} holds no class folders (expected {folder}/<class>/<image>.png)")
    files: List[Path] = []
    labels: List[int] = []
    for k, d in enumerate(class_dirs):
        found = sorted(f for f in d.rglob("*") if f.is_file() and f.suffix.lower() in IMAGE_SUFFIXES)
        if not found:
            raise DataError(f"{spec}: class folder {d.name!r} holds no images ({', '.join(IMAGE_SUFFIXES)})")
        files += found
        labels += [k] * len(found)
    images: List[Image.Image] = []
    grey = True
    for f in files:
        try:
            with Image.open(f) as opened:
                opened.load()
                grey &= opened.mode in ("1", "L", "LA", "I", "I;16", "F")
                images.append(opened.copy())
        except (UnidentifiedImageError, OSError) as exc:
            raise DataError(f"{spec}: cannot read image {f}: {exc}") from None
    sizes = sorted({im.size for im in images})
    if size is None and len(sizes) > 1:
        raise DataError(
            f"{spec}: images of {len(sizes)} sizes ({', '.join(f'{w}x{h}' for w, h in sizes[:4])}"
            f"{' ...' if len(sizes) > 4 else ''}); state the size to resize them to (data.image_size)"
        )
    mode = "L" if grey else "RGB"
    arrays = []
    for im in images:
        im = im.convert(mode)
        if size is not None and im.size != (size, size):
            im = im.resize((int(size), int(size)), Image.Resampling.BILINEAR)
        a = np.asarray(im, dtype=np.float32) / np.float32(255.0)
        arrays.append(a[None] if a.ndim == 2 else a.transpose(2, 0, 1))
    X = np.stack(arrays)
    return Dataset(
        X=X,
        y=np.asarray(labels, np.int64),
        classes=[d.name for d in class_dirs],
        image_shape=tuple(X.shape[1:]),
        provenance={
            "spec": spec,
            "files": {str(f): sha256_file(f) for f in files},
            "description": f"{folder}: {len(files)} images in {len(class_dirs)} class folders, "
            f"{'grey' if grey else 'RGB'} {X.shape[2]}x{X.shape[3]}"
            + (f" (resized to {size}x{size})" if size is not None else ""),
        },
    )


def _image_array(spec: str, x: np.ndarray) -> np.ndarray:
    """``(n, H, W)``, ``(n, H, W, C)`` or ``(n, C, H, W)`` with C in (1, 3) -> float32 ``(n, C, H, W)`` in [0, 1]."""
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
        x = x.transpose(0, 3, 1, 2)
    elif not (x.ndim == 4 and x.shape[1] in (1, 3)):
        raise DataError(
            f"{spec}: x has shape {x.shape}; expected images (n, H, W), (n, H, W, C) or (n, C, H, W) "
            "with 1 or 3 channels (a table goes in csv: or parquet:)"
        )
    if x.dtype == np.uint8:
        return x.astype(np.float32) / np.float32(255.0)
    if not np.issubdtype(x.dtype, np.number):
        raise DataError(f"{spec}: x has dtype {x.dtype}; expected uint8 or floats in [0, 1]")
    x = x.astype(np.float32)
    if not np.isfinite(x).all():
        raise DataError(f"{spec}: x holds NaN or infinite values")
    if x.min() < 0 or x.max() > 1:
        raise DataError(
            f"{spec}: x holds values in [{x.min():g}, {x.max():g}]; float images must lie in [0, 1] "
            "(or store uint8 pixels)"
        )
    return x


def load_npz(
    arg: str, *, label: Optional[str] = None, root: Optional[PathLike] = None, size: Optional[int] = None
) -> Dataset:
    """A NumPy ``.npz`` archive with ``x`` (images), ``y`` (class codes or names) and optionally ``classes``."""
    spec = f"npz:{arg}"
    path = source_path(spec, arg, root)
    if not path.is_file():
        raise DataError(f"{spec}: file not found: {path.resolve()}")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays: Dict[str, Any] = {k: z[k] for k in z.files}
    except (ValueError, OSError) as exc:
        raise DataError(f"{spec}: cannot read {path} as an .npz archive: {exc}") from None
    missing = [k for k in ("x", "y") if k not in arrays]
    if missing:
        raise DataError(
            f"{spec}: {path} lacks array(s) {missing}; it holds {sorted(arrays)} (expected x, y, optionally classes)"
        )
    x, y = arrays["x"], np.asarray(arrays["y"]).reshape(-1)
    if len(x) != len(y):
        raise DataError(f"{spec}: x has {len(x)} rows but y {len(y)}")
    X = _image_array(spec, np.asarray(x))
    if size is not None and X.shape[2:] != (size, size):
        import torch

        X = (
            torch.nn.functional.interpolate(
                torch.from_numpy(X), size=(int(size), int(size)), mode="bilinear", align_corners=False
            )
            .clamp(0, 1)
            .numpy()
        )
    if "classes" in arrays:
        classes = [str(c) for c in np.asarray(arrays["classes"]).reshape(-1)]
        if np.issubdtype(y.dtype, np.integer):
            codes = y.astype(np.int64)
        else:
            unknown = sorted(set(map(str, y)) - set(classes))
            if unknown:
                raise DataError(f"{spec}: y holds labels {unknown[:5]} that are not in classes {classes}")
            codes = np.array([classes.index(str(v)) for v in y], np.int64)
    else:
        uniq, codes = np.unique(y, return_inverse=True)
        classes = [str(u) for u in uniq]
    if len(codes) and (codes.min() < 0 or codes.max() >= len(classes)):
        raise DataError(f"{spec}: y holds codes in [{codes.min()}, {codes.max()}] but there are {len(classes)} classes")
    return Dataset(
        X=X,
        y=codes,
        classes=classes,
        image_shape=tuple(X.shape[1:]),
        provenance={
            "spec": spec,
            "files": {str(path): sha256_file(path)},
            "description": f"{path.name}: {len(X)} images of shape {tuple(X.shape[1:])}, {len(classes)} classes",
        },
    )
