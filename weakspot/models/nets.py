"""The torch modules of the built-in architectures (:mod:`weakspot.models.archs`): :class:`LeNet`, :class:`MLP` and
:class:`Normalize`. Apart from the registry so that naming or validating an architecture does not import torch."""

from __future__ import annotations

from typing import Any, Callable, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn

from weakspot.errors import ConfigError


LossFn = Callable[[nn.Module, torch.Tensor, torch.Tensor, torch.Generator], Tuple[torch.Tensor, torch.Tensor]]
"""``loss_fn(module, xb, yb, generator) -> (scalar loss, logits)``: a training loss other than cross-entropy
(:func:`weakspot.models.train.train_torch_classifier`'s ``loss_fn``)."""


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
