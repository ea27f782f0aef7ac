"""An independent realism judge for generated inputs: a reference classifier trained on the real training images and
the distance to the nearest real training image, calibrated on real held-out images.

Caveats first:

* Independent of the generator (it never sees a code or a decoding while it learns) and of the audited model (its
  own weights, trained here; on digits it is a LeNet as the audited model is, with another seed and input
  normalisation). It is small and trained for seconds (``reference_epochs`` capped by ``reference_max_steps``), so it
  is a weaker classifier than the audited one: its accuracy on the real held-out images is part of the verdict
  (:attr:`RealismJudge.accuracy`) and a weak reference makes ``pair`` a weak test.
* An image *passes* when all three hold: ``pair`` -- the reference's top two classes are the image's claimed pair
  (for a corner case the audited model's top two; for any control image its own top two under the audited model,
  the same rule) -- ``near`` -- its RMS pixel distance to the nearest training image is at most the
  ``near_quantile`` of the same distance for real held-out images (the calibration half,
  :attr:`RealismJudge.near_threshold`) -- and ``sharp`` -- its total variation (mean absolute difference of
  neighbouring pixels) is at least the ``1 - near_quantile`` quantile of the same real images'
  (:attr:`RealismJudge.sharp_threshold`). A real held-out image passes ``near`` and ``sharp`` about
  ``near_quantile`` of the time each by construction; ``pair`` asks a real image's runner-up class to agree too,
  which a confident image need not, so real images are a control for ``near`` and ``sharp``, not for ``pair``.
* Pixel distance alone is a coarse realism test: a blurred average of two training digits is nearer a training
  digit than a sharp real one is, which is why ``sharp`` is part of the verdict. Read "passes" as "about as near
  the data and as sharp as a real image, and between the same two classes for a second classifier", not as "a
  person would take it for real".
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple

import numpy as np

from weakspot.corner.realism import nearest_train_distance, total_variation
from weakspot.errors import DataError


@dataclass
class RealismJudge:
    """A reference classifier, the training images it measures nearness against, and the nearness threshold.

    Attributes
    ----------
    reference : weakspot.models.TorchClassifier
    train : array ``(n, C, H, W)``
        The real training images (nearest-neighbour distances are to these).
    near_threshold : float
        RMS pixel distance at or below which an image counts as near the data.
    calibration : array
        The real held-out images' nearest-training distances the threshold is the quantile of.
    sharp_threshold : float
        Total variation at or above which an image counts as sharp as a real one.
    accuracy : float
        The reference's accuracy on the real held-out images it is judged against (the control half).
    epochs : int
    """

    reference: Any
    train: np.ndarray
    near_threshold: float
    calibration: np.ndarray
    sharp_threshold: float
    accuracy: float
    epochs: int

    def verdict(self, images: Any, a: Any, b: Any) -> Dict[str, np.ndarray]:
        """Per image: ``pair`` (the reference's top two are ``{a, b}``), ``near``, ``sharp``, ``passed`` (all three),
        ``distance`` (to the nearest training image)."""
        x = np.asarray(images, np.float32)
        a, b = np.asarray(a, np.int64), np.asarray(b, np.int64)
        if x.ndim != 4 or x.shape[1:] != self.train.shape[1:] or a.shape != (len(x),) or b.shape != (len(x),):
            raise DataError(
                f"judge: images {x.shape} must be (n, *{self.train.shape[1:]}) with one class pair each "
                f"(got {a.shape} and {b.shape})"
            )
        if not len(x):
            z = np.zeros(0, bool)
            return {"pair": z, "near": z, "sharp": z, "passed": z, "distance": np.zeros(0)}
        top = np.argsort(-np.asarray(self.reference.predict_proba(x), np.float64), axis=1)[:, :2]
        pair = np.sort(top, axis=1)
        pair_ok = (pair[:, 0] == np.minimum(a, b)) & (pair[:, 1] == np.maximum(a, b)) & (a != b)
        dist = nearest_train_distance(x, self.train)
        near = dist <= self.near_threshold
        sharp = total_variation(x) >= self.sharp_threshold
        return {"pair": pair_ok, "near": near, "sharp": sharp, "passed": pair_ok & near & sharp, "distance": dist}


def reference_epochs(n: int, epochs: int, max_steps: int, batch_size: int = 64) -> int:
    """``epochs``, capped so that ``epochs * ceil(n / batch_size) <= max_steps`` (at least one)."""
    return max(1, min(int(epochs), int(max_steps) // max(1, math.ceil(n / batch_size))))


def train_reference(X: np.ndarray, y: np.ndarray, n_classes: int, *, epochs: int, seed: int) -> Any:
    """A normalised LeNet trained ``epochs`` epochs with Adam (lr 2e-3, batch 64) on images ``X``: the reference."""
    import torch

    from weakspot.models import LeNet, Normalize, TorchClassifier, train_torch_classifier

    if X.ndim != 4 or X.shape[2] != X.shape[3] or len(X) != len(y):
        raise DataError(
            f"judge: the reference needs square images (n, C, S, S) and one label each, got {X.shape} and {np.shape(y)}"
        )
    with torch.random.fork_rng(devices=[]):  # seeded weights without touching the caller's random state
        torch.manual_seed(int(seed))
        m = torch.nn.Sequential(Normalize(), LeNet(int(X.shape[1]), int(n_classes), int(X.shape[2])))
    train_torch_classifier(m, X, y, epochs=int(epochs), lr=2e-3, batch_size=64, seed=int(seed), device="cpu")
    return TorchClassifier(m, n_classes=int(n_classes), device="cpu")


def split_heldout(n: int, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """Two disjoint seeded halves of ``n`` held-out rows: (calibration, control)."""
    perm = np.random.default_rng([int(seed) % (2**32), 11]).permutation(int(n))
    return np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])


def fit_judge(
    X: np.ndarray,
    y: np.ndarray,
    X_held: np.ndarray,
    y_held: np.ndarray,
    n_classes: int,
    *,
    train: int = 4000,
    epochs: int = 20,
    max_steps: int = 600,
    quantile: float = 0.95,
    seed: int = 0,
) -> RealismJudge:
    """The judge of images like ``X`` (real training images, labels ``y``), calibrated on real held-out images.

    The held-out rows are split in two seeded halves (:func:`split_heldout`): the nearness threshold is the
    ``quantile`` of the first half's nearest-training distances, the sharpness threshold the ``1 - quantile`` one of
    its total variations, the reference's :attr:`~RealismJudge.accuracy` is
    measured on the second (the control the report judges as real images).

    Raises
    ------
    DataError
        Fewer than 10 held-out images, or images that do not match.
    """
    X, X_held = np.asarray(X, np.float32), np.asarray(X_held, np.float32)
    y, y_held = np.asarray(y, np.int64), np.asarray(y_held, np.int64)
    if len(X_held) < 10 or X_held.shape[1:] != X.shape[1:] or len(y_held) != len(X_held):
        raise DataError(
            f"judge: needs at least 10 labelled held-out images like the training images {X.shape[1:]}, "
            f"got {X_held.shape} with {len(y_held)} labels"
        )
    rows = np.sort(np.random.default_rng([int(seed) % (2**32), 13]).permutation(len(X))[:train])
    ep = reference_epochs(len(rows), epochs, max_steps)
    ref = train_reference(X[rows], y[rows], n_classes, epochs=ep, seed=int(seed) + 1)
    cal, ctl = split_heldout(len(X_held), seed)
    d = nearest_train_distance(X_held[cal], X)
    acc = float(np.mean(ref.predict(X_held[ctl]) == y_held[ctl]))
    tv = total_variation(X_held[cal])
    return RealismJudge(
        reference=ref,
        train=X,
        near_threshold=float(np.quantile(d, quantile)),
        calibration=d,
        sharp_threshold=float(np.quantile(tv, 1.0 - quantile)),
        accuracy=acc,
        epochs=ep,
    )


def wilson(k: int, n: int) -> Optional[Tuple[float, float]]:
    """The 95% Wilson interval of ``k`` successes in ``n`` (None when ``n`` is 0)."""
    if n <= 0:
        return None
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(int(k), int(n), alpha=0.05, method="wilson")
    return float(lo), float(hi)
