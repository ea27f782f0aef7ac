"""A target's examination on the fake renderer: classes name outputs, batched renders, the same result twice, named
errors, and the method's entry point end to end (run, report, figures) through the plug-in interface."""

import numpy as np
import pandas as pd
import pytest

from weakspot.errors import ConfigError, DataError
from weakspot.examine.fake import FakeRenderer
from weakspot.examine.report import findings, target_metrics
from weakspot.examine.run import TARGET, ExamineResult, examine_target
from weakspot.methods import AuditTarget, SceneData, run_method
from weakspot.models import CallableClassifier
from weakspot.runtime import Runtime

from .examine_helpers import CLASSES, tiny_params


def test_the_result_holds_every_class_and_examiner(examined):
    res, _, calls = examined
    assert isinstance(res, ExamineResult) and res.classes == CLASSES
    main = [(s.cls, s.examiner_name) for s in res.sessions if s.group == "main"]
    assert main == [(c, e) for _ in range(2) for c in CLASSES for e in ("random", "bo", "rl")]  # 2 repeats
    assert sorted(s.cls for s in res.sessions if s.group == "main_t0") == sorted(CLASSES * 2)
    assert {s.model for s in res.sessions} == {TARGET}
    assert calls and calls[-1][0] == "examine" and calls[-1][1] == calls[-1][2]  # progress reached its total


def test_class_names_map_outputs(world):
    """classes[i] names output i: the same classifier with permuted outputs and an extra class unknown to the
    scene (probability 0) gives the same examination; the extra class is not examined."""
    space, r, images, meta, _, clf = world
    p = tiny_params(T=6, checkpoints=[0, 6], examiners=["rl", "bo"], classes=None)
    perm = [2, 0, 3, 1]

    def permuted(x):
        q = clf.predict_proba(x)[:, perm]
        return np.concatenate([q, np.zeros((len(q), 1))], axis=1)

    other = CallableClassifier(permuted, n_classes=5)
    names = [CLASSES[i] for i in perm] + ["teapot"]
    with_classes = p.model_copy(update={"classes": CLASSES})
    a = examine_target(r, space, clf, CLASSES, images, meta, with_classes)
    b = examine_target(r, space, other, names, images, meta, with_classes)
    assert target_metrics(a, with_classes) == target_metrics(b, with_classes)
    pd.testing.assert_frame_equal(findings(a, with_classes), findings(b, with_classes))
    # without params.classes, the classes of the model that the scene has, in the model's order
    c = examine_target(r, space, other, names, images, meta, p)
    assert list(dict.fromkeys(s.cls for s in c.sessions)) == [n for n in names if n != "teapot"]


def test_same_params_same_result(world, examined):
    space, r, images, meta, params, clf = world
    a = examined[0]
    b = examine_target(r, space, clf, CLASSES, images, meta, params)
    assert len(a.sessions) == len(b.sessions)
    for sa, sb in zip(a.sessions, b.sessions):
        assert np.array_equal(np.concatenate(sa.probs), np.concatenate(sb.probs)) and sa.params == sb.params
        assert np.array_equal(sa.worst[2], sb.worst[2])


def test_renders_are_batched(world):
    space, _, images, meta, _, clf = world
    r = FakeRenderer(classes=CLASSES, resolution=24)
    p = tiny_params(examiners=["rl", "bo"], T=5, checkpoints=[0, 5])
    examine_target(r, space, clf, CLASSES, images, meta, p)
    # one call per round (T rounds), not one per scene, and one for every region's fresh renders
    assert r.calls == p.T + 1
    regions = sum(
        r.rule is not None
        for r in examine_target(
            FakeRenderer(classes=CLASSES, resolution=24), space, clf, CLASSES, images, meta, p
        ).regions
    )
    assert (
        r.n_rendered
        == p.repeats * len(CLASSES) * (p.T * (p.rl.batch_size + 1) + p.n_random) + regions * 2 * p.regions.n_confirm
    )


def test_bad_input_is_named(world):
    space, r, images, meta, params, clf = world
    with pytest.raises(DataError, match="missing column"):
        examine_target(r, space, clf, CLASSES, images, meta.drop(columns=["split"]), params)
    with pytest.raises(DataError, match="uint8"):
        examine_target(r, space, clf, CLASSES, images.astype(np.float32), meta, params)
    with pytest.raises(ConfigError, match=r"classes: unknown \['teapot'\]"):
        examine_target(r, space, clf, CLASSES, images, meta, tiny_params(classes=["teapot"]))
    with pytest.raises(ConfigError, match="4 outputs but 3 class names"):
        examine_target(r, space, clf, CLASSES[:3], images, meta, params)


def test_the_method_runs_on_a_target_through_its_entry_points(world, monkeypatch):
    """run -> report -> figures as the generic stage calls them; the renderer is the one the scene settings make."""
    import weakspot.examine.run as run_module

    space, _, images, meta, _, clf = world
    made = []

    def fake_renderer_for(settings, device="auto"):
        made.append((settings.resolution, device))
        return FakeRenderer(classes=CLASSES, resolution=24)

    monkeypatch.setattr(run_module, "renderer_for", fake_renderer_for)
    params = tiny_params(T=4, checkpoints=[0, 4], examiners=["rl", "bo"], n_random=8, tail=8, classes=["disc", "cross"])
    target = AuditTarget(
        name="fake",
        model=clf,
        classes=CLASSES,
        test=None,
        scene=SceneData(images=images, table=meta, settings={"resolution": 24}),
    )
    out = run_method("examine", target, params, Runtime(device="cpu"))
    assert made == [(24, "cpu")]
    assert set(out.section.figures) == {"regions", "curves", "curves_renders", "per_class", "tsne", "worst"}
    assert set(out.section.metrics["per_class"]) == {"disc", "cross"}
    assert set(out.findings[out.findings.kind == "factor_region"].label) <= {"cross", "disc"}
    with pytest.raises(DataError, match="needs the rendered scene data set"):
        run_method(
            "examine", AuditTarget(name="fake", model=clf, classes=CLASSES, test=None), params, Runtime(device="cpu")
        )


def test_a_users_classifier_is_examined_in_its_own_class_names(world, monkeypatch):
    """Issue 47: a user's model whose classes map onto the scene's (``class_map``) was reported in the scene's names
    (``class cap``, where the user's class is ``hat``). The examination renders in the scene's classes; the report,
    the findings and the metrics say the user's."""
    from types import SimpleNamespace

    import weakspot.examine.run as run_module

    space, _, images, meta, _, clf = world
    monkeypatch.setattr(
        run_module, "renderer_for", lambda s, device="auto": FakeRenderer(classes=CLASSES, resolution=24)
    )
    params = tiny_params(T=4, checkpoints=[0, 4], examiners=["rl", "bo"], n_random=8, tail=8, classes=["disc", "cross"])
    mine = [f"my_{c}" for c in CLASSES]
    target = AuditTarget(
        name="fake",
        model=clf,
        classes=mine,
        test=None,
        scene=SceneData(images=images, table=meta, settings={"resolution": 24}),
        params=SimpleNamespace(class_map={m: c for m, c in zip(mine, CLASSES)}),
    )
    out = run_method("examine", target, params, Runtime(device="cpu"))
    assert set(out.section.metrics["per_class"]) == {"my_disc", "my_cross"}
    regions = out.findings[out.findings.kind == "factor_region"]
    assert len(regions) and set(regions.label) <= {"my_cross", "my_disc"}
    assert all(w.startswith(("class my_disc", "class my_cross")) for w in regions.weak_spot), list(regions.weak_spot)
    assert set(out.findings.prediction) - {""} <= set(mine)
    text = " ".join(out.section.summary) + " ".join(out.findings.weak_spot) + " ".join(out.findings.confirmation)
    assert not any(f"class {c}" in text for c in ("disc", "cross")), text


def test_the_examinations_findings_are_the_same_at_both_depths(world, examined):
    """issue 49: depth study switches the study's experiments on (its own stage, examine_study); a target's
    examination, its regions and its findings are the same at both depths."""
    from weakspot.examine.report import report

    space, r, images, meta, params, clf = world
    deep = params.model_validate({**params.model_dump(), "depth": "study"})
    assert params.depth == "audit" and deep.depth == "study" and deep.study.enabled
    res = examine_target(r, space, clf, CLASSES, images, meta, deep)
    pd.testing.assert_frame_equal(report(res, deep).findings, examined[1].findings)
    assert len(examined[1].findings) > 0
