"""GAD's figures: Figs. 1-5 and each seed's SDR, one panel per target; GAD left out where it is unreliable."""

from tests.gad.helpers import small_params
from weakspot.gad.figures import figures
from weakspot.gad.report import section

NAMES = {"sdr_curves", "errors_found", "sdr_by_seed", "confidence_boxplots", "reliability", "loess_fit"}


def _labels(ax):
    return ax.get_legend_handles_labels()[1]


def test_figures_are_the_items_of_the_section_one_panel_per_target(outcome, noise_outcome):
    import matplotlib.pyplot as plt

    p = small_params()
    figs = figures([outcome, noise_outcome], p, None)
    assert set(figs) == NAMES
    for f in figs.values():
        assert len(f.axes) == 2  # phoneme, noise
    r = section([outcome, noise_outcome], p)
    r.figures.update(figs)
    r.check()  # every item's figure is drawn
    curves = figs["sdr_curves"].axes
    assert "GAD" in _labels(curves[0]) and "GAD" not in _labels(curves[1])  # unreliable on noise: not drawn
    assert "Random" in _labels(curves[1])
    assert len(curves[0].get_lines()) == len(p.searches) + 1  # a curve per search and SDR = 1
    assert [t.get_text() for t in figs["loess_fit"].axes[1].texts] == ["GAD unreliable here"]
    assert len(figs["loess_fit"].axes[0].collections) == 3  # pool, queried, errors
    for f in figs.values():
        plt.close(f)


def test_the_loess_panel_shows_pool_1_of_the_audited_run(outcome, second_seed):
    import matplotlib.pyplot as plt

    figs = figures([second_seed, outcome], small_params(seeds=[0, 1]), None)
    ax = figs["loess_fit"].axes[0]
    assert ax.get_title() == "phoneme seed 0, pool 1"
    pool = ax.collections[0].get_offsets()
    queried = ax.collections[1].get_offsets()
    assert len(pool) + len(queried) == len(outcome.example["confidence"])
    assert figs["sdr_by_seed"].axes[0].get_title() == "phoneme: 2 split seed(s)"
    for f in figs.values():
        plt.close(f)
