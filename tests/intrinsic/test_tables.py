"""weakspot.intrinsic.tables: the report's tables, from measurements whose numbers are chosen."""

from types import SimpleNamespace

import numpy as np

from weakspot.intrinsic.tables import (
    PAPER_TABLE,
    attack_names,
    autoattack_name,
    defences_table,
    per_class_table,
    reparam_table,
    settings_table,
)
from tests.intrinsic.evals import accs, model_eval
from tests.intrinsic.helpers import small_params


def _result(shape=(12, 1, 4, 4), eps=0.3, aa=False):
    ev = {
        "none": model_eval("none", np.full(12, 0.01), accs(0.95, 0.5, 0.25, 0.125)),
        "minmax": model_eval("minmax", np.full(12, 0.001), accs(0.9, 0.8, 0.75, 0.7)),
    }
    if aa:
        ev["none"].acc["autoattack"] = 0.1
    return SimpleNamespace(
        evals=ev,
        X=np.zeros(shape, np.float32),
        y=np.arange(12) % 3,
        eps=eps,
        clip=(0.0, 1.0),
        classes=["a", "b", "c"],
        defence_info={"minmax": {"label": "PGD-3 min-max"}},
    )


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
    row = {
        f"{pre}x{f}": v for pre, v in (("", 1.0), ("softmax_", 2.0), ("sharpness_", 3.0)) for f in ("1", "100", "0.01")
    }
    t = reparam_table({"none": row, "minmax": row}, p)
    assert len(t) == 6 and list(t.columns) == [
        "model",
        "metric",
        "last layer x1",
        "last layer x100",
        "last layer x0.01",
    ]
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


def test_each_defence_is_set_against_its_own_papers_settings_as_it_ran():
    """gradreg's lambda, read from the training's record, differs from Ross & Doshi-Velez's 100; a defence run at its
    paper's settings does not; min-max's steps are compared with MNIST's 40 on grey-scale and CIFAR-10's 7 on colour;
    Fig. 6's pool states its test and validation counts."""
    from weakspot.adversarial.defences import ROSS_LAMBDA_PAPER

    p = small_params(stability={"batch_sizes": [100, 250, 500, 1000], "draws": 5, "pool": 1500})
    info = {
        "gradreg": {"label": "gradreg 0.1", "settings": {"lam": 0.1}},
        "fgsm_at": {"label": "fgsm", "settings": {"eps": 0.15, "lam": 0.3, "fraction": 0.5}},
        "distillation": {"label": "d", "settings": {"temperature": 100.0, "warm_start": True}},
        "minmax": {"label": "PGD-7", "settings": {"steps": 7}},
    }
    t = settings_table(p, 300, 200, 0.15, info, "scratch", True, grey=True, n_pool=538, n_test=268)
    t = t.set_index("setting")
    assert t.loc["defence gradreg", "differs"] and f"lambda {ROSS_LAMBDA_PAPER:g}" in t.loc["defence gradreg", "paper"]
    assert not t.loc["defence fgsm_at", "differs"] and t.loc["defence distillation", "differs"]  # a warm start
    assert t.loc["minmax steps", "differs"] and t.loc["minmax steps", "paper"].startswith("40 (")
    t = settings_table(p, 300, 200, 0.15, info, "scratch", True, grey=False).set_index("setting")
    assert not t.loc["minmax steps", "differs"] and "Fig. 6 pool" not in t.index
    t = settings_table(p, 300, 200, 0.15, {"gradreg": {"settings": {"lam": ROSS_LAMBDA_PAPER}}}, "scratch", True)
    assert not t.set_index("setting").loc["defence gradreg", "differs"]
    t = settings_table(p, 300, 200, 0.15, {}, "scratch", False, n_pool=538, n_test=268).set_index("setting")
    assert t.loc["Fig. 6 pool", "ran"] == (
        "538 inputs (268 test + 270 validation, no training input); batches of 100, "
        "250, 500 (1000 left out: not smaller than the pool)"
    )
