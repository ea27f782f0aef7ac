"""weakspot.intrinsic.run: the method's measurements on a planted robust model, and its entry point on a target."""

from types import SimpleNamespace

import numpy as np
import pytest

from weakspot import methods
from weakspot.data.dataset import Dataset
from weakspot.errors import ConfigError, DataError
from weakspot.intrinsic.run import IntrinsicResult, measure, pool_order, run
from weakspot.runtime import Runtime
from weakspot.targets import TargetParams
from tests.intrinsic.helpers import small_params


def test_the_planted_robust_model_measures_as_more_robust(measured):
    """The PGD-trained twin: larger psi and higher CW accuracy than the natural model; Table 4's normalised psi does
    not move under rescaling while softmax psi does."""
    r = measured
    assert isinstance(r, IntrinsicResult) and list(r.evals) == ["none", "minmax"]
    none, mm = r.evals["none"], r.evals["minmax"]
    assert mm.psi > 1.3 * none.psi and mm.acc["cw30"] > none.acc["cw30"] + 0.2
    assert len(r.X) == 120 and r.n_attack == 60 and r.n_pool == 120 and none.n_attacked == 60
    t4 = r.reparam["none"]
    assert abs(t4["x100"] / t4["x1"] - 1) < 0.01 and abs(t4["x0.01"] / t4["x1"] - 1) < 0.01
    assert t4["softmax_x0.01"] / t4["softmax_x100"] > 10
    assert set(r.reparam) == {"none", "minmax"} and list(r.stability["batch_size"]) == [20, 60]
    assert abs(r.art_check["ours"] - r.art_check["art"]) <= 1 / 60
    # the surfaces: the first input the audited model gets right, for both models, one surface per direction
    ((i, per),) = r.surfaces.items()
    assert i == int(np.flatnonzero(none.pred == r.y)[0]) and len(per) == 2
    assert all(len(s) == 4 and s[0].g.shape == (9, 9) for s in per.values())


def test_measure_is_deterministic(trained, measured):
    models, X, y = trained
    p = small_params(depth="study")
    again = measure(models, X, y, [str(c) for c in range(10)], p, eps=0.15, clip=(0.0, 1.0), n_test=len(X))
    for n in ("none", "minmax"):
        assert np.array_equal(again.evals[n].kl, measured.evals[n].kl)
        assert again.evals[n].acc == measured.evals[n].acc
    assert again.reparam == measured.reparam and again.stability.equals(measured.stability)


def test_the_pool_is_shuffled_within_the_test_split_and_within_the_rest():
    o = pool_order(5, 12, seed=0)
    assert sorted(o[:5]) == list(range(5)) and sorted(o[5:]) == list(range(5, 12))
    assert not np.array_equal(o, np.arange(12))
    assert np.array_equal(o, pool_order(5, 12, seed=0)) and not np.array_equal(o, pool_order(5, 12, seed=1))
    assert sorted(pool_order(50, 12, seed=0)) == list(range(12))  # a test split larger than the pool


def test_measure_needs_the_audited_model(trained):
    models, X, y = trained
    with pytest.raises(ConfigError, match="audited model under the name 'none'; got models 'minmax'"):
        measure(
            {"minmax": models["minmax"]},
            X,
            y,
            [str(c) for c in range(10)],
            small_params(),
            eps=0.15,
            clip=(0.0, 1.0),
            n_test=len(X),
        )


def _target(module, X, y, train=None):
    classes = [str(c) for c in range(10)]
    ds = lambda a, b: Dataset(X=a, y=b, classes=classes, image_shape=(1, 8, 8))  # noqa: E731
    Xt, yt = train if train is not None else (X, y)
    t = TargetParams.model_validate(
        {
            "data": {"source": "digits"},
            "model": {"kind": "builtin", "arch": "lenet"},
            "train": {"epochs": 1, "batch_size": 64},
        }
    )
    return methods.AuditTarget(
        name="toy",
        model=SimpleNamespace(module=module),
        classes=classes,
        test=ds(X[:100], y[:100]),
        val=ds(X[100:150], y[100:150]),
        train=ds(Xt, yt),
        params=t,
        digest="toy-digest",
    )


def test_the_method_runs_on_a_target_through_the_one_entry_point(trained):
    """run -> report -> figures: the section is titled with the target, its items name what is there, the defended
    model's training goes to the lineage; psi's inputs are the test split first."""
    models, X, y = trained
    m = methods.get("intrinsic")
    p = small_params(
        depth="study",
        n_inputs=100,
        defences=["fgsm_at"],
        defence_epochs=1,
        stability={"batch_sizes": [20], "draws": 3, "pool": 120},
    )
    out = methods.run_method(m, _target(models["none"], X, y, train=(X[150:], y[150:])), p, Runtime(device="cpu"))
    sec = out.section
    # Sec. 5.1's eps for grey-scale images (0.3 of the data's range), and so Sec. 5.6's grade
    assert sec.title.endswith("(toy)") and sec.metrics["eps"] == pytest.approx(0.3) and "grade" in sec.metrics["none"]
    assert set(sec.metrics) >= {"none", "fgsm_at", "psi", "pgd_vs_art", "claims"}
    assert "surface_0" in sec.figures and "defences" in sec.tables
    assert set(out.lineage["defences"]) == {"fgsm_at"}
    assert out.lineage["defences"]["fgsm_at"]["label"].endswith("fine-tuned from the audited model")
    assert out.findings.iloc[0]["kind"] == "threat_model"
    assert "psi ran on 100 inputs (100 from the test split; never a training input)" in sec.summary[0]


def test_a_target_with_non_finite_inputs_is_refused(trained):
    models, X, y = trained
    bad = X.copy()
    bad[3, 0, 0, 0] = np.nan
    with pytest.raises(DataError, match="toy: the inputs hold NaN"):
        run(_target(models["none"], bad, y), small_params(defences=[]), Runtime(device="cpu"))


def test_psi_and_the_attacks_never_run_on_a_training_input(monkeypatch):
    """The pool psi, the attacks and Fig. 6 draw from is the test split, then validation: a model is never judged
    on what it trained on, even where n_inputs asks for more inputs than those two hold."""
    from types import SimpleNamespace

    import weakspot.intrinsic.run as run_module
    from weakspot.data.dataset import Dataset
    from weakspot.intrinsic.config import IntrinsicParams

    def part(value, n):
        return Dataset(
            X=np.full((n, 1, 4, 4), value, np.float32), y=np.arange(n) % 2, classes=["a", "b"], image_shape=(1, 4, 4)
        )

    seen = {}
    monkeypatch.setattr(run_module, "measure", lambda models, X, y, *a, **k: seen.update(X=X, n_test=k["n_test"]))
    monkeypatch.setattr(run_module, "defended_models", lambda *a, **k: ({}, {}, 0.1))  # no defence to train
    target = SimpleNamespace(
        name="t",
        test=part(0.1, 20),
        val=part(0.2, 10),
        train=part(0.9, 500),
        classes=["a", "b"],
        model=SimpleNamespace(module=None),
    )
    run_module.run(target, IntrinsicParams(defences=[], n_inputs=300), SimpleNamespace(device="cpu", progress=None))
    assert seen["n_test"] == 20 and len(seen["X"]) == 30 and not np.isclose(seen["X"], 0.9).any()
