from types import SimpleNamespace

import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from weakspot import methods
from weakspot.corner.config import CornerParams
from weakspot.corner.figures import figures, path_seeds
from weakspot.corner.report import report
from weakspot.models import TorchClassifier
from weakspot.plotting import pyplot
from weakspot.runtime import Runtime

from .conftest import TINY, toy_target


@pytest.fixture(scope="module")
def toy_figures(toy_run, toy):
    params, res, _ = toy_run
    figs = figures(res, params, toy)
    yield figs
    for f in figs.values():
        pyplot().close(f)


def test_the_figures_are_those_the_report_names(toy_run, toy, toy_figures):
    params, res, _ = toy_run
    named = {i["figure"] for i in report(res, params, toy).section.items if "figure" in i}
    assert set(toy_figures) == named and all(isinstance(f, Figure) for f in toy_figures.values())


def test_the_optimisation_paths_show_n_paths_seeds_at_six_steps(toy_run, toy_figures):
    params, _, _ = toy_run
    axes = toy_figures["optimisation_paths"].axes
    assert len(axes) == params.n_paths * 6
    assert axes[0].get_title().startswith("step 0: ") and axes[5].get_title().startswith(f"step {params.steps}: ")


def test_a_2d_code_shows_the_decision_regions_and_every_trajectory(toy_run, toy_figures):
    _, res, _ = toy_run
    [ax] = toy_figures["latent_plane"].axes
    assert len(ax.images) == 1  # the classifier's regions on the decoded plane
    assert len(ax.lines) == res.search.n  # one trajectory per seed
    assert "PCA" not in ax.get_title()


def test_image_rows_keep_their_labels(toy_figures):
    texts = {t.get_text() for ax in toy_figures["fgsm_vs_latent"].axes for t in ax.texts}
    assert {"G(s)", "FGSM eps=0.25", "latent step 0.25"} <= texts
    texts = {t.get_text() for ax in toy_figures["reconstructions"].axes for t in ax.texts}
    assert texts == {"training", "G(E(x))"}
    images = [im for ax in toy_figures["fgsm_vs_latent"].axes for im in ax.images]
    assert len(images) == 3 * 8 and {im.get_interpolation() for im in images} == {"nearest"}  # pixels as squares


def test_path_seeds_puts_corner_cases_first_by_margin_drop():
    search = SimpleNamespace(margin_before=np.array([5.0, 5.0, 5.0, 5.0]), margin_after=np.array([4.0, 1.0, 0.1, 3.0]))
    flags = {"corner": np.array([True, False, False, True])}
    assert path_seeds(search, flags, 4) == [3, 0, 2, 1]  # corner: drops 2 > 1; rest: drops 4.9 > 4
    assert path_seeds(search, flags, 3) == [3, 0, 2]


def test_rgb_images_run_end_to_end_with_a_larger_code_and_the_discriminator():
    """The registered method through run_method: run, report and figures, the section checked."""
    rng = np.random.default_rng(0)
    n = 48
    colour = rng.uniform(0, 1, size=(n, 3, 1, 1))
    X = np.clip(colour + 0.1 * rng.standard_normal((n, 3, 32, 32)), 0, 1).astype(np.float32)
    torch.manual_seed(0)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, stride=4), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 3)
    )
    target = toy_target(TorchClassifier(module, n_classes=3, device="cpu"), X, rng.integers(0, 3, n), ["r", "g", "b"])
    params = CornerParams(**dict(TINY, epochs=1, batch_size=32, disc_epochs=1, n_seeds=8, steps=3))
    out = methods.run_method("corner", target, params, Runtime(device="cpu"))
    m = out.section.metrics
    assert m["latent_dim"] == 8 and m["discriminator"] is True and "disc_real_share" in m
    assert "D(G(s))" in " ".join(out.section.tables["yield"]["what"])
    assert {"reconstructions", "latent_plane"} <= set(out.section.figures)
    [ax] = out.section.figures["latent_plane"].axes
    assert "PCA" in ax.get_title() and not ax.images  # an 8-D code: projected, no decision regions
    for f in out.section.figures.values():
        pyplot().close(f)


def test_a_training_sample_smaller_than_the_train_split_runs_and_draws(toy):
    """corner.train_sample below the training images: the generator, the search and every figure use the same
    seeded sample (a figure drawn over all training images against the sample's codes fails)."""
    from weakspot.corner.run import run

    from .conftest import RecordingRuntime

    params = CornerParams(**{**TINY, "train_sample": 100, "n_seeds": 12, "epochs": 5})
    res = run(toy, params, RecordingRuntime())
    assert res.n_train == 100
    figs = figures(res, params, toy)
    assert {"latent_plane", "reconstructions"} <= set(figs)
    for f in figs.values():
        pyplot().close(f)
