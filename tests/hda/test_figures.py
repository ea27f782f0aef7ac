"""weakspot.hda.figures: every figure of an HDA result, and the choice of the AEs shown."""

import copy
from dataclasses import replace

import numpy as np
import pytest

from weakspot.hda.figures import aes_figure, figures, indicators_figure, natural_aes


@pytest.fixture(autouse=True)
def _close():
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


def test_every_figure_is_drawn(toy):
    from matplotlib.figure import Figure

    for kind in ("white", "black"):
        result, p = toy[kind][:2]
        figs = figures(result, p)
        assert list(figs) == ["landscape", "aes", "ga_curve", "indicators", "samples"]
        assert all(isinstance(f, Figure) for f in figs.values())
    assert len(figures(*toy["white"][:2])["indicators"].axes) == 2  # gradient and separation
    assert len(figures(*toy["black"][:2])["indicators"].axes) == 1  # a black box has no gradient


def test_the_aes_shown_are_each_seeds_most_natural_ae(toy):
    result = toy["white"][0]
    e, res = result.generators.evals[("hda", "selected")], result.generators.results[("hda", "selected")]
    picks = natural_aes(result)
    assert 0 < len(picks) <= 12 and all(e.ae_mask[j] for j in picks)
    seeds = res.seed_index[picks]
    assert len(set(seeds)) == len(seeds)  # one AE per seed
    for j in picks:  # no AE of the same seed is more natural
        mine = np.where((res.seed_index == res.seed_index[j]) & e.ae_mask)[0]
        assert e.ssim_cases[j] == e.ssim_cases[mine].max()
    assert len(natural_aes(result, most=1)) == 1


def test_no_aes_says_so(toy):
    result = copy.copy(toy["white"][0])
    key = ("hda", "selected")
    e = result.generators.evals[key]
    result.generators = replace(result.generators, evals={key: replace(e, ae_mask=np.zeros_like(e.ae_mask))})
    fig = aes_figure(result)
    assert any(t.get_text() == "no AEs found" for ax in fig.axes for t in ax.texts)


def test_indicators_figure_plots_each_ball():
    g = np.random.default_rng(0)
    fig = indicators_figure(-g.random(9), g.random(9), g.random(9))
    assert [len(ax.collections[0].get_offsets()) for ax in fig.axes] == [9, 9]
