"""Shared helpers of the examine tests (a module, not a conftest, so tests import it by name): the fake world's
classes, small params, the target model trained on the fake renderer's data, and stubs with known answers."""

import numpy as np
import torch

from weakspot.examine.config import ExamineParams
from weakspot.models import ARCHS, TorchClassifier, train_torch_classifier
from weakspot.scene.dataset import images_to_input

CLASSES = ["disc", "square", "triangle", "cross"]


def tiny_params(**kw):
    base = dict(
        T=30,
        checkpoints=[0, 10, 20, 30],
        window=3,
        examiners=["random", "bo", "rl"],
        rl=dict(lr=0.05, batch_size=8),
        random_batch=2,
        n_random=20,
        repeats=2,
        tail=20,
        n_worst=2,
        study=dict(
            arch="small_cnn",
            epochs=15,
            lr=0.003,
            T=40,
            m_study=dict(values=[1, 10], T=4, examiners=["rl", "bo"]),
            artificial_weakness=dict(T=12, tail=24, examiners=["rl", "bo", "random"]),
        ),
    )
    base.update(kw)
    return ExamineParams(**base)


def train_target(images, meta, seed=0):
    train = meta[meta.split == "train"]
    pos = meta.index.get_indexer(train.index)
    x = images_to_input(images[pos])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        module = ARCHS.get("small_cnn")(tuple(x.shape[1:]), len(CLASSES))
    train_torch_classifier(
        module, x, train.label.to_numpy(), epochs=15, lr=0.003, batch_size=64, seed=seed, device="cpu", augment="hflip"
    )
    return TorchClassifier(module, n_classes=len(CLASSES), device="cpu")


class ElevationRenderer:
    """Renders a scene as a 4x4 grey image whose value is |view_elevation| (0..90): a known answer."""

    resolution = 4

    def __init__(self):
        self.calls = 0

    def render(self, scenes):
        self.calls += 1
        v = np.array([abs(float(s["view_elevation"])) for s in scenes])
        return (
            np.repeat(np.rint(v)[:, None, None, None], 4 * 4 * 3, axis=1).reshape(len(scenes), 4, 4, 3).astype(np.uint8)
        )


class ElevationModel:
    """Two classes; class 0's probability is 1 - |elevation| / 90 as read off an :class:`ElevationRenderer` image."""

    n_classes = 2

    def predict_proba(self, x):
        e = np.asarray(x)[:, 0, 0, 0] * 255.0 / 90.0
        return np.stack([1.0 - e, e], axis=1)
