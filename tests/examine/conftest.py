"""The fake world of the examine tests, built once per session: a target model trained on the fake renderer's data,
its examination (result, report, figures) and the study (result, report, figures)."""

import pytest
import torch

from weakspot.examine.fake import FakeRenderer, fake_dataset
from weakspot.scene.space import SceneSpace

from .examine_helpers import CLASSES, tiny_params, train_target


@pytest.fixture(autouse=True)
def _close_figures():
    """Stage results hold matplotlib figures; close them so that pyplot does not keep dozens open."""
    yield
    import matplotlib.pyplot as plt

    plt.close("all")


@pytest.fixture(scope="session")
def world():
    space = SceneSpace()
    r = FakeRenderer(classes=CLASSES, resolution=24)
    images, meta = fake_dataset(r, space, instances_per_class=8, views_per_instance=10, val_instances=2)
    torch.set_num_threads(1)
    clf = train_target(images, meta)
    return space, r, images, meta, tiny_params(), clf


@pytest.fixture(scope="session")
def examined(world):
    """(result, report, calls): the target's examination and its MethodReport, findings included."""
    from weakspot.examine.report import report
    from weakspot.examine.run import examine_target

    space, r, images, meta, params, clf = world
    calls = []
    res = examine_target(r, space, clf, CLASSES, images, meta, params, progress=lambda w, d, n: calls.append((w, d, n)))
    return res, report(res, params), calls


@pytest.fixture(scope="session")
def study(world):
    """(result, section without figures, calls): the study's sessions and models, and its report."""
    from weakspot.examine.study import run_study
    from weakspot.examine.study_report import study_report

    space, r, images, meta, params, _ = world
    calls = []
    res = run_study(r, space, images, meta, params, device="cpu", progress=lambda w, d, n: calls.append((w, d, n)))
    return res, study_report(res, params), calls
