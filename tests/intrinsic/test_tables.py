"""weakspot.intrinsic.tables: the report's tables, from measurements whose numbers are chosen."""

from types import SimpleNamespace

import numpy as np

from weakspot.intrinsic.tables import (PAPER_TABLE, attack_names, autoattack_name, defences_table, per_class_table,
                                       reparam_table, settings_table)
from tests.intrinsic.evals import accs, model_eval
from tests.intrinsic.helpers import small_params


def _result(shape=(12, 1, 4, 4), eps=0.3, aa=False):
    ev = {"none": model_eval("none", np.full(12, 0.01), accs(0.95, 0.5, 0.25, 0.125)),
          "minmax": model_eval("minmax", np.full(12, 0.001), accs(0.9, 0.8, 0.75, 0.7))}
    if aa:
        ev["none"].acc["autoattack"] = 0.1
    return SimpleNamespace(evals=ev, X=np.zeros(shape, np.float32), y=np.arange(12) % 3, eps=eps, clip=(0.0, 1.0),
                           classes=["a", "b", "c"], defence_info={"minmax": {"label": "PGD-3 min-max"}})


def test_defences_table_has_a_row_per_model_and_grades_only_at_mnist_eps():
    p = small_params()
    t = defences_table(_result(), p)
    assert list(t["model"]) == ["none", "minmax"] and list(t["what ran"]) == ["the model under audit", "PGD-3 min-max"]
    assert list(t["psi"]) == [100.0, 1000.0] and list(t["PGD-10"]) == ["25.0%", "75.0%"]
    assert list(t["grade (Sec. 5.6)"]) == ["vulnerable", "robust"]
    assert "grade (Sec. 5.6)" not in defences_table(_result(eps=0.15), p)
    assert "grade (Sec. 5.6)" not in defences_table(_result(shape=(12, 3, 4, 4)), p)
    aa = defences_table(_result(aa=True), p)
    assert list(aa[autoattack_name(p, True)]) == ["10.0%", ""]  # only the audited model ran it


def test_names_say_what_ran():
    p = small_params(pgd_steps=7, cw_steps=9, autoattack={"iters": 5})
    assert attack_names(p) == {"fgsm": "FGSM", "pgd30": "PGD-7", "cw30": "CW-9", "autoattack": "AutoAttack"}
    assert autoattack_name(p, True) == "AutoAttack (APGD-CE + APGD-DLR, 5 it.)" and autoattack_name(p, False) is None


def test_reparam_and_per_class_tables():
    p = small_params(reparam={"factors": [100.0, 0.01]})
    row = {f"{pre}x{f}": v for pre, v in (("", 1.0), ("softmax_", 2.0), ("sharpness_", 3.0))
           for f in ("1", "100", "0.01")}
    t = reparam_table({"none": row, "minmax": row}, p)
    assert len(t) == 6 and list(t.columns) == ["model", "metric", "last layer x1", "last layer x100",
                                               "last layer x0.01"]
    assert list(t["last layer x100"][:3]) == [1.0, 2.0, 3.0]
    pc = per_class_table(_result())
    assert list(pc["inputs"]) == [4, 4, 4] and list(pc["psi none"]) == [100.0] * 3


def test_settings_table_flags_what_differs_from_the_paper():
    p = small_params(pgd_steps=30, cw_steps=10)
    t = settings_table(p, 120, 60, 0.3, {"minmax": {"label": "PGD-3"}}, "target", True).set_index("setting")
    assert not t.loc["pgd_steps", "differs"] and t.loc["cw_steps", "differs"]
    assert not t.loc["eps (L-inf)", "differs"] and t.loc["n_inputs", "ran"] == "120 for psi, 60 attacked"
    assert t.loc["defence_init", "ran"].startswith("fine-tuned") and t.loc["defence minmax", "ran"] == "PGD-3"
    t = settings_table(p, 120, 60, 0.15, {}, "scratch", False).set_index("setting")
    assert t.loc["eps (L-inf)", "differs"] and t.loc["defence_init", "ran"] == "no defended models"
    assert len(PAPER_TABLE) == 8
