"""ops.verdict.compare: two audited targets on the same data side by side, on a planted audit whose answer is known: one
weak spot fixed, one new, one shared; both robustness curves; refusals for different data and a missing audit."""

import json

import pandas as pd
import pytest
from conftest import declare

from ops.verdict.compare import compare_targets, write_comparison
from weakspot.errors import ConfigError

DATA = {"source": "digits", "fractions": [0.7, 0.15, 0.15], "seed": 0}


def _plant(root, name, acc, spots, pgd):
    declare(
        root,
        f"metrics/train/{name}.json",
        f"metrics/robustness/{name}.json",
        f"plots/robustness/{name}",
        f"findings/{name}/robustness.parquet",
        f"findings/{name}/hda.parquet",
        f"data/targets/{name}/prepared",
    )
    (root / "metrics/train").mkdir(parents=True, exist_ok=True)
    (root / "metrics/train" / f"{name}.json").write_text(json.dumps({"test_accuracy": acc}))
    (root / "metrics/robustness").mkdir(parents=True, exist_ok=True)
    (root / "metrics/robustness" / f"{name}.json").write_text(
        json.dumps({"clean_accuracy": acc, "eps_half_pgd": pgd[1]})
    )
    sec = root / "plots/robustness" / name
    sec.mkdir(parents=True, exist_ok=True)
    (sec / "section.json").write_text(
        json.dumps({"title": f"Robustness curve ({name})", "key_metrics": ["clean_accuracy", "eps_half_pgd"]})
    )
    pd.DataFrame(
        {
            "eps": [0.0, 0.1],
            "eps (data units)": [0.0, 0.1],
            "clean": [acc, acc],
            "pgd": pgd,
            "pgd lo": [p - 0.05 for p in pgd],
            "pgd hi": [p + 0.05 for p in pgd],
        }
    ).to_csv(sec / "curve.csv", index=False)
    (root / "findings" / name).mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        [
            {
                "weak_spot": f"class {c} (on {name})",
                "kind": "class",
                "label": c,
                "prediction": "",
                "lift": lift,
                "lift_lo": lift / 2,
                "lift_hi": lift * 2,
                "confirmed": ok,
            }
            for c, lift, ok in spots
        ]
    ).to_parquet(root / "findings" / name / "robustness.parquet")


def _params(b_data=DATA):
    return {"targets": {"digits": {"data": DATA}, "digits_repaired": {"data": b_data}}}


def test_fixed_new_and_shared_weak_spots_and_both_curves(tmp_path):
    _plant(tmp_path, "digits", 0.99, [("3", 3.0, True), ("8", 2.0, True), ("5", 4.0, False)], [0.99, 0.35])
    _plant(tmp_path, "digits_repaired", 0.985, [("8", 1.5, True), ("5", 2.5, True)], [0.985, 0.4])
    c = compare_targets("digits", "digits_repaired", tmp_path, _params())
    assert c["accuracy"] == {"digits": 0.99, "digits_repaired": 0.985}
    assert [s["weak_spot"] for s in c["fixed"]] == ["class 3 (on digits)"]  # confirmed before, not after
    assert [s["weak_spot"] for s in c["new"]] == ["class 5 (on digits_repaired)"]  # 5 was unconfirmed before
    assert [(s["a"]["lift"], s["b"]["lift"]) for s in c["shared"]] == [(2.0, 1.5)]
    (tmp_path / "findings/digits/hda.parquet").write_bytes(
        (tmp_path / "findings/digits/robustness.parquet").read_bytes()
    )  # a method that did not run on the other
    assert len(compare_targets("digits", "digits_repaired", tmp_path, _params())["fixed"]) == 1
    assert c["methods"][0]["figures"] == [
        {"metric": "clean_accuracy", "a": 0.99, "b": 0.985},
        {"metric": "eps_half_pgd", "a": 0.35, "b": 0.4},
    ]
    assert c["curves"]["digits"]["pgd"] == [0.99, 0.35]
    (tmp_path / "params.yaml").write_text(json.dumps(_params()))
    page = write_comparison("digits", "digits_repaired", tmp_path, tmp_path / "reports")
    html = page.read_text()
    assert page.name == "compare-digits-digits_repaired.html" and "data:image/png;base64," in html
    assert "Fixed (1)" in html and "New (1)" in html and "Shared (1)" in html and "class 3 (on digits)" in html
    assert json.loads((tmp_path / "reports/compare-digits-digits_repaired.json").read_text())["a"] == "digits"


def test_the_same_held_out_rows_are_required_whatever_the_specs_say(tmp_path):
    _plant(tmp_path, "digits", 0.99, [], [0.99, 0.35])
    _plant(tmp_path, "digits_repaired", 0.99, [], [0.99, 0.4])
    rows = pd.DataFrame({"px_0": [0.1, 0.2, 0.3], "label": [0, 1, 2]})
    for t, df in (("digits", rows), ("digits_repaired", rows)):
        (tmp_path / "data/targets" / t / "prepared").mkdir(parents=True)
        df.to_parquet(tmp_path / "data/targets" / t / "prepared/test.parquet")
    other = {"train": "npz:a.npz", "test": "npz:b.npz"}  # named parts holding the same test rows: comparable
    assert compare_targets("digits", "digits_repaired", tmp_path, _params(other))["a"] == "digits"
    pd.concat([rows, rows]).to_parquet(tmp_path / "data/targets/digits_repaired/prepared/test.parquet")
    with pytest.raises(ConfigError, match="same held-out rows \\(3 and 6 test rows"):  # every row of a source
        compare_targets("digits", "digits_repaired", tmp_path, _params())


def test_refuses_other_data_unknown_targets_and_missing_audits(tmp_path):
    _plant(tmp_path, "digits", 0.99, [], [0.99, 0.35])
    with pytest.raises(ConfigError, match="not on the same data"):
        compare_targets("digits", "digits_repaired", tmp_path, _params({**DATA, "seed": 1}))
    with pytest.raises(ConfigError, match="no target 'nope'"):
        compare_targets("digits", "nope", tmp_path, _params())
    with pytest.raises(ConfigError, match="no audit of digits_repaired"):
        compare_targets("digits", "digits_repaired", tmp_path, _params())


def test_a_method_dvc_yaml_no_longer_declares_is_not_compared(tmp_path):
    """A method removed from params.yaml: its files may still be on disk (DVC leaves the outputs of stages that are
    gone), but they are no part of the audit, so neither of its figures nor its weak spots are compared."""
    _plant(tmp_path, "digits", 0.99, [("3", 3.0, True)], [0.99, 0.35])
    _plant(tmp_path, "digits_repaired", 0.985, [], [0.985, 0.4])
    (tmp_path / "metrics/gone").mkdir()
    for t in ("digits", "digits_repaired"):
        (tmp_path / f"metrics/gone/{t}.json").write_text(json.dumps({"clean_accuracy": 0.5}))
        (tmp_path / f"findings/{t}/gone.parquet").write_bytes(
            (tmp_path / "findings/digits/robustness.parquet").read_bytes()
        )
    c = compare_targets("digits", "digits_repaired", tmp_path, _params())
    assert [m["method"] for m in c["methods"]] == ["robustness"]
    assert [s["method"] for s in c["fixed"]] == ["robustness"] and c["shared"] == [] and c["new"] == []
