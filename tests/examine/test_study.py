"""The study's sessions: every enabled experiment on its own model and classes, one experiment alone, named errors."""

import pytest

from weakspot.errors import ConfigError, DataError
from weakspot.examine.study import StudyResult, run_study
from weakspot.examine.study_report import study_report

from .examine_helpers import CLASSES, tiny_params


def test_every_experiment_has_its_sessions(world, study):
    space, r, images, meta, params, _ = world
    res, _, calls = study
    assert isinstance(res, StudyResult) and res.space is space
    by = {}
    for s in res.sessions:
        by.setdefault(s.group, set()).add((s.model, s.examiner_name))
    assert by["main"] == {("small_cnn", "rl")} and by["order"] == {("small_cnn", "rl")}
    assert by["strength"] == {("small_cnn", "rl")}  # the default strength examiner
    assert by["m_study"] == {(f"small_cnn_m{m}", e) for m in (1, 10) for e in ("rl", "bo")}
    assert by["artificial"] == {("small_cnn_limited", e) for e in ("rl", "bo", "random")}
    assert all(s.T == s.it for s in res.sessions)
    order = [s for s in res.sessions if s.group == "order"]
    main = [s for s in res.sessions if s.group == "main" and s.examiner_name == "rl"]
    assert [s.cls for s in order] == [s.cls for s in main] and [s.sun for s in order] == [s.sun for s in main]
    assert all(len(s.tail_params) == min(24, s.T * s.batch) for s in res.sessions if s.group == "artificial")
    phases = [w.split(" (")[0] for w, _, _ in calls]
    assert "train small_cnn: epoch" in phases and phases[-1] == "examine"
    assert calls[-1][1] == calls[-1][2]


def test_study_can_run_one_experiment(world):
    space, r, images, meta, _, clf = world
    full = (clf, CLASSES, "fake")  # the audited model stands in for the full one: nothing to train
    p = tiny_params(
        study=dict(
            epochs=1,
            m_study=dict(enabled=False),
            artificial_weakness=dict(enabled=False),
            order_check=False,
            strength=True,
            strength_examiner="bo",
            T=5,
        ),
        T=3,
        checkpoints=[0, 3],
        classes=["disc", "cross"],
    )
    res = run_study(r, space, images, meta, p, device="cpu", full_model=full)
    assert {s.group for s in res.sessions} == {"main_t0", "strength"}
    out = study_report(res, p)
    assert set(out.metrics) == {"strength"} and len(out.tables["strength"]) == 2
    # study.classes: the order check and strength mode on a subset of the examined classes
    p = tiny_params(
        study=dict(
            epochs=1,
            m_study=dict(enabled=False),
            artificial_weakness=dict(enabled=False),
            order_check=False,
            strength=True,
            strength_examiner="bo",
            classes=["cross"],
            T=5,
        ),
        T=3,
        checkpoints=[0, 3],
        classes=["disc", "cross"],
    )
    res = run_study(r, space, images, meta, p, device="cpu", full_model=full)
    assert [s.cls for s in res.sessions if s.group == "strength"] == ["cross"]
    with pytest.raises(ConfigError, match=r"study\.classes: unknown \['teapot'\]"):
        run_study(
            r,
            space,
            images,
            meta,
            p.model_copy(update={"study": p.study.model_copy(update={"classes": ["teapot"]})}),
            device="cpu",
            full_model=full,
        )


def test_bad_input_is_named(world):
    space, r, images, meta, params, _ = world
    with pytest.raises(DataError, match="split == 'train'"):
        run_study(r, space, images, meta.assign(split="validation"), params, device="cpu")
    off = tiny_params(
        study=dict(
            m_study=dict(enabled=False), artificial_weakness=dict(enabled=False), order_check=False, strength=False
        )
    )
    with pytest.raises(ConfigError, match="every experiment is disabled"):
        run_study(r, space, images, meta, off, device="cpu")
    with pytest.raises(DataError, match=r"missing column\(s\) \['view_elevation'\]"):
        run_study(r, space, images, meta.drop(columns=["view_elevation"]), params, device="cpu")


def test_the_study_runs_as_the_shared_stage_the_method_declares(world, monkeypatch):
    """run -> report -> figures as the generic shared stage calls them: the renderer the scene settings make, the
    full model the target named by ``study.full_model`` gives, its classes through the target's class_map."""
    from types import SimpleNamespace

    import weakspot.scene.renderer as renderer_module
    from weakspot import methods
    from weakspot.examine.fake import FakeRenderer
    from weakspot.runtime import Runtime

    space, _, images, meta, _, clf = world
    made = []

    def fake_renderer_for(settings, device="auto"):
        made.append((settings.resolution, device))
        return FakeRenderer(classes=CLASSES, resolution=24)

    monkeypatch.setattr(renderer_module, "renderer_for", fake_renderer_for)
    stage = methods.get("examine").stage.shared_stage("examine_study")
    assert stage.key == "study" and stage.scene and stage.model_key == "full_model"
    p = tiny_params(
        study=dict(
            epochs=1,
            m_study=dict(enabled=False),
            artificial_weakness=dict(enabled=False),
            order_check=False,
            strength=True,
            strength_examiner="bo",
            T=5,
        ),
        T=3,
        checkpoints=[0, 3],
        classes=["disc", "cross"],
    )
    full = methods.AuditTarget(
        name="scenes",
        model=clf,
        classes=[f"my_{c}" for c in CLASSES],
        test=None,
        params=SimpleNamespace(class_map={f"my_{c}": c for c in CLASSES}),
    )
    scene = methods.SceneData(images=images, table=meta, settings={"resolution": 24})
    inputs = methods.SharedInputs(scene=scene, target=full)
    out = methods.run_shared("examine", "examine_study", inputs, p, Runtime(device="cpu"))
    assert made == [(24, "cpu")]
    assert set(out.metrics) == {"strength"} and len(out.tables["strength"]) == 2
    with pytest.raises(DataError, match="needs the rendered scene data set"):
        methods.run_shared("examine", "examine_study", methods.SharedInputs(target=full), p, Runtime(device="cpu"))
