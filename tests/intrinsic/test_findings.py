"""weakspot.intrinsic.findings: the audited model's weak spots from measurements whose answer is chosen."""

import json

import numpy as np
import pytest

from weakspot.intrinsic.findings import SEVERITY_THREAT, findings, worst_inputs
from tests.intrinsic.evals import accs, model_eval
from tests.intrinsic.helpers import small_params

CLASSES = ["a", "b", "c"]


def test_findings_rank_the_strongest_attack_then_inputs_and_classes_by_instability():
    # class c (inputs 2, 5, 8, 11) is the least stable: its KLs are 4x the others'
    kl = np.array([0.5, 0.5, 2.0] * 4)
    kl[0] = 3.0  # input 0 is the single most unstable input, though of class a
    e = model_eval("none", kl, accs(0.9, 0.6, 0.2, 0.3))
    X = np.zeros((12, 1, 4, 4), np.float32)
    f = findings(e, X, np.arange(12) % 3, CLASSES, small_params(max_findings=3), eps=0.15)
    assert list(f["kind"]) == ["threat_model", "input", "class", "input", "input"]
    top = f.iloc[0]
    assert top["severity"] == pytest.approx(0.8) and top["severity_meaning"] == SEVERITY_THREAT
    assert top["weak_spot"] == "PGD-10 at L-inf eps 0.15 leaves 20% of inputs correct (clean 90%)"
    assert json.loads(top["example"]) == {"clean": 0.9, "fgsm": 0.6, "pgd30": 0.2, "cw30": 0.3}
    inputs = f[f["kind"] == "input"]
    assert list(inputs["severity"]) == [3.0, 2.0, 2.0]  # the largest KLs, ties in input order
    assert inputs["weak_spot"].iloc[0] == "input 0: a neighbour within eps 0.15 moves the prediction from a to b"
    assert [json.loads(x)["input"] for x in inputs["example"]] == [0, 2, 5]
    assert all(isinstance(b, bytes) and b[:4] == b"\x89PNG" for b in inputs["image"])
    cls = f[f["kind"] == "class"]
    assert list(cls["label"]) == ["c"] and cls["severity"].iloc[0] == pytest.approx(2.0)  # 1 / psi of class c


def test_an_input_whose_neighbour_keeps_its_class_says_so():
    e = model_eval("none", [0.5, 0.25], accs(1.0, 1.0, 1.0, 1.0), y=np.array([0, 1]))
    f = findings(e, np.zeros((2, 1, 4, 4), np.float32), np.array([0, 1]), CLASSES, small_params(max_findings=1),
                 eps=0.1)
    assert f.iloc[1]["weak_spot"] == ("input 0: a neighbour within eps 0.1 keeps class a but moves its probabilities "
                                      "by KL 0.5")


def test_worst_inputs_are_stable_for_ties():
    e = model_eval("none", [1.0, 2.0, 2.0, 0.5], accs(1, 1, 1, 1))
    assert list(worst_inputs(e, 3)) == [1, 2, 0]
