"""Toy data, classifiers and a trained toy generator shared by the corner-case tests (all small: seconds on a CPU)."""

import numpy as np
import pytest
import torch


class MeanThreshold(torch.nn.Module):
    """Two classes split by mean pixel intensity: the decision boundary is ``mean(x) = 0.5``; logit margin
    ``2 * gain * |mean(x) - 0.5|``."""

    def __init__(self, gain: float = 10.0):
        super().__init__()
        self.gain = gain

    def forward(self, x):
        m = x.mean(dim=(1, 2, 3)) - 0.5
        return torch.stack([-self.gain * m, self.gain * m], dim=1)


def intensity_images(n: int, levels, seed: int = 0, size: int = 8) -> np.ndarray:
    """Flat-ish grey images: intensity ``c`` drawn uniformly from the union of ``levels`` intervals, plus a faint
    fixed gradient so that the images are not all alike."""
    rng = np.random.default_rng(seed)
    which = rng.integers(0, len(levels), size=n)
    c = np.array([rng.uniform(*levels[w]) for w in which])
    ramp = np.linspace(-0.05, 0.05, size)[None, :] * np.ones((size, 1))
    x = np.clip(c[:, None, None] + ramp[None], 0, 1)[:, None].astype(np.float32)
    return x


def tiny_ae_kwargs(**kw):
    out = dict(latent_dim=2, channels=(8, 8, 8, 8), hidden=32, epochs=25, lr=3e-3, batch_size=32, seed=0)
    out.update(kw)
    return out


@pytest.fixture(scope="package")
def mean_threshold_clf():
    from weakspot.models import TorchClassifier

    return TorchClassifier(MeanThreshold(), n_classes=2, device="cpu")


@pytest.fixture(scope="package")
def gap_generator():
    """A toy generator trained on images of intensity in [0.05, 0.3] or [0.7, 0.95]: the mean-threshold boundary
    (0.5) lies in the gap between the two clusters, outside the data."""
    from weakspot.corner.autoencoder import train_autoencoder

    torch.set_num_threads(1)
    X = intensity_images(240, [(0.05, 0.3), (0.7, 0.95)], seed=1)
    return X, train_autoencoder(X, **tiny_ae_kwargs())


@pytest.fixture(scope="package")
def wide_generator():
    """A toy generator trained on intensities spread over [0.1, 0.9]: the boundary (0.5) runs through the data."""
    from weakspot.corner.autoencoder import train_autoencoder

    torch.set_num_threads(1)
    X = intensity_images(240, [(0.1, 0.9)], seed=2)
    return X, train_autoencoder(X, **tiny_ae_kwargs())


TINY = dict(
    channels=[8, 8, 8, 8], hidden=32, epochs=30, batch_size=16, n_seeds=24, steps=30, lr=0.05, n_paths=2, max_findings=5
)
"""Corner params small enough for a test (seconds), large enough that the search finds corner cases."""


def toy_target(clf, X, y, classes, name="toy"):
    """An :class:`~weakspot.methods.AuditTarget` of a classifier on images (training and test rows alike)."""
    from weakspot.data.dataset import Dataset
    from weakspot.methods import AuditTarget

    ds = Dataset(X=X, y=y, classes=list(classes), image_shape=tuple(X.shape[1:]) if X.ndim == 4 else None)
    return AuditTarget(name=name, model=clf, classes=list(classes), test=ds, train=ds, digest=name)


class RecordingRuntime:
    """The in-process runtime that records every cached call's function and key."""

    def __init__(self):
        from weakspot.runtime import Runtime

        self._inner = Runtime(device="cpu")
        self.device, self.progress, self.calls = "cpu", self._inner.progress, []

    def cached(self, fn, *args, key, label="", **kw):
        self.calls.append((fn, key))
        return self._inner.cached(fn, *args, key=key, label=label, **kw)


@pytest.fixture(scope="package")
def toy():
    """The mean-threshold classifier on 128 grey images of intensities spread over [0.1, 0.9], labelled by it."""
    from weakspot.models import TorchClassifier

    X = intensity_images(128, [(0.1, 0.9)], seed=3)
    y = (X.mean((1, 2, 3)) > 0.5).astype(np.int64)
    return toy_target(TorchClassifier(MeanThreshold(), n_classes=2, device="cpu"), X, y, ["dark", "bright"])


@pytest.fixture(scope="package")
def toy_run(toy):
    """``run`` on :func:`toy` with :data:`TINY` params at depth study (the FGSM comparison and the paper-lr rerun
    are the study's) through a :class:`RecordingRuntime`: (params, result, runtime)."""
    from weakspot.corner.config import CornerParams
    from weakspot.corner.run import run

    torch.set_num_threads(1)
    params = CornerParams(**TINY, depth="study")
    rt = RecordingRuntime()
    return params, run(toy, params, rt), rt
