"""The examiner paper's image architectures in weakspot.models: [0, 1] inputs, seeded training, hflip, batch norm."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from weakspot.errors import ConfigError, DataError
from weakspot.examine.fake import FakeRenderer
from weakspot.models import ARCHS, PAPER_LR, Normalize, TorchClassifier, train_torch_classifier
from weakspot.scene.dataset import images_to_input

IMAGE_ARCHS = ["small_cnn", "alexnet", "resnet34"]


@pytest.mark.parametrize("arch", IMAGE_ARCHS)
def test_image_arch_maps_unit_images_to_logits(arch):
    torch.manual_seed(0)
    m = ARCHS.get(arch)((3, 32, 32), 5).eval()
    assert isinstance(m[0], Normalize)  # normalises inside: attacks work in [0, 1] pixel space
    x = torch.rand(2, 3, 32, 32)
    with torch.no_grad():
        out = m(x)
    assert out.shape == (2, 5) and torch.isfinite(out).all()
    clf = TorchClassifier(m, n_classes=5, device="cpu")
    g = clf.input_gradient(x.numpy(), np.array([0, 1]))
    assert g.shape == (2, 3, 32, 32) and np.abs(g).sum() > 0


@pytest.mark.parametrize(
    "arch,shape", [("alexnet", (3, 64, 64)), ("small_cnn", (3, 48, 48)), ("small_cnn", (1, 24, 24))]
)
def test_image_archs_take_other_sizes(arch, shape):
    m = ARCHS.get(arch)(shape, 7).eval()
    with torch.no_grad():
        assert m(torch.rand(2, *shape)).shape == (2, 7)


def test_resnet34_is_torchvisions_with_a_small_stem_and_paper_lrs():
    net = ARCHS.get("resnet34")((3, 32, 32), 10)[1]
    assert [len(getattr(net, f"layer{i}")) for i in range(1, 5)] == [3, 4, 6, 3]  # ResNet34's blocks
    assert net.conv1.kernel_size == (3, 3) and net.conv1.stride == (1, 1)
    assert isinstance(net.maxpool, torch.nn.Identity)
    assert PAPER_LR["resnet34"] == 0.005 and PAPER_LR["alexnet"] == 0.001  # paper Sec. 4.1


def test_normalize_matches_the_old_constants():
    x = torch.tensor([0.0, 0.5, 1.0])
    assert torch.equal(Normalize()(x), torch.tensor([-2.0, 0.0, 2.0]))


def test_image_archs_reject_bad_shapes():
    with pytest.raises(ConfigError, match=r"\(C, H, W\)"):
        ARCHS.get("small_cnn")((32, 32), 3)
    with pytest.raises(ConfigError, match="n_classes"):
        ARCHS.get("alexnet")((3, 32, 32), 1)
    with pytest.raises(ConfigError, match="valid names: alexnet, lenet, mlp, resnet34, small_cnn"):
        ARCHS.get("vgg")


def test_images_to_input():
    imgs = np.zeros((2, 4, 5, 3), np.uint8)
    imgs[0, 1, 2] = (255, 0, 51)
    x = images_to_input(imgs)
    assert x.dtype == np.float32 and x.shape == (2, 3, 4, 5)
    assert x[0, :, 1, 2].tolist() == pytest.approx([1.0, 0.0, 0.2])
    assert x.min() >= 0 and x.max() <= 1
    with pytest.raises(DataError, match="uint8"):
        images_to_input(imgs.astype(np.float32))
    with pytest.raises(DataError, match=r"\(n, H, W, 3\)"):
        images_to_input(imgs[..., 0])


def _shapes(n_per_class=24, seed=0):
    r = FakeRenderer(classes=["disc", "square", "cross"], resolution=24, seed=seed)
    rng = np.random.default_rng(seed)
    scenes = [
        {
            "class": c,
            "instance": int(i),
            "view_elevation": 0.0,
            "view_roll": float(rng.uniform(0, 360)),
            "view_distance": float(rng.uniform(1.6, 2.6)),
        }
        for c in r.classes
        for i in range(n_per_class)
    ]
    return images_to_input(r.render(scenes)), np.repeat(np.arange(3), n_per_class)


def _train_small_cnn(x, y, seed, epochs=12, **kw):
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        m = ARCHS.get("small_cnn")(tuple(x.shape[1:]), 3)
    h = train_torch_classifier(m, x, y, epochs=epochs, lr=0.003, batch_size=16, seed=seed, device="cpu", **kw)
    return m, h


def test_small_cnn_learns_the_shapes_and_trains_deterministically():
    x, y = _shapes()
    xt, yt = _shapes(seed=5)
    accs, models = [], []
    for seed in (1, 2, 3):  # one seed's accuracy ranges from 0.6 to 0.96 across machines' float kernels
        m, _ = _train_small_cnn(x, y, seed=seed, epochs=20, augment="hflip")
        accs.append((TorchClassifier(m, n_classes=3, device="cpu").predict_proba(xt).argmax(1) == yt).mean())
        models.append(m)
    assert np.mean(accs) > 0.7, accs  # chance is 1/3
    m1 = models[0]
    m2, _ = _train_small_cnn(x, y, seed=1, epochs=20, augment="hflip")
    s1, s2 = m1.state_dict(), m2.state_dict()
    assert list(s1) == list(s2) and all(torch.equal(s1[k], s2[k]) for k in s1)
    m3, _ = _train_small_cnn(x, y, seed=2, epochs=1, augment="hflip")
    m4, _ = _train_small_cnn(x, y, seed=2, epochs=1)  # the flips change the weights
    assert not all(torch.equal(a, b) for a, b in zip(m3.state_dict().values(), m4.state_dict().values()))


def test_batch_norm_skips_a_trailing_single_sample_batch():
    x, y = _shapes(6)
    x, y = x[:17], y[:17]  # batches of 16: one of 16 and one of 1
    _, h = _train_small_cnn(x, y, seed=0, epochs=2)
    assert h["steps"] == [1, 2]
    # a model without batch norm uses every batch
    h = train_torch_classifier(
        torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 24 * 24, 3)),
        x,
        y,
        epochs=1,
        lr=0.01,
        batch_size=8,
        seed=0,
        device="cpu",
    )
    assert h["steps"] == [3]  # batches of 8: 8, 8, 1


def test_hflip_needs_images_and_a_known_name():
    x = np.zeros((4, 3), np.float32)
    y = np.array([0, 1, 0, 1])
    with pytest.raises(ConfigError, match="needs images"):
        train_torch_classifier(
            torch.nn.Linear(3, 2), x, y, epochs=1, lr=0.1, batch_size=2, seed=0, device="cpu", augment="hflip"
        )
    with pytest.raises(ConfigError, match="augment"):
        train_torch_classifier(
            torch.nn.Linear(3, 2), x, y, epochs=1, lr=0.1, batch_size=2, seed=0, device="cpu", augment="rotate"
        )
