"""Gradient-boosted models as users pickle them (issue 37): an XGBoost and a LightGBM classifier, each in a Pipeline
that codes a text column, trained on a table with missing numeric and text cells, audited by weak segments and GAD
as the method stages run them (params.yaml's entry, the prepared Parquet, the pickled model), with no code."""

import numpy as np
import pytest

from tests.gad.helpers import small_params
from tests.user_tables import audit_target, write_boosted_models
from weakspot.methods import get, run_method
from weakspot.runtime import Runtime
from weakspot.segments.config import SegmentsParams

pytest.importorskip("xgboost")
pytest.importorskip("lightgbm")


@pytest.fixture(scope="module")
def boosted(tmp_path_factory):
    root = tmp_path_factory.mktemp("boosted")
    return root, write_boosted_models(root)


@pytest.mark.parametrize("kind", ["xgboost", "lightgbm"])
def test_a_boosted_model_on_a_table_with_missing_values_is_audited_by_segments_and_gad(boosted, kind):
    root, entries = boosted
    target = audit_target(root, kind, entries[kind])
    assert entries[kind]["methods"] == ["segments", "gad"] and set(target.info["missing"]) == {"income", "debt", "city"}
    assert target.model.name.endswith("on a table")  # the pipeline gets its DataFrame back, NaN and texts in it
    accuracy = (target.model.predict(target.test.X) == target.test.y).mean()
    assert accuracy > 0.75, accuracy

    seg = run_method(get("segments"), target, SegmentsParams(), Runtime(device="cpu"))
    assert seg.section.metrics["n_candidates"] >= 1 and "Missing values are kept" in " ".join(seg.section.summary)
    assert "income is missing" in set(seg.findings["weak_spot"])  # the booster is weaker without its main feature

    p = small_params(design_points=1500, epochs=6, replicates=2, pool_size=40, max_steps=60, refine_iters=2)
    gad = run_method(get("gad"), target, p, Runtime(device="cpu"))
    m = gad.section.metrics[kind]
    assert m["n_seeds"] == 1 and m["budget"] == 10 and m["pseudo_r2"] is not None
    assert any("Missing values on" in s for s in gad.section.summary)
    to_label = gad.extras["to_label.csv"].decode()
    assert to_label.count("\n") > 40 and ",," in to_label  # the rows to label, with their empty cells
    assert np.isfinite(gad.findings["severity"].to_numpy(float)).all()
