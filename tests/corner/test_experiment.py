import json

import numpy as np
import pytest
import torch

from weakspot.corner.config import CornerParams
from weakspot.corner.experiment import run_corner
from weakspot.findings import normalise
from weakspot.models import TorchClassifier
from weakspot.result import StageResult

from .conftest import MeanThreshold, intensity_images

TINY = dict(channels=[8, 8, 8, 8], hidden=32, epochs=30, batch_size=16, n_seeds=24, steps=30, lr=0.05, n_paths=2,
            max_findings=5)
REQUIRED = {"n_seeds", "margin_before", "margin_after", "realistic_yield", "tv_corner", "tv_fgsm", "top_class_pairs"}


@pytest.fixture(scope="module")
def toy():
    X = intensity_images(128, [(0.1, 0.9)], seed=3)
    y = (X.mean((1, 2, 3)) > 0.5).astype(np.int64)
    return TorchClassifier(MeanThreshold(), n_classes=2, device="cpu"), X, y


def test_run_corner_shapes_and_determinism(toy):
    clf, X, y = toy
    res, f = run_corner(clf, X, y, ["dark", "bright"], TINY)
    assert isinstance(res, StageResult)
    res.check()
    m = res.metrics
    assert REQUIRED <= set(m)
    assert m["n_seeds"] == 24 and 0 <= m["realistic_yield"] <= 1
    assert m["margin_after"] < m["margin_before"]
    assert all(isinstance(a, str) and isinstance(b, str) and isinstance(c, int) for a, b, c in m["top_class_pairs"])
    if m["top_class_pairs"]:
        assert m["top_class_pairs"][0][:2] == ["dark", "bright"]
    assert m["realistic_yield"] == pytest.approx(m["n_corner_cases"] / 24)
    assert {"optimisation_paths", "latent_plane", "fgsm_vs_latent"} <= set(res.figures)
    assert {"yield", "class_pairs", "fgsm_comparison"} <= set(res.tables)
    assert res.summary and res.headline and res.title
    # findings: class-pair rows first (severity = count), then inputs (severity = 1 - margin)
    norm = normalise(f, where="corner")
    assert len(norm) == len(f) > 0
    kinds = list(f["kind"])
    assert kinds == sorted(kinds, key=lambda k: k != "class_pair")
    pair = f[f["kind"] == "class_pair"]
    assert pair["severity"].sum() == m["n_corner_cases"]
    inp = f[f["kind"] == "input"]
    assert len(inp) == min(5, m["n_corner_cases"])
    assert (inp["severity"] > 1 - CornerParams().boundary_margin).all()
    assert set(f["prediction"]) <= {"dark", "bright"} and f["label"].isna().all()  # generated: no true class
    assert all(json.loads(e)["p1 - p2"] < CornerParams().boundary_margin for e in inp["example"])
    assert all(isinstance(b, bytes) and b[:4] == b"\x89PNG" for b in f["image"])
    # same seed, same corner cases
    res2, f2 = run_corner(clf, X, y, ["dark", "bright"], CornerParams(**TINY))
    assert "seconds" not in m and "seconds" in res.tables  # timings never in the metrics (byte-identical reruns)
    assert res2.metrics == m
    assert list(f2["image"]) == list(f["image"]) and f2.drop(columns="image").equals(f.drop(columns="image"))
    # another seed, other corner cases
    _, f3 = run_corner(clf, X, y, ["dark", "bright"], {**TINY, "seed": 1})
    assert list(f3["image"]) != list(f["image"])


def test_rgb_images_use_a_larger_code_and_the_discriminator():
    rng = np.random.default_rng(0)
    n = 48
    colour = rng.uniform(0, 1, size=(n, 3, 1, 1))
    X = np.clip(colour + 0.1 * rng.standard_normal((n, 3, 32, 32)), 0, 1).astype(np.float32)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, stride=4), torch.nn.ReLU(), torch.nn.Flatten(),
                                 torch.nn.Linear(4 * 8 * 8, 3))
    clf = TorchClassifier(module, n_classes=3, device="cpu")
    y = rng.integers(0, 3, n)
    params = dict(TINY, epochs=1, batch_size=32, disc_epochs=1, n_seeds=8, steps=3)
    res, f = run_corner(clf, X, y, ["r", "g", "b"], params)
    assert res.metrics["latent_dim"] == 8 and res.metrics["discriminator"] is True
    assert "disc_real_share" in res.metrics
    assert "D(G(s))" in " ".join(res.tables["yield"]["what"])
    normalise(f, where="corner")


def test_refuses_wrong_inputs(toy):
    from weakspot.errors import ConfigError, DataError

    clf, X, y = toy
    with pytest.raises(DataError):
        run_corner(clf, X.reshape(len(X), -1), y, ["a", "b"], TINY)
    with pytest.raises(DataError):
        run_corner(clf, X * 3, y, ["a", "b"], TINY)
    with pytest.raises(ConfigError):
        run_corner(clf, X, y, ["a", "b", "c"], TINY)


def test_a_given_generator_gives_what_training_it_here_gives(toy):
    """The pipeline trains the generator once per data set and hands it in: same result as training it in place."""
    from weakspot.corner.experiment import train_generator
    from weakspot.corner.autoencoder import Generator

    clf, X, y = toy
    g = Generator.from_bytes(train_generator(X, TINY).to_bytes())  # through its serialised form, as the pipeline
    a, fa = run_corner(clf, X, y, ["dark", "bright"], TINY)
    b, fb = run_corner(clf, X, y, ["dark", "bright"], TINY, generator=g)
    assert a.metrics == b.metrics and list(fa["image"]) == list(fb["image"])
    with pytest.raises(Exception, match="does not match"):
        run_corner(clf, X, y, ["dark", "bright"], {**TINY, "latent_dim": 3}, generator=g)


def test_the_settings_table_says_what_differs_from_the_paper(toy):
    clf, X, y = toy
    res, _ = run_corner(clf, X, y, ["dark", "bright"], {**TINY, "lr_schedule": "cosine"})
    st = res.tables["settings"].set_index("setting")
    assert st.loc["lr", "ran"] == "0.05" and bool(st.loc["lr", "differs"])
    assert bool(st.loc["lr_schedule", "differs"]) and not bool(st.loc["fgsm_eps", "differs"])
    assert bool(st.loc["steps", "differs"])  # TINY runs 30 steps, the paper 50
    text = " ".join(res.summary)
    assert "Settings that differ from the paper's" in text and "lr 0.05" in text and "30 Adam steps" in text
