"""t-SNE of rendered images, the embedding behind the paper's Fig. 3 (random against examined scenes), Fig. 4 (the
planted weakness) and Fig. 6 (the two RL factor orders).

Caveats first: it embeds raw pixels scaled to [0, 1] (no learnt features), with scikit-learn's TSNE seeded by
``seed`` and a perplexity that fits small sets (at most 30, at least 2, a third of the images).

Reference: M. Shu, C. Liu, W. Qiu, A. Yuille, "Identifying Model Weakness with Adversarial Examiner", AAAI 2020
(``seeds/000``): Fig. 3, 4 and 6.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np


def tsne(X: np.ndarray, seed: int) -> np.ndarray:
    """2-D t-SNE ``(n, 2)`` of uint8 images ``(n, H, W, 3)``."""
    from sklearn.manifold import TSNE

    X = X.reshape(len(X), -1).astype(np.float32) / 255.0
    perplexity = float(max(2, min(30, (len(X) - 1) // 3)))
    return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(X)


def random_and_examined(
    random: Any, examined: Any, limit: Optional[int] = None
) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The last images of a T = 0 session (at most ``limit``) followed by an examining session's, as the t-SNE figures
    set them side by side: ``(images, is_examined, wrong)``, ``wrong`` where the model's prediction missed."""
    r_images, r_pred = list(random.tail_images)[:limit], list(random.tail_pred)[:limit]
    imgs = np.stack(r_images + list(examined.tail_images))
    wrong = np.array([p != random.label for p in r_pred] + [p != examined.label for p in examined.tail_pred])
    is_ex = np.r_[np.zeros(len(r_images), bool), np.ones(len(examined.tail_images), bool)]
    return imgs, is_ex, wrong
