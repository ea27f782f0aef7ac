"""The study's figures: exactly the ones its report's items name, for the experiments that ran."""

from weakspot.examine.study_figures import study_figures


def test_the_figures_the_items_name(world, study):
    from matplotlib.figure import Figure

    params = world[4]
    res, out, _ = study
    figs = study_figures(res, params)
    assert list(figs) == ["artificial_weakness", "artificial_tsne", "factor_order", "strength"]
    assert all(isinstance(f, Figure) for f in figs.values())
    assert {i["figure"] for i in out.items if "figure" in i} == set(figs)
    out.figures.update(figs)
    assert out.check() is out
    aw = params.study.artificial_weakness
    assert len(figs["artificial_tsne"].axes) == len([e for e in aw.examiners if e != "random"])
    assert len(figs["strength"].axes) == 1 + params.n_worst  # the curves and the n_worst best scenes


def test_only_the_experiments_that_ran_are_drawn(world):
    from weakspot.examine.study import run_study

    from .examine_helpers import CLASSES, tiny_params

    space, r, images, meta, _, clf = world
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
    figs = study_figures(run_study(r, space, images, meta, p, device="cpu", full_model=(clf, CLASSES, "fake")), p)
    assert list(figs) == ["strength"]
    assert len(figs["strength"].axes) == 1 + 2  # the curves and the two classes' best scenes (n_worst = 2)
