"""Target models: architectures at small resolution, seeded training on a problem with a known answer."""

import numpy as np
import pytest
import torch

from weakspot.errors import ConfigError, DataError, ModelError
from weakspot.examine.experiment import TargetModel
from weakspot.examine.fake import FakeRenderer
from weakspot.examine.models import ARCHITECTURES, PAPER_LR, build_model, predict_proba, train_model


@pytest.mark.parametrize("arch,res", [("resnet34", 32), ("alexnet", 32), ("alexnet", 64), ("small_cnn", 48)])
def test_architectures_take_small_images(arch, res):
    torch.manual_seed(0)
    m = build_model(arch, 7, res).eval()
    with torch.no_grad():
        out = m(torch.zeros(2, 3, res, res))
    assert out.shape == (2, 7)


def test_resnet34_is_torchvisions_with_a_small_stem():
    m = build_model("resnet34", 10, 32)
    assert [len(getattr(m, f"layer{i}")) for i in range(1, 5)] == [3, 4, 6, 3]  # ResNet34's blocks
    assert m.conv1.kernel_size == (3, 3) and m.conv1.stride == (1, 1)
    assert PAPER_LR["resnet34"] == 0.005 and PAPER_LR["alexnet"] == 0.001  # paper Sec. 4.1


def _shapes(n_per_class=24, seed=0):
    r = FakeRenderer(classes=["disc", "square", "cross"], resolution=24, seed=seed)
    rng = np.random.default_rng(seed)
    scenes = [{"class": c, "instance": int(i), "view_elevation": 0.0, "view_roll": float(rng.uniform(0, 360)),
               "view_distance": float(rng.uniform(1.6, 2.6))} for c in r.classes for i in range(n_per_class)]
    labels = np.repeat(np.arange(3), n_per_class)
    return r.render(scenes), labels


def test_small_cnn_learns_the_shapes_and_is_deterministic():
    x, y = _shapes()
    m1 = train_model("small_cnn", x, y, num_classes=3, epochs=12, batch_size=16, seed=1, device="cpu")
    xt, yt = _shapes(seed=5)
    acc = (predict_proba(m1, xt).argmax(1) == yt).mean()
    assert acc > 0.9
    m2 = train_model("small_cnn", x, y, num_classes=3, epochs=12, batch_size=16, seed=1, device="cpu")
    for a, b in zip(m1.state_dict().values(), m2.state_dict().values()):
        assert torch.equal(a, b)
    p = predict_proba(m1, xt)
    assert np.allclose(p.sum(1), 1, atol=1e-5)


def test_state_round_trip():
    x, y = _shapes(4)
    m = train_model("small_cnn", x, y, num_classes=3, epochs=1, seed=0, device="cpu")
    t = TargetModel(name="s", arch="small_cnn", classes=["disc", "square", "cross"], resolution=24, model=m)
    t2 = TargetModel.from_state("s", "small_cnn", t.classes, 24, t.state(), device="cpu")
    assert np.allclose(t.true_class_proba(x, y), t2.true_class_proba(x, y))
    with pytest.raises(ModelError, match="alexnet"):
        TargetModel.from_state("s", "alexnet", t.classes, 24, t.state(), device="cpu")


def test_bad_input_is_named():
    x, y = _shapes(2)
    with pytest.raises(DataError, match="uint8"):
        train_model("small_cnn", x.astype(float), y, num_classes=3, epochs=1)
    with pytest.raises(DataError, match=r"labels: must lie in \[0, 2\)"):
        train_model("small_cnn", x, y, num_classes=2, epochs=1)
    with pytest.raises(ConfigError, match="valid names: alexnet, resnet34, small_cnn"):
        build_model("vgg", 3)
    with pytest.raises(DataError, match=r"\(n, H, W, 3\)"):
        predict_proba(build_model("small_cnn", 3), x[..., 0])
    assert ARCHITECTURES.names() == ["alexnet", "resnet34", "small_cnn"]
