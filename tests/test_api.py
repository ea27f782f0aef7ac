"""``weakspot.audit`` from a notebook: a scikit-learn model with a planted blind spot, audited in this process."""

import html

import numpy as np
import pandas as pd
import pytest

import weakspot
from weakspot.errors import ConfigError, DataError, ModelError


@pytest.fixture(scope="module")
def blind_model():
    """A forest trained on a table whose class 'yes' rows with b > 0.5 were left out: it calls them 'no'."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)

    def rows(n):
        X = pd.DataFrame(rng.uniform(-1, 1, (n, 4)), columns=["a", "b", "c", "d"])
        return X, np.where(X["a"] + 0.3 * X["c"] > 0, "yes", "no")

    X_train, y_train = rows(3000)
    keep = ~((y_train == "yes") & (X_train["b"] > 0.5))
    model = RandomForestClassifier(n_estimators=40, max_depth=6, random_state=0)
    model.fit(X_train[keep].to_numpy(), y_train[keep])
    X_test, y_test = rows(2500)
    return model, X_test, y_test, X_train[keep], y_train[keep]


def test_a_notebook_audit_names_the_planted_blind_spot_and_writes_the_report(blind_model, tmp_path):
    model, X_test, y_test, _, _ = blind_model
    res = weakspot.audit(model, X_test, y_test, methods=["segments"], name="forest")
    assert set(res.findings["method"]) == {"segments"} and res.metrics["train"]["n_test"] == 2500
    top = res.weak_spots.iloc[0]
    assert top["confirmed"] and top["lift_lo"] > 2 and "b >" in top["weak_spot"], top["weak_spot"]
    # the class the blind spot lies in is the recall table's (issue 47), not a weak spot ranked with the region
    assert res.metrics["train"]["classes_recalled_worse"] == ["yes"] and "class" not in set(res.weak_spots["kind"])
    assert "corner" in res.skipped and "gad" in res.skipped  # gad was not asked for
    page = res.to_html(tmp_path / "report.html").read_text()
    assert "Weak segments" in page and "forest" in page and html.escape(top["weak_spot"][:20]) in page
    assert "Ran on all 2500 test rows: the error tree searched" in page  # each card says what its method ran on


def test_every_method_that_fits_runs_by_default_and_the_train_rows_are_not_judged(blind_model):
    from tests.gad.helpers import SMALL

    model, X_test, y_test, X_train, y_train = blind_model
    res = weakspot.audit(
        model,
        X_test.iloc[:1500],
        y_test[:1500],
        X_train,
        y_train,
        params={"gad": {**SMALL, "seeds": [0]}},
        class_of_interest="yes",
        name="forest",
    )
    assert sorted(set(res.findings["method"])) == ["gad", "segments"]
    gad = res.metrics["gad"]["forest"]
    assert gad["n_seeds"] == 1 and gad["train_accuracy"] > 0.9  # the model's own split only, its train rows given
    assert res.target.test.X.shape == (1500, 4) and res.target.train.X.shape == X_train.shape
    assert "needs image data" in res.skipped["hda"]


def test_bad_input_is_named(blind_model):
    model, X_test, y_test, _, _ = blind_model
    with pytest.raises(DataError, match="X has 10 rows but y 9"):
        weakspot.audit(model, X_test.iloc[:10], y_test[:9])
    bad = X_test.iloc[:10].copy()
    bad.iloc[0, 0] = np.inf  # a missing value (NaN) is kept: tests/data/test_data_missing.py
    with pytest.raises(DataError, match=r"X_test: infinite values in column\(s\) 'a' \(1 rows\)"):
        weakspot.audit(model, bad, y_test[:10])
    with pytest.raises(DataError, match=r"X_test: y \(the labels\) holds 1 missing values; a label cannot be missing"):
        weakspot.audit(model, X_test.iloc[:3], np.array(["yes", None, "no"], dtype=object))
    with pytest.raises(DataError, match=r"labels \['maybe'\] are not among"):
        weakspot.audit(model, X_test.iloc[:3], ["yes", "no", "maybe"])
    with pytest.raises(ConfigError, match="method corner does not run on this model: needs image data"):
        weakspot.audit(model, X_test, y_test, methods=["corner"])
    with pytest.raises(ModelError, match="give a torch.nn.Module"):
        weakspot.audit(object(), X_test, y_test)
    with pytest.raises(ModelError, match="shape"):
        weakspot.audit(lambda x: np.ones((len(x), 3)) / 3, X_test, y_test, classes=["no", "yes"], methods=[])


def test_a_table_with_text_columns_reaches_the_users_pipeline_as_text_and_the_weak_category_is_named():
    from sklearn.compose import ColumnTransformer
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(1)

    def rows(n):
        X = pd.DataFrame(
            {
                "a": rng.uniform(-1, 1, n),
                "shop": rng.choice(["mall", "web", "kiosk"], n),
                "b": rng.uniform(-1, 1, n),
                "tier": rng.choice(["gold", "basic"], n),
            }
        )
        return X, np.where(X["a"] > 0, "yes", "no")

    X_train, y_train = rows(2000)
    fit_y = np.where(X_train["shop"] == "kiosk", "no", y_train)  # planted: its labels called every kiosk sale "no"
    model = make_pipeline(
        ColumnTransformer([("cat", OneHotEncoder(), ["shop", "tier"])], remainder="passthrough"),
        RandomForestClassifier(n_estimators=30, max_depth=5, random_state=0),
    ).fit(X_train, fit_y)
    X_test, y_test = rows(2000)
    res = weakspot.audit(model, X_test, y_test, methods=["segments"], name="shops")
    assert res.target.test.categories == {"shop": ["kiosk", "mall", "web"], "tier": ["basic", "gold"]}
    top = res.weak_spots.iloc[0]
    assert "shop = kiosk" in top["weak_spot"] and top["lift_lo"] > 2, top["weak_spot"]
    assert '"shop": "kiosk"' in top["example"]  # the example row in the user's own texts
