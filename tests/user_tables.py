"""Tables as users ship them, with missing values, and the models they fit on them (issue 37): files for the tests.

Caveats first: every table is written as CSV and each model is fitted on what ``pandas.read_csv`` gives back from the
training file (an empty numeric cell NaN, an empty text cell NaN), so the model is fitted on exactly the values an
audit reads. Nothing here runs an audit; the functions write into ``root / folder`` and return params.yaml target
entries whose paths are relative to ``root`` (the repository an audit runs in).

* :func:`write_missing_csv_and_model`: 10% of ``income`` missing, some ``city`` cells empty, a scikit-learn Pipeline
  (the text column one-hot encoded inside it, its missing cells a category of the encoder) around a
  HistGradientBoosting classifier. Its training rows of class ``yes`` with ``income`` missing were dropped, so the
  model never saw a ``yes`` without an income: the planted weak spot is ``income is missing``.
* :func:`write_boosted_models`: an XGBoost and a LightGBM classifier (scikit-learn API, pickled, each inside a
  Pipeline whose OrdinalEncoder codes the text column and keeps its missing cells NaN) on a table with missing numeric
  and text cells; labels 0/1, as XGBoost asks.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any, Dict, Tuple

import numpy as np

CITIES = ("north", "south", "east", "west")


def missing_table(n: int = 4000, seed: int = 0) -> Any:
    """``income`` (10% missing), ``age``, ``hours`` and ``city`` (5% empty), and the label ``target`` (``no`` or
    ``yes``: mostly income and age, a little city, 3% noise)."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "income": rng.normal(50.0, 15.0, n).round(1),
            "age": rng.integers(18, 80, n).astype(float),
            "city": rng.choice(CITIES, n),
            "hours": rng.normal(38.0, 6.0, n).round(1),
        }
    )
    score = 0.12 * (df["income"] - 50) + 0.06 * (df["age"] - 48) + np.where(df["city"] == "east", 0.8, 0.0)
    noisy = rng.random(n) < 0.03
    yes = (score > 0) ^ noisy
    df["target"] = np.where(yes, "yes", "no")
    df.loc[rng.random(n) < 0.10, "income"] = np.nan
    df.loc[rng.random(n) < 0.05, "city"] = None
    return df


def _read_back(df: Any, path: Path) -> Any:
    """``df`` written to ``path`` as CSV and read back as an audit reads it."""
    import pandas as pd

    path.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(path, index=False)
    return pd.read_csv(path)


def missing_model() -> Any:
    """The user's Pipeline: ``city`` one-hot (a missing city a category of its own, an unseen one ignored), the
    numeric columns as they are (NaN included) into a HistGradientBoosting classifier."""
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import HistGradientBoostingClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    return make_pipeline(
        ColumnTransformer(
            [("city", OneHotEncoder(handle_unknown="ignore", sparse_output=False), ["city"])],
            remainder="passthrough",
        ),
        HistGradientBoostingClassifier(max_iter=100, random_state=0),
    )


def missing_parts(root: Path, folder: str = "data/missing", seed: int = 0) -> Tuple[Any, Any, Any]:
    """Write ``train.csv`` (the rows the model was fitted on: no ``yes`` with ``income`` missing) and ``test.csv``
    under ``root / folder``; return (train, test, the fitted model), the frames as read back from the files."""
    df = missing_table(seed=seed)
    rng = np.random.default_rng(seed + 1)
    in_train = rng.random(len(df)) < 0.5
    planted = df["income"].isna() & (df["target"] == "yes")  # the rows the user's training data lost
    out = Path(root) / folder
    train = _read_back(df[in_train & ~planted], out / "train.csv")
    test = _read_back(df[~in_train], out / "test.csv")
    model = missing_model().fit(train.drop(columns="target"), train["target"])
    return train, test, model


def write_missing_csv_and_model(root: Path, folder: str = "data/missing") -> Dict[str, Any]:
    """The CSVs and ``model.pkl`` of the planted missingness weak spot under ``root / folder``; returns the target
    entry ``{"missing": {...}}`` (the weak segment to find: ``income is missing``)."""
    _, _, model = missing_parts(root, folder)
    (Path(root) / folder / "model.pkl").write_bytes(pickle.dumps(model))
    return {
        "missing": {
            "data": {"train": f"csv:{folder}/train.csv", "test": f"csv:{folder}/test.csv", "label": "target"},
            "model": {"kind": "sklearn", "weights": f"{folder}/model.pkl"},
        }
    }


def boosted_table(n: int = 3000, seed: int = 1) -> Any:
    """A table with missing numeric (``income`` 10%, ``debt`` 5%) and text (``city`` 5%) cells and a 0/1 label."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "income": rng.normal(50.0, 15.0, n).round(1),
            "debt": rng.gamma(2.0, 5.0, n).round(1),
            "city": rng.choice(CITIES, n),
            "age": rng.integers(18, 80, n).astype(float),
        }
    )
    score = 0.1 * (df["income"] - 50) - 0.15 * (df["debt"] - 10) + 0.04 * (df["age"] - 48)
    df["target"] = ((score + np.where(df["city"] == "west", -0.7, 0.0) + rng.normal(0, 0.8, n)) > 0).astype(int)
    df.loc[rng.random(n) < 0.10, "income"] = np.nan
    df.loc[rng.random(n) < 0.05, "debt"] = np.nan
    df.loc[rng.random(n) < 0.05, "city"] = None
    return df


def boosted_model(kind: str) -> Any:
    """``xgboost`` or ``lightgbm`` inside a Pipeline: ``city`` ordinal-coded (missing stays NaN, an unseen city -1),
    the numeric columns as they are; both boosters take NaN natively."""
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OrdinalEncoder

    if kind == "xgboost":
        from xgboost import XGBClassifier

        est: Any = XGBClassifier(n_estimators=60, max_depth=3, learning_rate=0.2, n_jobs=1, random_state=0)
    elif kind == "lightgbm":
        from lightgbm import LGBMClassifier

        est = LGBMClassifier(n_estimators=60, num_leaves=8, learning_rate=0.2, n_jobs=1, random_state=0, verbose=-1)
    else:
        raise ValueError(f"kind {kind!r}: xgboost or lightgbm")
    coder = OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1, encoded_missing_value=np.nan)
    return make_pipeline(ColumnTransformer([("city", coder, ["city"])], remainder="passthrough"), est)


def boosted_parts(root: Path, folder: str = "data/boosted", seed: int = 1) -> Tuple[Any, Any, Dict[str, Any]]:
    """Write ``train.csv`` and ``test.csv`` under ``root / folder``; return (train, test, {kind: fitted model})."""
    df = boosted_table(seed=seed)
    in_train = np.random.default_rng(seed + 1).random(len(df)) < 0.5
    out = Path(root) / folder
    train = _read_back(df[in_train], out / "train.csv")
    test = _read_back(df[~in_train], out / "test.csv")
    X, y = train.drop(columns="target"), train["target"]
    return train, test, {kind: boosted_model(kind).fit(X, y) for kind in ("xgboost", "lightgbm")}


def write_boosted_models(root: Path, folder: str = "data/boosted") -> Dict[str, Any]:
    """The CSVs, ``xgboost.pkl`` and ``lightgbm.pkl`` under ``root / folder``; returns the target entries
    ``{"xgboost": {...}, "lightgbm": {...}}`` (weak segments and GAD only: the other methods need images)."""
    _, _, models = boosted_parts(root, folder)
    entries = {}
    for kind, model in models.items():
        (Path(root) / folder / f"{kind}.pkl").write_bytes(pickle.dumps(model))
        entries[kind] = {
            "data": {"train": f"csv:{folder}/train.csv", "test": f"csv:{folder}/test.csv", "label": "target"},
            "model": {"kind": "sklearn", "weights": f"{folder}/{kind}.pkl"},
            "methods": ["segments", "gad"],
        }
    return entries


def audit_target(root: Path, name: str, entry: Dict[str, Any]) -> Any:
    """The :class:`~weakspot.methods.AuditTarget` a method stage would build from ``entry`` (its files under
    ``root``), without the pipeline: the data prepared and written to Parquet and read back, the pickled model loaded
    as params.yaml names it and called on the rows as the stage calls it."""
    from weakspot.data import read_split_parquet, to_frame, write_split_parquet
    from weakspot.data.prepare import prepare_target_data
    from weakspot.methods import AuditTarget
    from weakspot.models import load_model
    from weakspot.models.table import for_data
    from weakspot.targets import TargetParams

    t = TargetParams.model_validate(
        {
            **entry,
            "data": {**entry["data"], "root": str(root)},
            "model": {**entry["model"], "weights": str(Path(root) / entry["model"]["weights"])},
        }
    )
    ds, splits, info = prepare_target_data(t.data, class_of_interest=t.class_of_interest, trains=t.trains)
    parts = {}
    for s in ("train", "val", "test"):
        write_split_parquet(Path(root) / f"{name}-{s}.parquet", to_frame(ds, splits[s]))
        parts[s] = read_split_parquet(Path(root) / f"{name}-{s}.parquet")
    test = parts["test"]
    clf = load_model(t.model, n_classes=ds.n_classes, input_shape=test.input_shape, device="cpu")
    return AuditTarget(
        name=name,
        model=for_data(clf, test, trained_here=False),
        classes=list(ds.classes),
        test=test,
        val=parts["val"],
        train=parts["train"],
        params=t,
        spec={"kind": t.model.kind, "name": name},
        info=info,
        digest=name,
    )
