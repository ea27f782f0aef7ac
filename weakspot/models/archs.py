"""Built-in architectures for the model under audit: ``lenet`` (images) and ``mlp`` (anything, flattened), and the
examiner paper's image models ``small_cnn``, ``alexnet`` and ``resnet34`` for rendered scenes.

Caveats first:

* ``lenet`` and ``mlp`` are small models meant to be trained here in seconds on a CPU; they use ReLU and max pooling
  rather than LeNet-5's original scaled tanh and subsampling layers.
* ``small_cnn``, ``alexnet`` and ``resnet34`` take float32 images in [0, 1] shaped ``(n, C, H, W)``
  (``weakspot.scene.images_to_input`` makes them from rendered uint8 images) and normalise inside the module
  (:class:`Normalize`, ``(x - 0.5) / 0.25``, fixed constants, so a model needs no statistics from the data), so
  white-box attacks work in [0, 1] pixel space.
* ``resnet34`` and ``alexnet`` are torchvision's, untrained (no weights are ever downloaded), adapted to 32-64 px
  inputs: ResNet34's first convolution becomes 3x3 / stride 1 without the max-pool for <= 32 px (the CIFAR
  recipe); AlexNet keeps its five convolutions with small kernels and strides, an adaptive pool to 2x2 and a
  512-wide classifier (4096 in the original).
* ``small_cnn`` is this project's 4-layer CNN for the fast CPU profile: ResNet34 (21 M parameters) trains at about
  50 images/s on 2 CPU cores at 32 px.

Reference for the image models: M. Shu et al., "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``), Sec. 4.1: ResNet34 (lr 0.005) and AlexNet (lr 0.001), Adam, 40 epochs (:data:`PAPER_LR`).

Add an architecture with::

    from weakspot.models import register_arch

    @register_arch("mynet")
    def build_mynet(input_shape, n_classes):
        return MyNet(...)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Sequence, Tuple

from weakspot.errors import ConfigError
from weakspot.registry import Registry

if TYPE_CHECKING:
    import torch.nn as nn

#: The torch modules, in :mod:`weakspot.models.nets`: the registry and the names of the architectures need no torch
#: (validating params.yaml names them), so it is imported when an architecture is built or a module asked for.
_NETS = ("LeNet", "MLP", "Normalize")


def __getattr__(name: str) -> Any:
    if name in _NETS:
        from weakspot.models import nets

        return getattr(nets, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


ARCHS = Registry("model architecture")
"""Registry of built-in architectures: name -> ``build(input_shape, n_classes) -> torch.nn.Module``."""


#: Adam learning rates of the examiner paper (``seeds/000`` Sec. 4.1); ``small_cnn`` uses AlexNet's.
PAPER_LR: Dict[str, float] = {"resnet34": 0.005, "alexnet": 0.001, "small_cnn": 0.001}

#: Training epochs of the examiner paper (``seeds/000`` Sec. 4.1).
PAPER_EPOCHS = 40


def register_arch(name: str) -> Callable:
    """Decorator that adds a builder ``build(input_shape, n_classes) -> nn.Module`` under ``name``."""
    return ARCHS.register(name)


@register_arch("lenet")
def build_lenet(input_shape: Sequence[int], n_classes: int) -> Any:
    """LeNet for square images of shape ``(C, S, S)``."""
    from weakspot.models.nets import LeNet

    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3 or shape[1] != shape[2]:
        raise ConfigError(
            f"arch 'lenet' needs square images (C, S, S), got input shape {shape}; use arch 'mlp' for tabular data"
        )
    return LeNet(in_channels=shape[0], n_classes=n_classes, image_size=shape[1])


@register_arch("mlp")
def build_mlp(input_shape: Sequence[int], n_classes: int) -> Any:
    """MLP on the flattened input."""
    import numpy as np

    from weakspot.models.nets import MLP

    shape = tuple(int(s) for s in input_shape)
    if not shape or any(s < 1 for s in shape):
        raise ConfigError(f"arch 'mlp' needs a non-empty input shape, got {shape}")
    return MLP(int(np.prod(shape)), n_classes)


# ----------------------------------------------------------------------------------------------------------------
# image models of the examiner paper (inputs in [0, 1], normalised inside)
# ----------------------------------------------------------------------------------------------------------------
def _image_shape(arch: str, input_shape: Sequence[int], min_size: int) -> Tuple[int, int]:
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ConfigError(f"arch {arch!r} needs images (C, H, W), got input shape {shape}")
    if min(shape[1:]) < min_size:
        raise ConfigError(f"arch {arch!r} needs images of at least {min_size}x{min_size} px, got {shape[1]}x{shape[2]}")
    return shape[0], max(shape[1:])


def _check_classes(arch: str, n_classes: int) -> int:
    from weakspot.models.nets import _positive_ints

    n = _positive_ints("n_classes", [n_classes])[0]
    if n < 2:
        raise ConfigError(f"arch {arch!r}: n_classes must be >= 2, got {n}")
    return n


@register_arch("small_cnn")
def build_small_cnn(input_shape: Sequence[int], n_classes: int, *, width: int = 32) -> nn.Module:
    """A 4-conv CNN with batch norm and global average pooling (this project's fast CPU profile), on [0, 1] images."""
    import torch.nn as nn

    from weakspot.models.nets import Normalize

    channels, _ = _image_shape("small_cnn", input_shape, 8)
    n_classes = _check_classes("small_cnn", n_classes)

    def block(i: int, o: int) -> list:
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]

    w = int(width)
    return nn.Sequential(
        Normalize(),
        *block(channels, w),
        nn.MaxPool2d(2),
        *block(w, 2 * w),
        nn.MaxPool2d(2),
        *block(2 * w, 4 * w),
        nn.MaxPool2d(2),
        *block(4 * w, 4 * w),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(4 * w, n_classes),
    )


@register_arch("alexnet")
def build_alexnet(
    input_shape: Sequence[int], n_classes: int, *, width_classifier: int = 512, pool_size: int = 2
) -> nn.Module:
    """torchvision AlexNet (untrained) for small [0, 1] images: the same 5 conv + 3 FC layout, first conv 5x5 /
    stride 1 and 2x2 pools, adaptive pool to ``pool_size`` and a ``width_classifier``-wide classifier (4096 in the
    original); paper ``seeds/000`` Sec. 4.1 trains it with Adam, lr 0.001."""
    import torch.nn as nn
    from torchvision.models import alexnet as tv_alexnet

    from weakspot.models.nets import Normalize

    channels, _ = _image_shape("alexnet", input_shape, 8)
    n_classes = _check_classes("alexnet", n_classes)
    m = tv_alexnet(weights=None, num_classes=n_classes)
    m.features = nn.Sequential(
        nn.Conv2d(channels, 64, kernel_size=5, stride=1, padding=2),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(64, 192, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
        nn.Conv2d(192, 384, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.Conv2d(256, 256, kernel_size=3, padding=1),
        nn.ReLU(inplace=True),
        nn.MaxPool2d(2),
    )
    m.avgpool = nn.AdaptiveAvgPool2d((pool_size, pool_size))
    m.classifier = nn.Sequential(
        nn.Dropout(0.5),
        nn.Linear(256 * pool_size * pool_size, width_classifier),
        nn.ReLU(inplace=True),
        nn.Dropout(0.5),
        nn.Linear(width_classifier, width_classifier),
        nn.ReLU(inplace=True),
        nn.Linear(width_classifier, n_classes),
    )
    return nn.Sequential(Normalize(), m)


@register_arch("resnet34")
def build_resnet34(input_shape: Sequence[int], n_classes: int) -> nn.Module:
    """torchvision ResNet34 (untrained) for small [0, 1] images: a 3x3 / stride-1 stem, and no max-pool for inputs
    of at most 32 px; paper ``seeds/000`` Sec. 4.1 trains it with Adam, lr 0.005."""
    import torch.nn as nn
    from torchvision.models import resnet34 as tv_resnet34

    from weakspot.models.nets import Normalize

    channels, size = _image_shape("resnet34", input_shape, 8)
    n_classes = _check_classes("resnet34", n_classes)
    m = tv_resnet34(weights=None, num_classes=n_classes)
    m.conv1 = nn.Conv2d(channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    if size <= 32:
        m.maxpool = nn.Identity()
    return nn.Sequential(Normalize(), m)
