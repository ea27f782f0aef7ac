"""A user's own images: class folders (imagefolder:) and NumPy archives (npz:), with errors that name the problem."""

import numpy as np
import pytest
from PIL import Image

from weakspot.data.sources import load_source
from weakspot.errors import ConfigError, DataError
from weakspot.targets import TargetParams


def _folder(root, classes=("cat", "dog"), n=3, size=(10, 12), mode="L"):
    rng = np.random.default_rng(0)
    pixels = {}
    for c in classes:
        (root / c).mkdir(parents=True)
        for i in range(n):
            shape = (size[1], size[0]) + (() if mode == "L" else (3,))
            a = rng.integers(0, 256, shape).astype(np.uint8)
            Image.fromarray(a, mode).save(root / c / f"{i}.png")
            pixels[(c, i)] = a
    return pixels


def test_imagefolder_reads_classes_in_sorted_order_and_scales_pixels(tmp_path):
    pixels = _folder(tmp_path / "imgs", classes=("zebra", "ant"))
    ds = load_source(f"imagefolder:{tmp_path / 'imgs'}")
    assert ds.classes == ["ant", "zebra"] and ds.X.shape == (6, 1, 12, 10) and ds.image_shape == (1, 12, 10)
    assert ds.y.tolist() == [0, 0, 0, 1, 1, 1]
    np.testing.assert_allclose(ds.X[3, 0] * 255, pixels[("zebra", 0)], atol=1e-4)
    assert len(ds.provenance["files"]) == 6


def test_imagefolder_rgb_and_resize(tmp_path):
    _folder(tmp_path / "a", mode="RGB", size=(16, 16))
    ds = load_source(f"imagefolder:{tmp_path / 'a'}", size=8)
    assert ds.X.shape == (6, 3, 8, 8) and 0 <= ds.X.min() and ds.X.max() <= 1


def test_imagefolder_errors_name_the_problem(tmp_path):
    with pytest.raises(DataError, match="folder not found"):
        load_source(f"imagefolder:{tmp_path / 'absent'}")
    (tmp_path / "flat").mkdir()
    with pytest.raises(DataError, match="no class folders"):
        load_source(f"imagefolder:{tmp_path / 'flat'}")
    _folder(tmp_path / "e")
    (tmp_path / "e" / "empty").mkdir()
    with pytest.raises(DataError, match="class folder 'empty' holds no images"):
        load_source(f"imagefolder:{tmp_path / 'e'}")
    _folder(tmp_path / "bad")
    (tmp_path / "bad" / "cat" / "9.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match="cannot read image .*9.png"):
        load_source(f"imagefolder:{tmp_path / 'bad'}")
    _folder(tmp_path / "mixed")
    Image.fromarray(np.zeros((5, 5), np.uint8)).save(tmp_path / "mixed" / "dog" / "odd.png")
    with pytest.raises(DataError, match="2 sizes .*data.image_size"):
        load_source(f"imagefolder:{tmp_path / 'mixed'}")
    assert load_source(f"imagefolder:{tmp_path / 'mixed'}", size=6).X.shape == (7, 1, 6, 6)
    with pytest.raises(ConfigError, match="image_size resizes"):
        load_source("digits", size=6)


def test_npz_channels_last_codes_and_names(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.integers(0, 256, (5, 9, 9, 3)).astype(np.uint8)
    np.savez(tmp_path / "a.npz", x=x, y=np.array([0, 1, 1, 0, 1]), classes=np.array(["no", "yes"]))
    ds = load_source(f"npz:{tmp_path / 'a.npz'}")
    assert ds.X.shape == (5, 3, 9, 9) and ds.classes == ["no", "yes"] and ds.y.tolist() == [0, 1, 1, 0, 1]
    np.testing.assert_allclose(ds.X[2].transpose(1, 2, 0) * 255, x[2], atol=1e-4)
    np.savez(tmp_path / "b.npz", x=rng.random((4, 6, 6)), y=np.array(["b", "a", "b", "a"]))
    ds = load_source(f"npz:{tmp_path / 'b.npz'}", size=4)
    assert ds.X.shape == (4, 1, 4, 4) and ds.classes == ["a", "b"] and ds.y.tolist() == [1, 0, 1, 0]


def test_npz_errors_name_the_problem(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        load_source(f"npz:{tmp_path / 'absent.npz'}")
    np.savez(tmp_path / "nx.npz", images=np.zeros((2, 4, 4)), y=np.zeros(2))
    with pytest.raises(DataError, match=r"lacks array\(s\) \['x'\]"):
        load_source(f"npz:{tmp_path / 'nx.npz'}")
    np.savez(tmp_path / "tab.npz", x=np.zeros((3, 4)), y=np.zeros(3))
    with pytest.raises(DataError, match="a table goes in csv"):
        load_source(f"npz:{tmp_path / 'tab.npz'}")
    np.savez(tmp_path / "big.npz", x=np.full((3, 4, 4), 7.0), y=np.zeros(3))
    with pytest.raises(DataError, match="must lie in"):
        load_source(f"npz:{tmp_path / 'big.npz'}")
    np.savez(tmp_path / "len.npz", x=np.zeros((3, 4, 4)), y=np.zeros(2))
    with pytest.raises(DataError, match="x has 3 rows but y 2"):
        load_source(f"npz:{tmp_path / 'len.npz'}")
    (tmp_path / "junk.npz").write_bytes(b"junk")
    with pytest.raises(DataError, match="cannot read"):
        load_source(f"npz:{tmp_path / 'junk.npz'}")


def test_user_image_sources_are_images_and_their_files_are_deps():
    t = TargetParams.model_validate(
        {"data": {"source": "imagefolder:data/imgs", "image_size": 28}, "model": {"kind": "builtin", "arch": "lenet"}}
    )
    assert t.modality == "image" and t.data.files() == ["data/imgs"]
    t = TargetParams.model_validate(
        {
            "data": {"train": "npz:tr.npz", "test": "npz:te.npz"},
            "model": {"kind": "torch", "factory": "m:f", "weights": "w.pt"},
        }
    )
    assert t.modality == "image" and t.data.files() == ["tr.npz", "te.npz"] and t.has_train
