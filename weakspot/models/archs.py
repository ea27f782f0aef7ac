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

from typing import Any, Callable, Dict, Sequence, Tuple

import numpy as np
import torch.nn as nn

from weakspot.errors import ConfigError
from weakspot.registry import Registry

ARCHS = Registry("model architecture")
"""Registry of built-in architectures: name -> ``build(input_shape, n_classes) -> torch.nn.Module``."""


#: Adam learning rates of the examiner paper (``seeds/000`` Sec. 4.1); ``small_cnn`` uses AlexNet's.
PAPER_LR: Dict[str, float] = {"resnet34": 0.005, "alexnet": 0.001, "small_cnn": 0.001}

#: Training epochs of the examiner paper (``seeds/000`` Sec. 4.1).
PAPER_EPOCHS = 40


def register_arch(name: str) -> Callable:
    """Decorator that adds a builder ``build(input_shape, n_classes) -> nn.Module`` under ``name``."""
    return ARCHS.register(name)


def _positive_ints(name: str, values: Sequence[int]) -> Tuple[int, ...]:
    out = tuple(values)
    if not out or any(isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1 for v in out):
        raise ConfigError(f"{name} must be a non-empty sequence of positive integers, got {values!r}")
    return tuple(int(v) for v in out)


class LeNet(nn.Module):
    """A LeNet-style CNN (LeCun et al. 1998, LeNet-5) for small square images.

    Two 5x5 convolutions (padding 2, so any size >= 4 works) each followed by ReLU and 2x2 max pooling, then
    fully connected layers 120 and 84 (LeNet-5's widths) and the ``n_classes`` logits. The papers audit LeNet on
    MNIST (seeds/002 Table 1 "LeNet"; seeds/004 Table "MNIST ... LeNet5"); the default here is 8x8 digits.

    Parameters
    ----------
    in_channels : int, default 1
    n_classes : int, default 10
    image_size : int, default 8
        Height = width of the input (8 for digits, 28 for MNIST, 32 for CIFAR-10/SVHN).
    channels : (int, int), default (6, 16)
        Feature maps of the two convolutions (LeNet-5's 6 and 16).
    hidden : sequence of int, default (120, 84)
        Widths of the fully connected layers (LeNet-5's 120 and 84).

    Examples
    --------
    >>> import torch
    >>> LeNet(image_size=8)(torch.zeros(2, 1, 8, 8)).shape
    torch.Size([2, 10])
    """

    def __init__(
        self,
        in_channels: int = 1,
        n_classes: int = 10,
        image_size: int = 8,
        *,
        channels: Sequence[int] = (6, 16),
        hidden: Sequence[int] = (120, 84),
    ):
        super().__init__()
        in_channels, n_classes, image_size = (
            _positive_ints(k, [v])[0]
            for k, v in (("in_channels", in_channels), ("n_classes", n_classes), ("image_size", image_size))
        )
        if image_size < 4:
            raise ConfigError(f"LeNet image_size must be >= 4 (two 2x2 poolings), got {image_size}")
        if n_classes < 2:
            raise ConfigError(f"LeNet n_classes must be >= 2, got {n_classes}")
        conv = _positive_ints("channels", channels)
        if len(conv) != 2:
            raise ConfigError(f"LeNet channels must be two integers (conv1, conv2), got {tuple(channels)}")
        c1, c2 = conv
        hidden = _positive_ints("hidden", hidden)
        self.in_channels, self.n_classes, self.image_size = in_channels, n_classes, image_size
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, c1, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(c1, c2, kernel_size=5, padding=2),
            nn.ReLU(),
            nn.MaxPool2d(2),
        )
        side = (image_size // 2) // 2
        layers: list = [nn.Flatten()]
        width = c2 * side * side
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, n_classes))
        self.classifier = nn.Sequential(*layers)

    def forward(self, x: Any) -> Any:
        return self.classifier(self.features(x))


class MLP(nn.Module):
    """A multilayer perceptron on flattened inputs: Linear-ReLU blocks then the logits.

    Parameters
    ----------
    in_features : int
        Length of a flattened input (``d`` for tabular data, ``C*H*W`` for images).
    n_classes : int
    hidden : sequence of int, default (128, 64)
        Hidden widths (this project's choice; the GAD paper, seeds/001 Sec. V-A, uses a 5-dense-layer network
        for its extraction model without giving widths).

    Examples
    --------
    >>> import torch
    >>> MLP(5, 2)(torch.zeros(3, 5)).shape
    torch.Size([3, 2])
    """

    def __init__(self, in_features: int, n_classes: int, *, hidden: Sequence[int] = (128, 64)):
        super().__init__()
        in_features = _positive_ints("in_features", [in_features])[0]
        n_classes = _positive_ints("n_classes", [n_classes])[0]
        if n_classes < 2:
            raise ConfigError(f"MLP n_classes must be >= 2, got {n_classes}")
        self.in_features, self.n_classes = in_features, n_classes
        layers: list = [nn.Flatten()]
        width = in_features
        for h in _positive_ints("hidden", hidden) if len(tuple(hidden)) else ():
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, n_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x: Any) -> Any:
        return self.net(x)


@register_arch("lenet")
def build_lenet(input_shape: Sequence[int], n_classes: int) -> Any:
    """LeNet for square images of shape ``(C, S, S)``."""
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3 or shape[1] != shape[2]:
        raise ConfigError(
            f"arch 'lenet' needs square images (C, S, S), got input shape {shape}; use arch 'mlp' for tabular data"
        )
    return LeNet(in_channels=shape[0], n_classes=n_classes, image_size=shape[1])


@register_arch("mlp")
def build_mlp(input_shape: Sequence[int], n_classes: int) -> Any:
    """MLP on the flattened input."""
    shape = tuple(int(s) for s in input_shape)
    if not shape or any(s < 1 for s in shape):
        raise ConfigError(f"arch 'mlp' needs a non-empty input shape, got {shape}")
    return MLP(int(np.prod(shape)), n_classes)


# ----------------------------------------------------------------------------------------------------------------
# image models of the examiner paper (inputs in [0, 1], normalised inside)
# ----------------------------------------------------------------------------------------------------------------
class Normalize(nn.Module):
    """``(x - mean) / std`` with fixed constants (default 0.5 and 0.25: [0, 1] pixels to about [-2, 2]).

    Examples
    --------
    >>> import torch
    >>> Normalize()(torch.ones(1, 3, 2, 2)).max().item()
    2.0
    """

    def __init__(self, mean: float = 0.5, std: float = 0.25):
        super().__init__()
        if not std > 0:
            raise ConfigError(f"Normalize std must be > 0, got {std}")
        self.mean, self.std = float(mean), float(std)

    def forward(self, x: Any) -> Any:
        return (x - self.mean) / self.std

    def extra_repr(self) -> str:
        return f"mean={self.mean}, std={self.std}"


def _image_shape(arch: str, input_shape: Sequence[int], min_size: int) -> Tuple[int, int]:
    shape = tuple(int(s) for s in input_shape)
    if len(shape) != 3 or min(shape) < 1:
        raise ConfigError(f"arch {arch!r} needs images (C, H, W), got input shape {shape}")
    if min(shape[1:]) < min_size:
        raise ConfigError(f"arch {arch!r} needs images of at least {min_size}x{min_size} px, got {shape[1]}x{shape[2]}")
    return shape[0], max(shape[1:])


def _check_classes(arch: str, n_classes: int) -> int:
    n = _positive_ints("n_classes", [n_classes])[0]
    if n < 2:
        raise ConfigError(f"arch {arch!r}: n_classes must be >= 2, got {n}")
    return n


@register_arch("small_cnn")
def build_small_cnn(input_shape: Sequence[int], n_classes: int, *, width: int = 32) -> nn.Module:
    """A 4-conv CNN with batch norm and global average pooling (this project's fast CPU profile), on [0, 1] images."""
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
    from torchvision.models import alexnet as tv_alexnet

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
    from torchvision.models import resnet34 as tv_resnet34

    channels, size = _image_shape("resnet34", input_shape, 8)
    n_classes = _check_classes("resnet34", n_classes)
    m = tv_resnet34(weights=None, num_classes=n_classes)
    m.conv1 = nn.Conv2d(channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
    if size <= 32:
        m.maxpool = nn.Identity()
    return nn.Sequential(Normalize(), m)
