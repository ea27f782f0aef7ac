"""weakspot.intrinsic.figures: one figure per report item that names one, drawn from the measurements."""

import pytest

from weakspot.intrinsic.figures import figures, surface_figure
from weakspot.intrinsic.report import report
from tests.intrinsic.helpers import small_params


@pytest.fixture(scope="module")
def drawn(measured):
    import matplotlib.pyplot as plt

    figs = figures(measured, small_params(), None)
    yield figs
    for f in figs.values():
        plt.close(f)


def test_every_figure_the_report_names_is_drawn(drawn, measured):
    sec = report(measured, small_params(), type("T", (), {"name": "toy"})).section
    assert {i["figure"] for i in sec.items if "figure" in i} == set(drawn)


def test_the_figures_show_what_was_measured(drawn, measured):
    # worst inputs: two rows (input, neighbour), one column per finding, the largest KL first
    worst = drawn["worst_inputs"].axes
    assert len(worst) == 2 * 3
    e = measured.evals["none"]
    assert worst[3].get_title().startswith(f"KL {e.kl.max():.3f}")
    # psi vs attacks: one line per accuracy (clean and three attacks; AutoAttack off), one point per model
    lines = [
        ln
        for ln in drawn["psi_vs_attacks"].axes[0].get_lines()
        if ln.get_label() in ("clean", "FGSM", "PGD-10", "CW-10")
    ]
    assert len(lines) == 4 and all(len(ln.get_xdata()) == 2 for ln in lines)
    # per class: one bar per class and model
    assert len(drawn["per_class"].axes[0].patches) == 2 * 10


def test_a_surface_figure_has_a_row_per_model_and_a_column_per_direction(measured):
    import matplotlib.pyplot as plt

    ((i, per),) = measured.surfaces.items()
    fig = surface_figure(per, eps=measured.eps, title="t")
    try:
        images = [ax for ax in fig.axes if ax.get_images()]
        assert len(images) == 2 * 4 and fig._suptitle.get_text() == "t"
        assert images[0].get_title() == "y: random" and images[4].get_ylabel().startswith("min-max (PGD) training")
    finally:
        plt.close(fig)
