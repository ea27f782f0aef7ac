"""Target models of the examiner experiments: torchvision's ResNet34 and AlexNet, untrained, adapted to small images.

Caveats first:

* No pretrained weights are ever downloaded (``weights=None``); the architectures are adapted to 32-64 px inputs:
  ResNet34's first convolution becomes 3x3 / stride 1 without the max-pool (the CIFAR recipe); AlexNet's feature
  extractor keeps its five convolutions with small kernels and strides and its classifier is resized to
  ``width_classifier`` units, with an adaptive pool of ``pool_size``.
* ``small_cnn`` is our own 4-layer CNN for the fast CPU profile: ResNet34 (21 M parameters) trains at about
  50 images/s on 2 CPU cores at 32 px, too slow for a 10-minute nightly stage. The paper profile uses ResNet34.
* Images are uint8 ``(n, H, W, 3)`` as the renderer returns them; :func:`to_tensor` scales them to [0, 1] and
  normalises per channel with fixed constants (0.5, 0.25), so a model needs no statistics from the data.

Reference: M. Shu et al., "Identifying Model Weakness with Adversarial Examiner", AAAI 2020 (``seeds/000``),
Sec. 4.1: ResNet34 (lr 0.005) and AlexNet (lr 0.001), Adam, 40 epochs.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional

import numpy as np

from weakspot.errors import ConfigError, DataError, ModelError
from weakspot.registry import Registry

ARCHITECTURES = Registry("architecture")

#: Adam learning rates of the paper (Sec. 4.1); ``small_cnn`` uses AlexNet's.
PAPER_LR: Dict[str, float] = {"resnet34": 0.005, "alexnet": 0.001, "small_cnn": 0.001}


@ARCHITECTURES.register("resnet34")
def resnet34(num_classes: int, resolution: int = 32):
    """torchvision ResNet34 (untrained) with a 3x3/stride-1 stem and no max-pool, for 32-64 px inputs."""
    import torch.nn as nn
    from torchvision.models import resnet34 as tv_resnet34

    m = tv_resnet34(weights=None, num_classes=num_classes)
    m.conv1 = nn.Conv2d(3, 64, kernel_size=3, stride=1, padding=1, bias=False)
    if resolution <= 32:
        m.maxpool = nn.Identity()
    return m


@ARCHITECTURES.register("alexnet")
def alexnet(num_classes: int, resolution: int = 32, width_classifier: int = 512, pool_size: int = 2):
    """torchvision AlexNet (untrained): same 5 conv + 3 FC layout, first conv 5x5/stride 1 and 2x2 pools for small
    images, adaptive pool to ``pool_size`` and a ``width_classifier``-wide classifier (4096 in the original)."""
    import torch.nn as nn
    from torchvision.models import alexnet as tv_alexnet

    m = tv_alexnet(weights=None, num_classes=num_classes)
    m.features = nn.Sequential(
        nn.Conv2d(3, 64, kernel_size=5, stride=1, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(64, 192, kernel_size=3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        nn.Conv2d(192, 384, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(384, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True),
        nn.Conv2d(256, 256, kernel_size=3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),
    )
    m.avgpool = nn.AdaptiveAvgPool2d((pool_size, pool_size))
    m.classifier = nn.Sequential(
        nn.Dropout(0.5), nn.Linear(256 * pool_size * pool_size, width_classifier), nn.ReLU(inplace=True),
        nn.Dropout(0.5), nn.Linear(width_classifier, width_classifier), nn.ReLU(inplace=True),
        nn.Linear(width_classifier, num_classes),
    )
    return m


@ARCHITECTURES.register("small_cnn")
def small_cnn(num_classes: int, resolution: int = 32, width: int = 32):
    """A 4-conv CNN with batch norm and global average pooling (fast CPU profile)."""
    import torch.nn as nn

    def block(i, o):
        return [nn.Conv2d(i, o, 3, padding=1, bias=False), nn.BatchNorm2d(o), nn.ReLU(inplace=True)]

    w = width
    return nn.Sequential(
        *block(3, w), nn.MaxPool2d(2), *block(w, 2 * w), nn.MaxPool2d(2), *block(2 * w, 4 * w), nn.MaxPool2d(2),
        *block(4 * w, 4 * w), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, num_classes),
    )


def build_model(arch: str, num_classes: int, resolution: int = 32):
    """Build an untrained architecture from :data:`ARCHITECTURES` by name."""
    if num_classes < 2:
        raise ConfigError(f"num_classes: need at least 2 classes, got {num_classes}")
    return ARCHITECTURES.get(arch)(num_classes=num_classes, resolution=resolution)


def to_tensor(images: np.ndarray, device=None):
    """uint8 ``(n, H, W, 3)`` -> float ``(n, 3, H, W)`` normalised with fixed constants."""
    import torch

    a = np.asarray(images)
    if a.ndim != 4 or a.shape[-1] != 3:
        raise DataError(f"images: expected shape (n, H, W, 3), got {a.shape}")
    t = torch.from_numpy(np.ascontiguousarray(a)).to(device=device)
    t = t.permute(0, 3, 1, 2).float().div_(255.0)
    return (t - 0.5) / 0.25


def predict_proba(model, images: np.ndarray, *, batch_size: int = 256, device=None) -> np.ndarray:
    """Softmax probabilities ``(n, k)`` of ``model`` on uint8 images, in batches, in eval mode."""
    import torch

    if device is None:
        device = next(model.parameters()).device
    model.eval()
    out = []
    with torch.no_grad():
        for s in range(0, len(images), batch_size):
            logits = model(to_tensor(images[s:s + batch_size], device))
            out.append(torch.softmax(logits.float(), -1).cpu().numpy())
    if not out:
        return np.zeros((0, 0))
    p = np.concatenate(out)
    if not np.all(np.isfinite(p)):
        raise ModelError("predict_proba: the model produced NaN or inf probabilities")
    return p


def train_model(
    arch: str,
    images: np.ndarray,
    labels: np.ndarray,
    *,
    num_classes: int,
    epochs: int = 40,
    lr: Optional[float] = None,
    batch_size: int = 64,
    seed: int = 0,
    device: str = "auto",
    augment: bool = True,
    progress: Optional[Callable[[int, int, float], None]] = None,
):
    """Train an untrained architecture with Adam (paper Sec. 4.1) on uint8 images; returns the model in eval mode.

    Parameters
    ----------
    arch : str
        ``resnet34``, ``alexnet`` or ``small_cnn``.
    images : uint8 array (n, H, W, 3)
    labels : int array (n,)
    num_classes : int
    epochs : int, default 40
        Paper Sec. 4.1.
    lr : float, optional
        Adam learning rate; default :data:`PAPER_LR` (0.005 ResNet34, 0.001 AlexNet, paper Sec. 4.1).
    batch_size : int, default 64
        Not given in the paper.
    seed : int, default 0
        Seeds the initial weights, the shuffling and the augmentation.
    device : str, default "auto"
    augment : bool, default True
        Random horizontal flips (cheap, batched); the paper does not say.
    progress : callable(epoch, epochs, mean_loss), optional
    """
    import torch

    from weakspot.device import resolve_device

    images = np.asarray(images)
    labels = np.asarray(labels)
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise DataError(f"images: expected uint8 (n, H, W, 3), got {images.dtype} {images.shape}")
    if labels.shape != (len(images),):
        raise DataError(f"labels: expected shape ({len(images)},), got {labels.shape}")
    if len(images) == 0:
        raise DataError("images: the training set is empty")
    if labels.min() < 0 or labels.max() >= num_classes:
        raise DataError(f"labels: must lie in [0, {num_classes}), got [{labels.min()}, {labels.max()}]")
    if epochs < 1 or batch_size < 1:
        raise ConfigError(f"epochs and batch_size must be >= 1, got {epochs}, {batch_size}")
    dev = resolve_device(device)
    lr = PAPER_LR.get(arch, 0.001) if lr is None else float(lr)
    gen = torch.Generator().manual_seed(int(seed))
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        model = build_model(arch, num_classes, images.shape[1]).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    x_all = to_tensor(images)  # on CPU; batches move to the device
    y_all = torch.as_tensor(labels, dtype=torch.long)
    n = len(images)
    for ep in range(epochs):
        model.train()
        perm = torch.randperm(n, generator=gen)
        total = 0.0
        for s in range(0, n, batch_size):
            idx = perm[s:s + batch_size]
            if len(idx) < 2 and n >= 2:  # batch norm needs two samples
                continue
            xb = x_all[idx]
            if augment:
                flip = torch.rand(len(idx), generator=gen) < 0.5
                xb = torch.where(flip[:, None, None, None], xb.flip(-1), xb)
            xb, yb = xb.to(dev), y_all[idx].to(dev)
            with torch.random.fork_rng(devices=[]):  # dropout draws from a seed tied to (seed, epoch, batch)
                torch.manual_seed(int(seed) * 1_000_003 + ep * 10_007 + s)
                loss = torch.nn.functional.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
        if progress is not None:
            progress(ep + 1, epochs, total / n)
    model.eval()
    return model


def model_state(model) -> Dict[str, "object"]:
    """``state_dict`` on CPU (for ``save_torch``)."""
    return {k: v.detach().cpu() for k, v in model.state_dict().items()}


def load_model(arch: str, state: Dict, num_classes: int, resolution: int = 32, device: str = "auto"):
    """Rebuild ``arch`` and load a ``state_dict`` (as saved by :func:`model_state`)."""
    from weakspot.device import resolve_device

    m = build_model(arch, num_classes, resolution)
    try:
        m.load_state_dict(state)
    except RuntimeError as e:
        raise ModelError(f"load_model: state does not fit architecture {arch!r} with {num_classes} classes: {e}") \
            from None
    return m.to(resolve_device(device)).eval()
