"""HDA on a TorchScript model (``kind: torchscript``): its layers take no forward hook, so coverage-guided fuzzing is
skipped with the reason in the results, the metrics, the settings and the prose; every other part runs."""

import warnings

import torch

from tests.hda.conftest import CLASSES, TINY, toy_data, toy_splits
from tests.user_models import fit_briefly, small_cnn
from weakspot.hda.config import HdaParams
from weakspot.hda.report import metrics, report
from weakspot.methods import AuditTarget

WHY = "the model's layers cannot be hooked (TorchScript)"


def test_hda_runs_on_a_torchscript_model_without_the_coverage_baseline(tmp_path):
    from weakspot.hda.generate import module_proba
    from weakspot.hda.run import audit
    from weakspot.models.exported import load_torchscript

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        X, y = toy_data()
        net = fit_briefly(small_cnn(3, (1, 8, 8)), X[:400], y[:400], epochs=60)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FutureWarning)  # torch.jit is deprecated
            torch.jit.save(torch.jit.script(net), str(tmp_path / "cnn.ts.pt"))
        module = load_torchscript(tmp_path / "cnn.ts.pt").eval()  # as kind: torchscript loads it
        p = HdaParams.model_validate(TINY)
        result = audit(module, module_proba(module), toy_splits(X, y), CLASSES, p, radius=0.1, clip=(0.0, 1.0))
    finally:
        torch.set_num_threads(n)

    g = result.generators
    assert result.white_box and g.skipped == {"coverage": WHY} and g.coverage_rate is None
    assert {m for m, _ in g.evals} == {"hda", "foda", "pgd", "ooda"} and ("coverage", "selected") not in g.results
    assert result.adversarial is not None and set(result.adversarial.evals["normal"]) >= {"fgsm", "pgd", "hda"}
    ft = result.finetuning
    assert ft is not None and list(ft.after) == ["hda", "pgd"] and ft.skipped == {"coverage": WHY}
    assert ft.repaired is not None

    m = metrics(result, p)
    assert m["skipped"] == {"coverage": WHY} and "coverage" not in m and "neuron_coverage" not in m
    assert "pgd" in m and list(m["finetune"]) == ["hda", "pgd", "none", "validation", "reattack"]
    assert {"hda_higher_ae_prop", "finetune_most_robustness"} <= set(m["claims"])
    out = report(result, p, AuditTarget(name="scripted", model=None, classes=CLASSES, test=None))
    sec = out.section
    assert "coverage-guided fuzzing" not in set(sec.tables["table6"]["method"])
    settings = sec.tables["settings"].set_index("setting")
    assert settings.loc["coverage-guided fuzzing", "ran"] == f"not run: {WHY}"
    prose = " ".join(sec.summary)
    assert f"coverage-guided fuzzing: not run: {WHY}" in prose
    claims = sec.tables["claims"].set_index("claim")
    assert "HDA's AEs: a higher AE proportion than PGD's (Table 6)" in claims.index
    assert out.repaired["state_dict"] is not None
