"""Data sources: a spec string (``digits``, ``keel:phoneme``, ``csv:PATH`` ...) becomes a :class:`Dataset`.

Caveats first:

- Nothing is ever downloaded. ``torchvision:`` sources read an existing local copy (``download=False``) and raise a
  :class:`~weakspot.errors.DataError` naming the folder they expected when it is absent.
- ``csv:``/``parquet:`` sources need a named label column; every other column is numeric or text, which becomes a
  categorical column (codes into its sorted distinct values). An empty cell is a missing value, kept as NaN and given
  to the model as it is (:mod:`weakspot.data.missing`); an infinite value, or an empty label, is an error naming
  the column. Labels may be numbers or strings; the class codes follow the sorted order of the distinct label values.
- The shipped KEEL files are checked against their published sha256 (data/external/keel/README.md); a changed file
  is an error, because the audit's numbers would silently change with it.

Add a source with the registry's decorator; the function receives the text after ``kind:`` and the keyword arguments
``label`` and ``root``::

    from weakspot.data import register_source

    @register_source("mydata")
    def load_mydata(arg, *, label=None, root=None):
        return Dataset(...)

    load_source("mydata:v2")
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from weakspot.data.categories import encode, is_text, texts_of
from weakspot.data.dataset import Dataset
from weakspot.data.image_sources import load_imagefolder, load_npz, source_path
from weakspot.data.missing import check_table_values
from weakspot.errors import ConfigError, DataError
from weakspot.hashing import sha256_file  # noqa: F401  (weakspot.data.sha256_file)
from weakspot.registry import Registry

PathLike = os.PathLike | str

SOURCES = Registry("data source")
"""Registry of data-source kinds: name -> ``fn(arg: str, *, label, root) -> Dataset``."""

SPEC_FORMS = (
    "digits",
    "keel:phoneme",
    "keel:yeast1",
    "sklearn:breast_cancer",
    "csv:PATH (with label=COLUMN)",
    "parquet:PATH (with label=COLUMN)",
    "torchvision:MNIST|FashionMNIST|CIFAR10|SVHN (read from root=FOLDER)",
    "imagefolder:FOLDER (one sub-folder of images per class)",
    "npz:PATH (arrays x, y, optional classes)",
)
#: source kinds that take a size to resize their images to (data.image_size)
RESIZABLE = ("imagefolder", "npz")


def register_source(name: str) -> Callable:
    """Decorator that adds a data-source kind, usable as ``load_source("name:arg")``."""
    return SOURCES.register(name)


def default_keel_root() -> Path:
    """The repository's ``data/external/keel`` found relative to the package, so it works from a clone."""
    import weakspot

    return Path(weakspot.__file__).resolve().parents[1] / "data" / "external" / "keel"


def load_source(
    spec: str, *, label: Optional[str] = None, root: Optional[PathLike] = None, size: Optional[int] = None
) -> Dataset:
    """Load a data set from a spec string.

    Parameters
    ----------
    spec : str
        One of ``digits`` (scikit-learn's bundled 8x8 digits as 1x8x8 images in [0, 1]), ``keel:phoneme``,
        ``keel:yeast1`` (the KEEL files the GAD paper, seeds/001 Sec. V-A, uses), ``sklearn:breast_cancer``
        (scikit-learn's bundled Wisconsin diagnostic data, the ten ``mean ...`` features), ``csv:PATH``, ``parquet:PATH``
        (tabular, with ``label``) or ``torchvision:MNIST|FashionMNIST|CIFAR10|SVHN`` (a local copy under ``root``),
        or any kind added with :func:`register_source`.
    label : str, optional
        The label column of ``csv:``/``parquet:`` sources.
    root : path, optional
        Folder of ``keel:`` files (default: the repository's ``data/external/keel``) or of a torchvision data set;
        for ``csv:``/``parquet:`` a relative path is read from under it.
    size : int, optional
        ``imagefolder:``/``npz:`` sources: the side every image is resized to.

    Returns
    -------
    Dataset

    Raises
    ------
    ConfigError
        Unknown kind (the message lists the valid ones) or a missing required argument.
    DataError
        Missing file, missing label column, an empty label or an infinite feature cell, absent torchvision files.

    Examples
    --------
    >>> ds = load_source("digits")
    >>> ds.X.shape, ds.n_classes
    ((1797, 1, 8, 8), 10)
    """
    if not isinstance(spec, str) or not spec.strip():
        raise ConfigError(
            f"data source spec must be a non-empty string, got {spec!r}; valid forms: {', '.join(SPEC_FORMS)}"
        )
    kind, _, arg = spec.strip().partition(":")
    if kind not in SOURCES:
        raise ConfigError(
            f"unknown data source {spec!r} (kind {kind!r}); valid kinds: {', '.join(SOURCES.names())}; "
            f"forms: {', '.join(SPEC_FORMS)}"
        )
    if size is None:
        ds = SOURCES.get(kind)(arg, label=label, root=root)
    elif kind in RESIZABLE:
        ds = SOURCES.get(kind)(arg, label=label, root=root, size=int(size))
    else:
        raise ConfigError(
            f"data.image_size resizes the images of {' and '.join(k + ':' for k in RESIZABLE)} sources; "
            f"{spec!r} is not one"
        )
    if not isinstance(ds, Dataset):
        raise DataError(f"data source {kind!r} returned {type(ds).__name__}, expected weakspot.data.Dataset")
    ds.provenance.setdefault("spec", spec)
    return ds


# --------------------------------------------------------------------------------------------------- digits


@register_source("digits")
def _load_digits(arg: str, *, label: Optional[str] = None, root: Optional[PathLike] = None) -> Dataset:
    """scikit-learn's bundled UCI optical digits: 1797 images of 8x8 pixels with values 0..16, scaled to [0, 1]."""
    if arg:
        raise ConfigError(f"data source 'digits' takes no argument, got 'digits:{arg}'")
    import importlib.resources

    import sklearn
    from sklearn.datasets import load_digits

    bunch = load_digits()
    X = (bunch.data.reshape(-1, 1, 8, 8) / 16.0).astype(np.float32)
    y = bunch.target.astype(np.int64)
    data_file = importlib.resources.files("sklearn.datasets.data") / "digits.csv.gz"
    return Dataset(
        X=X,
        y=y,
        classes=[str(int(c)) for c in bunch.target_names],
        image_shape=(1, 8, 8),
        provenance={
            "spec": "digits",
            "files": {"sklearn/datasets/data/digits.csv.gz": sha256_file(str(data_file))},
            "description": (
                f"scikit-learn {sklearn.__version__} load_digits(): UCI optical recognition of handwritten digits, "
                "1797 images 8x8, pixel values 0..16 divided by 16"
            ),
        },
    )


# --------------------------------------------------------------------------------------------------- KEEL

# name -> (file, feature names, {raw label: class name} in class-code order, expected sha256, description).
# The sha256 values are those in data/external/keel/README.md.
KEEL_FILES: Dict[str, Tuple[str, List[str], Dict[str, str], str, str]] = {
    "phoneme": (
        "phoneme.dat",
        ["Aa", "Ao", "Dcl", "Iy", "Sh"],
        {"0": "nasal", "1": "oral"},
        "c0eebb5b33f68008d6030ed36148b79d3d370f060902fa0f23b9d801e213be58",
        "KEEL phoneme (ELENA project): nasal (0) vs oral (1) sounds, 5404 rows, 5 numeric features",
    ),
    "yeast1": (
        "yeast1.dat",
        ["mcg", "gvh", "alm", "mit", "erl", "pox", "vac", "nuc"],
        {"negative": "negative", "positive": "positive"},
        "136e13dc15462533e2f302e12ea56dd1a055d9da3c57e764e1f0a5d6b2d328d7",
        "KEEL yeast1 (UCI yeast, Horton and Nakai): NUC (positive) vs any other site (negative), 1484 rows, 8 features",
    ),
}


@register_source("keel")
def _load_keel(arg: str, *, label: Optional[str] = None, root: Optional[PathLike] = None) -> Dataset:
    """A shipped KEEL file: comma-separated, no header, numeric features then the class."""
    if arg not in KEEL_FILES:
        raise ConfigError(f"unknown KEEL data set 'keel:{arg}'; valid: {', '.join('keel:' + k for k in KEEL_FILES)}")
    fname, features, label_map, sha_expected, description = KEEL_FILES[arg]
    folder = Path(root) if root is not None else default_keel_root()
    path = folder / fname
    if not path.is_file():
        raise DataError(f"keel:{arg}: file not found: {path} (expected the shipped copy in data/external/keel/)")
    sha = sha256_file(path)
    if sha != sha_expected:
        raise DataError(f"keel:{arg}: {path} has sha256 {sha}, expected {sha_expected} (the shipped file was changed)")
    import pandas as pd

    df = pd.read_csv(path, header=None, skipinitialspace=True, dtype=str)
    if df.shape[1] != len(features) + 1:
        raise DataError(f"keel:{arg}: {path} has {df.shape[1]} columns, expected {len(features) + 1}")
    raw = df.iloc[:, -1].str.strip()
    codes = {k: i for i, k in enumerate(label_map)}
    y = raw.map(codes)
    if y.isna().any():
        bad = sorted(set(raw[y.isna()]))
        raise DataError(f"keel:{arg}: {path} has unknown class values {bad}; expected {list(label_map)}")
    try:
        X = df.iloc[:, :-1].astype(np.float32).to_numpy()
    except ValueError as exc:
        raise DataError(f"keel:{arg}: {path} has a non-numeric feature cell: {exc}") from None
    return Dataset(
        X=X,
        y=y.to_numpy(dtype=np.int64),
        classes=list(label_map.values()),
        feature_names=list(features),
        # the shipped copy is named by its place in the repository, so provenance is the same on every clone
        provenance={
            "spec": f"keel:{arg}",
            "files": {(f"data/external/keel/{fname}" if root is None else str(path)): sha},
            "description": description,
        },
    )


# --------------------------------------------------------------------------------------------------- scikit-learn


@register_source("sklearn")
def _load_sklearn(arg: str, *, label: Optional[str] = None, root: Optional[PathLike] = None) -> Dataset:
    """``sklearn:breast_cancer``: scikit-learn's bundled Wisconsin diagnostic breast-cancer data, the ten ``mean ...``
    features, classes ``["malignant", "benign"]`` (benign = code 1, scikit-learn's own coding)."""
    if arg != "breast_cancer":
        raise ConfigError(f"unknown scikit-learn data set 'sklearn:{arg}'; valid: sklearn:breast_cancer")
    import importlib.resources

    import sklearn
    from sklearn.datasets import load_breast_cancer

    bunch = load_breast_cancer()
    cols = [i for i, c in enumerate(bunch.feature_names) if str(c).startswith("mean ")]
    classes = [str(c) for c in bunch.target_names]
    if classes != ["malignant", "benign"]:  # pragma: no cover - scikit-learn's coding since 0.x
        raise DataError(f"sklearn:breast_cancer: unexpected target_names {classes}; expected ['malignant', 'benign']")
    data_file = importlib.resources.files("sklearn.datasets.data") / "breast_cancer.csv"
    return Dataset(
        X=bunch.data[:, cols].astype(np.float32),
        y=bunch.target.astype(np.int64),
        classes=classes,
        feature_names=[str(bunch.feature_names[i]) for i in cols],
        provenance={
            "spec": "sklearn:breast_cancer",
            "files": {"sklearn/datasets/data/breast_cancer.csv": sha256_file(str(data_file))},
            "description": (
                f"scikit-learn {sklearn.__version__} load_breast_cancer(): Wisconsin diagnostic breast cancer (UCI), "
                "569 rows, the ten 'mean ...' features of 30; malignant (0) vs benign (1)"
            ),
        },
    )


# --------------------------------------------------------------------------------------------------- tables


def _table_to_dataset(df: "Any", *, label: Optional[str], spec: str, path: Path, sha: str) -> Dataset:
    """A DataFrame with a label column and feature columns -> Dataset (a missing value stays NaN, an infinite one is an
    error; a text column becomes a categorical one, :mod:`weakspot.data.categories`)."""
    import pandas as pd

    columns = [str(c) for c in df.columns]
    df = df.copy()
    df.columns = columns
    if label is None:
        raise ConfigError(f"{spec}: a label column is required (label=COLUMN); available columns: {', '.join(columns)}")
    if label not in columns:
        raise DataError(f"{spec}: label column {label!r} not found in {path}; available columns: {', '.join(columns)}")
    features = [c for c in columns if c != label]
    if not features:
        raise DataError(f"{spec}: {path} has no feature columns besides the label column {label!r}")
    categories = {c: texts_of(df[c], where=f"{spec}: {path}") for c in features if is_text(df[c])}
    for c, texts in categories.items():
        df[c] = encode(df[c], texts)
    X = df[features].to_numpy(dtype=np.float64, na_value=np.nan)  # a nullable column's pd.NA as NaN
    check_table_values(X, features, where=f"{spec}: {path}")
    lab = df[label]
    if lab.isna().any():
        raise DataError(
            f"{spec}: label column {label!r} in {path} has {int(lab.isna().sum())} empty rows; "
            "a label cannot be missing (drop those rows, or give them as data.unlabelled)"
        )
    values = lab.to_numpy()
    if pd.api.types.is_float_dtype(lab) and np.all(np.mod(values, 1) == 0):
        values = values.astype(np.int64)
    uniq, y = np.unique(values, return_inverse=True)
    kinds = (
        f"{len(features) - len(categories)} numeric and {len(categories)} categorical"
        if categories
        else f"{len(features)} numeric"
    )
    return Dataset(
        X=X,
        y=y.astype(np.int64),
        classes=[str(u) for u in uniq],
        feature_names=features,
        provenance={
            "spec": spec,
            "files": {str(path): sha},
            "label": label,
            "description": f"{path.name}: {len(df)} rows, {kinds} features, label column {label!r}",
        },
        categories=categories,
    )


def _existing_file(spec: str, arg: str, root: Optional[PathLike]) -> Path:
    path = source_path(spec, arg, root)
    if not path.is_file():
        raise DataError(f"{spec}: file not found: {path.resolve()}")
    return path


def read_table(spec: str, root: Optional[PathLike] = None) -> Tuple["Any", Path]:
    """The DataFrame of a ``csv:PATH`` or ``parquet:PATH`` spec and its path (named errors for a missing or unreadable
    file)."""
    import pandas as pd

    kind, _, arg = spec.partition(":")
    path = _existing_file(spec, arg, root)
    if kind == "csv":
        try:
            return pd.read_csv(path), path
        except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
            raise DataError(f"{spec}: cannot parse {path} as CSV: {exc}") from None
    try:
        return pd.read_parquet(path, engine="pyarrow"), path
    except Exception as exc:  # pyarrow raises several unrelated types for a corrupt file  # noqa: BLE001
        raise DataError(f"{spec}: cannot read {path} as Parquet: {exc}") from None


@register_source("csv")
def _load_csv(arg: str, *, label: Optional[str] = None, root: Optional[PathLike] = None) -> Dataset:
    """A comma-separated file with a header row, a label column and numeric or text feature columns (relative to
    root)."""
    spec = f"csv:{arg}"
    df, path = read_table(spec, root)
    return _table_to_dataset(df, label=label, spec=spec, path=path, sha=sha256_file(path))


@register_source("parquet")
def _load_parquet(arg: str, *, label: Optional[str] = None, root: Optional[PathLike] = None) -> Dataset:
    """A Parquet table; one written by :func:`weakspot.data.write_split_parquet` keeps its images and classes."""
    from weakspot.data.frames import META_KEY, from_frame

    spec = f"parquet:{arg}"
    df, path = read_table(spec, root)
    if META_KEY in df.attrs and label in (None, "label"):
        ds = from_frame(df)
        ds.provenance = {**ds.provenance, "spec": spec, "files": {str(path): sha256_file(path)}}
        return ds
    return _table_to_dataset(df, label=label, spec=spec, path=path, sha=sha256_file(path))


# --------------------------------------------------------------------------------------------------- torchvision

# name -> (files or folder torchvision expects under root, class names when the data set has none)
TORCHVISION_SETS: Dict[str, Tuple[Tuple[str, ...], Optional[List[str]]]] = {
    "MNIST": (
        (
            "MNIST/raw/train-images-idx3-ubyte",
            "MNIST/raw/train-labels-idx1-ubyte",
            "MNIST/raw/t10k-images-idx3-ubyte",
            "MNIST/raw/t10k-labels-idx1-ubyte",
        ),
        None,
    ),
    "FashionMNIST": (
        (
            "FashionMNIST/raw/train-images-idx3-ubyte",
            "FashionMNIST/raw/train-labels-idx1-ubyte",
            "FashionMNIST/raw/t10k-images-idx3-ubyte",
            "FashionMNIST/raw/t10k-labels-idx1-ubyte",
        ),
        None,
    ),
    "CIFAR10": (("cifar-10-batches-py",), None),
    "SVHN": (("train_32x32.mat", "test_32x32.mat"), [str(i) for i in range(10)]),
}


@register_source("torchvision")
def _load_torchvision(arg: str, *, label: Optional[str] = None, root: Optional[PathLike] = None) -> Dataset:
    """A torchvision data set read from a local copy (``download=False``); train and test parts are concatenated.

    The official split sizes are kept in ``provenance["parts"]``; :func:`weakspot.data.split_dataset` makes the
    pipeline's own stratified split.
    """
    spec = f"torchvision:{arg}"
    if arg not in TORCHVISION_SETS:
        raise ConfigError(
            f"unknown torchvision data set {spec!r}; valid: {', '.join('torchvision:' + k for k in TORCHVISION_SETS)}"
        )
    if root is None:
        raise ConfigError(f"{spec}: root=FOLDER is required (the folder holding a local copy; nothing is downloaded)")
    root = Path(root).expanduser()
    expected, fixed_classes = TORCHVISION_SETS[arg]
    missing = [str(root / e) for e in expected if not (root / e).exists()]
    if missing:
        raise DataError(
            f"{spec}: data files not found under root {root}; expected {', '.join(missing)} "
            "(weakspot never downloads: copy the data set there, in torchvision's layout)"
        )
    import torchvision.datasets as tvd

    parts = []
    try:
        for part in ("train", "test"):
            if arg == "SVHN":
                parts.append(tvd.SVHN(str(root), split=part, download=False))
            else:
                parts.append(getattr(tvd, arg)(str(root), train=(part == "train"), download=False))
    except RuntimeError as exc:  # torchvision's "Dataset not found or corrupted"
        raise DataError(
            f"{spec}: torchvision could not read the copy under {root} ({exc}); expected {', '.join(str(root / e) for e in expected)}"
        ) from None

    xs, ys = [], []
    for ds in parts:
        data = ds.data.numpy() if hasattr(ds.data, "numpy") else np.asarray(ds.data)
        if arg in ("MNIST", "FashionMNIST"):
            data = data[:, None, :, :]  # (n, 28, 28) -> (n, 1, 28, 28)
        elif arg == "CIFAR10":
            data = data.transpose(0, 3, 1, 2)  # (n, 32, 32, 3) -> (n, 3, 32, 32)
        targets: Any = getattr(ds, "labels", None) if arg == "SVHN" else ds.targets  # torchvision: list or tensor
        xs.append(data)
        ys.append(np.asarray(targets.numpy() if hasattr(targets, "numpy") else targets, dtype=np.int64))
    X = np.concatenate(xs).astype(np.float32) / np.float32(255.0)
    y = np.concatenate(ys)
    classes = fixed_classes or [str(c) for c in parts[0].classes]
    files = {}
    for e in expected:
        p = root / e
        for f in sorted(p.rglob("*")) if p.is_dir() else [p]:
            if f.is_file():
                files[str(f)] = sha256_file(f)
    return Dataset(
        X=X,
        y=y,
        classes=classes,
        image_shape=tuple(X.shape[1:]),
        provenance={
            "spec": spec,
            "files": files,
            "parts": {"train": int(len(ys[0])), "test": int(len(ys[1]))},
            "description": f"torchvision {arg} from {root} (train then test part, pixels / 255)",
        },
    )


# --------------------------------------------------------------------------------------------------- the user's images

register_source("imagefolder")(load_imagefolder)
register_source("npz")(load_npz)
