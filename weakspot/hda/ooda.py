"""Which test cases are "in distribution" (seeds/004 Table 7's "% of valid AEs") and the OODA baseline built on it.

OODA (out-of-distribution-aware testing, Dola et al. 2021, as seeds/004 Sec. 4.2.2 describes it) generates AEs with an
attack around random seeds and keeps only those whose reconstruction probability under a VAE reaches a threshold:
it rules out the worst AEs rather than searching where the data are dense.

Caveats first:

* The VAE is HDA's own (:mod:`weakspot.hda.density`), the reconstruction probability An and Cho's (the decoder's
  Bernoulli log-likelihood, averaged over codes drawn from the encoder's Gaussian).
* The threshold is ours: the ``hda.ooda.quantile`` quantile of the reconstruction probability of held-out real
  inputs (the validation split, never the VAE's training inputs), so that share of real inputs would be called
  invalid. Dola et al. tune theirs per data set; the paper notes the threshold is a threat to validity.
* The attack is PGD (the white-box generator of Table 6) on the same seeds: OODA's AEs are PGD's AEs that pass the
  filter, so it runs only on a white-box model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from weakspot.errors import DataError


@dataclass
class Validity:
    """The reconstruction-probability threshold of a VAE, calibrated on held-out real inputs."""

    density: Any
    threshold: float
    quantile: float
    n_reference: int
    samples: int = 8
    seed: int = 0

    def __call__(self, X: np.ndarray) -> np.ndarray:
        """Whether each input's reconstruction probability reaches the threshold."""
        if not len(X):
            return np.zeros(0, bool)
        return self.density.reconstruction_log_prob(X, samples=self.samples, seed=self.seed) >= self.threshold


def calibrate(
    density: Any, X_reference: np.ndarray, *, quantile: float = 0.05, samples: int = 8, seed: int = 0
) -> Validity:
    """The threshold: the ``quantile`` of held-out real inputs' reconstruction probability."""
    if len(X_reference) < 2:
        raise DataError(f"OODA's validity threshold needs at least 2 held-out inputs, got {len(X_reference)}")
    scores = density.reconstruction_log_prob(X_reference, samples=samples, seed=seed)
    return Validity(
        density, float(np.quantile(scores, quantile)), float(quantile), int(len(X_reference)), int(samples), int(seed)
    )
