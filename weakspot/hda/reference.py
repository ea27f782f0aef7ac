"""The reference network FID is computed on (seeds/004 uses Inception's features; none can be downloaded here): a small
CNN this stage trains on the target's training sample, independent of the audited model.

Caveats first:

* The audited model's own features are the wrong ruler for its AEs: an AE is made to move them across the decision
  boundary, so a near-invisible AE scored worse there than visible sign noise did (issue 24: 97.6 against 5.0). The
  VAE's features rank them wrongly too (0.34 against 0.21). A second network trained on real data, with its own
  seed and architecture (:func:`weakspot.models.archs.build_small_cnn`), sees the images and not the audited
  model's boundary; AEs transfer to it only partly.
* The features are every block's ReLU output averaged over space, concatenated (a multi-scale summary like the
  several Inception layers some FID variants use): the first blocks see pixel-level texture such as noise, the
  last the class. They are not Inception's: FIDs compare methods within a target, never with the paper's numbers.
* Training is seeded and deterministic on the CPU; its test accuracy is reported beside the FIDs, so a reference that
  learnt nothing (chance accuracy) shows.

Example
-------
>>> import numpy as np
>>> X = np.random.default_rng(0).random((40, 1, 8, 8)).astype(np.float32)
>>> ref = train_reference(X, np.arange(40) % 2, 2, width=4, train=40, epochs=1, seed=0)
>>> ref.features(X).shape
(40, 44)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, List, Optional

import numpy as np
import torch

from weakspot.errors import DataError


@dataclass
class Reference:
    """A trained reference CNN and what it is, for the report."""

    module: torch.nn.Module
    width: int
    n_train: int
    epochs: int
    test_accuracy: Optional[float]
    device: Any = "cpu"
    batch: int = 1024

    @property
    def label(self) -> str:
        acc = "" if self.test_accuracy is None else f", test accuracy {self.test_accuracy:.1%}"
        return (
            f"a reference CNN trained by this stage (4 conv blocks from width {self.width}, {self.n_train} "
            f"training inputs, {self.epochs} epoch{'s' if self.epochs != 1 else ''}{acc}; every block's ReLU "
            "averaged over space)"
        )

    def info(self) -> dict:
        """Its settings and test accuracy, for the metrics."""
        return {
            "width": self.width,
            "n_train": self.n_train,
            "epochs": self.epochs,
            "test_accuracy": None if self.test_accuracy is None else round(float(self.test_accuracy), 4),
        }

    def features(self, X: np.ndarray) -> np.ndarray:
        """Every block's ReLU output averaged over space, concatenated: ``(n, features)`` float64."""
        relus = [m for m in self.module.modules() if isinstance(m, torch.nn.ReLU)]
        rows: List[np.ndarray] = []
        for i in range(0, len(X), self.batch):
            out: List[torch.Tensor] = []
            hooks = [r.register_forward_hook(lambda m, a, o: out.append(o.mean(dim=(2, 3)))) for r in relus]
            try:
                with torch.no_grad():
                    self.module(torch.as_tensor(np.asarray(X[i : i + self.batch], np.float32), device=self.device))
            finally:
                for h in hooks:
                    h.remove()
            rows.append(torch.cat(out, 1).cpu().numpy())
        return np.concatenate(rows).astype(np.float64) if rows else np.zeros((0, 1))


def train_reference(
    X: np.ndarray,
    y: np.ndarray,
    n_classes: int,
    *,
    width: int = 16,
    train: int = 3000,
    epochs: int = 10,
    lr: float = 2e-3,
    batch_size: int = 64,
    seed: int = 0,
    device: Any = "cpu",
    X_test: Optional[np.ndarray] = None,
    y_test: Optional[np.ndarray] = None,
    progress: Any = None,
) -> Reference:
    """Train the reference CNN on a seeded sample of ``train`` rows of images ``X`` ``(n, c, h, w)`` (h, w >= 8)."""
    from weakspot.models.archs import build_small_cnn
    from weakspot.models.train import train_torch_classifier

    X = np.asarray(X, np.float32)
    if X.ndim != 4 or min(X.shape[2:]) < 8:
        raise DataError(f"HDA's FID reference network needs images (n, c, h, w) of at least 8x8 pixels, got {X.shape}")
    keep = np.sort(np.random.default_rng(int(seed)).permutation(len(X))[: int(train)])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed) + 1)  # not the audited model's initialisation, whatever seed that used
        module = build_small_cnn(X.shape[1:], int(n_classes), width=int(width))
    train_torch_classifier(
        module,
        X[keep],
        np.asarray(y, np.int64)[keep],
        epochs=int(epochs),
        lr=float(lr),
        batch_size=int(batch_size),
        seed=int(seed) + 1,
        device=device,
        progress=None
        if progress is None
        else (lambda what, done, total: progress(f"FID reference network: {what}", done, total)),
    )
    module.eval()
    acc = None
    if X_test is not None and len(X_test):
        with torch.no_grad():
            pred = torch.cat(
                [
                    module(torch.as_tensor(np.asarray(X_test[i : i + 1024], np.float32), device=device)).argmax(1).cpu()
                    for i in range(0, len(X_test), 1024)
                ]
            ).numpy()
        acc = float((pred == np.asarray(y_test)).mean())
    return Reference(module, int(width), int(len(keep)), int(epochs), acc, device)
