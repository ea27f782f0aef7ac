"""The examine params: the paper's defaults, named errors, examiner and architecture names from their registries."""

import pytest
from pydantic import ValidationError

from weakspot.examine.config import PAPER_SETTINGS, ExamineParams
from weakspot.examine.examiners import EXAMINERS


def test_paper_defaults():
    p = ExamineParams()
    assert (p.T, p.checkpoints, p.examiners) == (500, [0, 100, 300, 500], ["random", "bo", "rl"])
    assert (p.study.arch, p.study.epochs, p.study.lr, p.study.learning_rate()) == ("small_cnn", 40, None, 0.001)
    assert ExamineParams(study=dict(arch="resnet34")).study.learning_rate() == 0.005  # Sec. 4.1
    assert (p.rl.bins, p.rl.embedding_size, p.rl.hidden_size, p.rl.lr, p.rl.batch_size) == (100, 30, 30, 0.001, 32)
    assert p.bo.init_points == 2
    assert p.study.m_study.values == [1, 2, 5, 10] and p.study.m_study.T == 200
    assert p.study.artificial_weakness.train_range == (-30.0, 30.0) and p.study.artificial_weakness.T == 250
    assert p.study.order_check and p.study.strength
    for key, (paper, _) in PAPER_SETTINGS.items():  # the report's table of the paper's settings matches the defaults
        obj = p
        for part in key.split("."):
            obj = getattr(obj, part)
        assert obj == paper, key


def test_names_and_costs():
    p = ExamineParams(T=30, checkpoints=[0, 10, 30], rl=dict(batch_size=8), random_batch=2)
    assert p.names() == ["T0", "T10", "T30"]
    assert [p.queries_per_iteration(e) for e in ("rl", "bo", "random")] == [8, 1, 2]


def test_bad_params_are_named():
    with pytest.raises(ValidationError, match="checkpoints"):
        ExamineParams(T=100, checkpoints=[0, 50, 200])
    with pytest.raises(ValidationError, match="extra"):
        ExamineParams(budget=3)
    for old in ({"models": ["small_cnn"]}, {"epochs": 3}):  # the audited model is given from outside now
        with pytest.raises(ValidationError, match="extra"):
            ExamineParams(**old)
    with pytest.raises(ValidationError, match="valid names: bo, random, rl"):
        ExamineParams(examiners=["cmaes"])
    with pytest.raises(ValidationError, match="cmaes"):
        ExamineParams(study=dict(m_study=dict(examiners=["cmaes"])))
    with pytest.raises(ValidationError, match="cmaes"):
        ExamineParams(study=dict(strength_examiner="cmaes"))
    with pytest.raises(ValidationError, match="unknown architecture 'vgg'"):
        ExamineParams(study=dict(arch="vgg"))


def test_examiner_names_come_from_the_registry():
    from weakspot.examine.examiners import RandomExaminer, register_examiner

    assert "sobol_test" not in EXAMINERS
    register_examiner("sobol_test")(type("SobolTest", (RandomExaminer,), {}))
    try:
        assert ExamineParams(examiners=["sobol_test"]).examiners == ["sobol_test"]
    finally:
        EXAMINERS._items.pop("sobol_test")


#: every experiment of the study off, as params.yaml's CPU default has them
STUDY_OFF = {
    "order_check": False,
    "strength": False,
    "m_study": {"enabled": False},
    "artificial_weakness": {"enabled": False},
}


def test_depth_study_switches_the_studys_experiments_on():
    """issue 49: depth study runs the order check, the strength mode and the planted weakness as if their flags were
    true (Table 3's m study keeps its own flag); the examinations' settings are the same at both depths."""
    audit = ExamineParams(study=STUDY_OFF)
    assert audit.depth == "audit" and not audit.study.enabled
    deep = ExamineParams(depth="study", study={**STUDY_OFF, "T": 7, "artificial_weakness": {"enabled": False, "T": 9}})
    st = deep.study
    assert st.order_check and st.strength and st.artificial_weakness.enabled and st.enabled
    assert not st.m_study.enabled and st.T == 7 and st.artificial_weakness.T == 9
    assert audit.model_dump(exclude={"depth", "study"}) == deep.model_dump(exclude={"depth", "study"})
    assert ExamineParams.model_validate(deep.model_dump()) == deep  # a dump validates to itself
    assert ExamineParams().study.order_check and not ExamineParams(study=STUDY_OFF).study.order_check


def test_the_study_stage_runs_at_depth_study():
    """The pipeline declares the shared stage examine_study when ``examine.study.enabled`` (ops.engine.pipeline):
    at depth study it is, whatever the experiments' flags say."""
    from ops.engine.pipeline import _shared

    stages = lambda depth: [s.name for _, s, _ in _shared({"examine": {"depth": depth, "study": STUDY_OFF}}, {})]  # noqa: E731
    assert stages("audit") == [] and stages("study") == ["examine_study"]
